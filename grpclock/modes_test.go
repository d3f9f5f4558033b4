package grpclock_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/grpclock/internal/testsvc"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

// TestModes runs the RPC adapters' lock-mode scenarios (shared readers and
// methods, permits, several names, on unary calls and streams) through
// grpclock's interceptors, with keys of two fields and of a repeated field
// besides the shared ones.
func TestModes(t *testing.T) {
	id := adaptertest.Uniq(t)
	tenant, tags := "t"+id, []string{"x" + id, "y" + id, "x" + id}
	tagKey := must(keyfunc.Template("tag:{field.order.tags[*]}"))
	adaptertest.RunRPCModes(t, adaptertest.RPC{
		Serve:   serveModes,
		Code:    codeOf,
		Streams: true,
		NameCases: []adaptertest.RPCNameCase{
			{Name: "two fields", Key: must(keyfunc.Templates("order:{field.order.id}", "tenant:{field.tenant}")),
				Names: []string{"order:" + keyfunc.Escape(id), "tenant:" + keyfunc.Escape(tenant)},
				Req:   adaptertest.RPCRequest{ID: id, Tenant: tenant}},
			{Name: "repeated field", Key: tagKey, // a repeated item is taken once
				Names: []string{"tag:" + keyfunc.Escape(tags[0]), "tag:" + keyfunc.Escape(tags[1])},
				Req:   adaptertest.RPCRequest{ID: id, Tags: tags}},
		},
		BadRequests: []adaptertest.RPCBadCase{
			{Name: "no items", Key: tagKey, Req: adaptertest.RPCRequest{ID: id}},
			{Name: "an empty item", Key: tagKey, Req: adaptertest.RPCRequest{ID: id, Tags: []string{"a", ""}}},
			{Name: "too many items", Key: tagKey, Req: adaptertest.RPCRequest{ID: id, Tags: tags}, MaxNames: 1},
		},
	})
}

// serveModes is grpclock's adaptertest.RPC.Serve: the unary and stream
// interceptors of mode around a service whose Do and Chat (its first
// message) run handle.
func serveModes(t *testing.T, e *adaptertest.Env, key keyfunc.Func, mode adaptertest.RPCMode, handle func(*core.Lease) error) adaptertest.RPCCall {
	t.Helper()
	opts := options.Of(mode)
	answer := func(ctx context.Context) (*testsvc.Reply, error) {
		l := grpclock.LeaseFromContext(ctx)
		if handle != nil {
			if err := handle(l); err != nil {
				return nil, status.Error(codes.FailedPrecondition, err.Error())
			}
		}
		return &testsvc.Reply{Lock: adaptertest.Describe(l)}, nil
	}
	client := serve(t, &service{
		do: func(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) { return answer(ctx) },
		chat: func(stream testsvc.Test_ChatServer) error {
			if _, err := stream.Recv(); err != nil {
				return err
			}
			reply, err := answer(stream.Context())
			if err != nil {
				return err
			}
			return stream.Send(reply)
		},
	}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, key, opts...)),
		grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, key, opts...)))
	return func(ctx context.Context, req adaptertest.RPCRequest) (string, error) {
		msg := &testsvc.Request{Tenant: req.Tenant, Order: &testsvc.Order{Id: req.ID, Tags: req.Tags}}
		ctx = metadata.AppendToOutgoingContext(ctx, req.Header...)
		if !req.Stream {
			reply, err := client.Do(ctx, msg)
			if err != nil {
				return "", err
			}
			return reply.Lock, nil
		}
		got, err := chatOnce(t, client, ctx, msg)
		if err == nil && len(got) != 1 {
			err = status.Errorf(codes.Unknown, "the stream answered %q, want one reply", got)
		}
		if err != nil {
			return "", err
		}
		return got[0], nil
	}
}

// codeOf is grpclock's adaptertest.RPC.Code.
func codeOf(err error) adaptertest.RPCCode {
	switch status.Code(err) {
	case codes.Aborted:
		return adaptertest.RPCBusy
	case codes.InvalidArgument:
		return adaptertest.RPCBadRequest
	case codes.Internal:
		return adaptertest.RPCInternal
	}
	return adaptertest.RPCOther
}

// TestBadOptions: options that contradict each other, or are empty, are
// set-up errors that name the package.
func TestBadOptions(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	options.CheckBadOptions(t, "grpclock", func(opts ...grpclock.Option) error { return grpclock.Check(e.Locker, orderKey, opts...) })
}

// TestCrossingOrders: calls that list the same two tags in opposite orders
// all get through, none beside another on either name: were the names
// taken one by one in the order given, two calls would hold one name each
// and wait for the other's until their wait ran out (Aborted).
func TestCrossingOrders(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	id := adaptertest.Uniq(t)
	a, b := "a"+id, "b"+id
	overlaps := map[string]*redistest.Overlap{a: {}, b: {}}
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		for _, tag := range req.Order.Tags {
			defer overlaps[tag].Enter()()
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
		return &testsvc.Reply{Lock: adaptertest.Describe(grpclock.LeaseFromContext(ctx))}, nil
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, must(keyfunc.Template("tag:{field.order.tags[*]}")))))
	for _, err := range adaptertest.Concurrently(16, func(i int) error {
		tags := []string{a, b}
		if i%2 == 1 {
			tags = []string{b, a}
		}
		_, err := client.Do(context.Background(), &testsvc.Request{Order: &testsvc.Order{Tags: tags}})
		return err
	}) {
		if err != nil {
			t.Error(err)
		}
	}
	for tag, o := range overlaps {
		if o.Entries() != 16 || o.Overlaps() != 0 {
			t.Errorf("%s: %d calls, %d overlapped; want 16 without overlaps", tag, o.Entries(), o.Overlaps())
		}
	}
}

// options are grpclock's option constructors for the shared scenarios.
var options = adaptertest.RPCOptions[grpclock.Option]{
	Wait:            grpclock.WithWait,
	Shared:          grpclock.WithShared,
	SharedMethods:   grpclock.WithSharedMethods,
	SharedIfNil:     grpclock.WithSharedIf(nil),
	Permits:         grpclock.WithPermits,
	MaxNames:        grpclock.WithMaxNames,
	RequestIDHeader: grpclock.WithRequestIDHeader,
	DoMethod:        testsvc.Test_Do_FullMethodName,
	OtherMethod:     "/reqlock.testsvc.Test/Other",
}
