package grpclock_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/grpclock/internal/testsvc"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

var orderKey = must(keyfunc.Template("order:{field.order.id}"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func order(id string) *testsvc.Request { return &testsvc.Request{Order: &testsvc.Order{Id: id}} }

// lockName is the handler of most tests: it answers the name it was locked under.
func lockName(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	if l := grpclock.LeaseFromContext(ctx); l != nil {
		return &testsvc.Reply{Lock: l.Name()}, nil
	}
	return &testsvc.Reply{Lock: "<none>"}, nil
}

func TestUnaryOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		x.Handle(req.Order.Id)
		return &testsvc.Reply{}, nil
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey)))
	x.Run(t, func(o string) error {
		_, err := client.Do(context.Background(), order(o))
		return err
	})
}

func TestUnaryStatusCodes(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	down := redistest.Start(t)
	dead := adaptertest.NewEnv(t, down, core.WithIOTimeout(300*time.Millisecond))
	down.Stop()

	tenantKey := must(keyfunc.Template("order:{field.order.id}:{header.x-tenant}"))
	var custom error
	for _, tc := range []struct {
		name string
		icpt grpc.UnaryServerInterceptor
		req  *testsvc.Request
		code codes.Code
		lock string
	}{
		{"locked", grpclock.UnaryServerInterceptor(e.Locker, orderKey), order("free" + id), codes.OK, "order:free" + keyfunc.Escape(id)},
		{"missing field", grpclock.UnaryServerInterceptor(e.Locker, orderKey), &testsvc.Request{}, codes.InvalidArgument, ""},
		{"empty field", grpclock.UnaryServerInterceptor(e.Locker, orderKey), order(""), codes.InvalidArgument, ""},
		{"missing metadata", grpclock.UnaryServerInterceptor(e.Locker, tenantKey), order("1"), codes.InvalidArgument, ""},
		{"busy", grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithWait(20*time.Millisecond)), order(id), codes.Aborted, ""},
		{"redis down", grpclock.UnaryServerInterceptor(dead.Locker, orderKey), order("1"), codes.Unavailable, ""},
		{"fail open", grpclock.UnaryServerInterceptor(dead.Locker, orderKey, grpclock.WithFailOpen()), order("1"), codes.OK, "<none>"},
		{"bad field path", grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Field("order.nope")), order("1"), codes.Internal, ""},
		{"path param", grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Param("id")), order("1"), codes.Internal, ""},
		{"bad key func", grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Param("")), order("1"), codes.Internal, ""},
		{"error handler", grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithWait(time.Millisecond),
			grpclock.WithErrorHandler(func(ctx context.Context, err error) error {
				custom = err
				return status.Error(codes.ResourceExhausted, "later")
			})), order(id), codes.ResourceExhausted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := serve(t, &service{do: lockName}, grpc.UnaryInterceptor(tc.icpt))
			reply, err := client.Do(context.Background(), tc.req)
			if status.Code(err) != tc.code || (err == nil && reply.Lock != tc.lock) {
				t.Fatalf("got %v, %v; want %v, lock %q", reply, err, tc.code, tc.lock)
			}
		})
	}
	if !errors.Is(custom, core.ErrTimeout) {
		t.Fatalf("the error handler got %v", custom)
	}
}

// TestInvalidSetupPanicsAtStart: a wrong set-up fails once, when the
// interceptor is built, with an error that names every problem; Check
// returns it without panicking.
func TestInvalidSetupPanicsAtStart(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	opts := []grpclock.Option{grpclock.WithWait(-time.Second), grpclock.WithTTL(-1), nil, grpclock.WithTTLFunc(nil),
		grpclock.WithErrorHandler(nil), grpclock.WithFailOpenHook(nil)}
	err := grpclock.Check(nil, orderKey, opts...)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "grpclock: ") {
		t.Fatalf("Check: %v, want a grpclock error wrapping ErrInvalidOption", err)
	}
	for _, want := range []string{"WithWait(-1s)", "WithTTL(-1ns)", "option 2 is nil", "WithTTLFunc: nil function",
		"WithErrorHandler: nil function", "WithFailOpenHook: nil function", "Locker is nil"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	for name, build := range map[string]func(){
		"unary":  func() { grpclock.UnaryServerInterceptor(nil, orderKey, opts...) },
		"stream": func() { grpclock.StreamServerInterceptor(nil, orderKey, opts...) },
	} {
		func() {
			defer func() {
				if p, ok := recover().(error); !ok || p.Error() != err.Error() {
					t.Errorf("%s: panicked with %v, want %v", name, p, err)
				}
			}()
			build()
		}()
	}
	if err := grpclock.Check(e.Locker, orderKey, grpclock.WithWait(0)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

func TestToStatus(t *testing.T) {
	for err, code := range map[error]codes.Code{
		keyfunc.ErrMissing: codes.InvalidArgument, keyfunc.ErrUnreadable: codes.InvalidArgument,
		core.ErrTimeout: codes.Aborted, core.ErrStorage: codes.Unavailable,
		context.Canceled: codes.Canceled, context.DeadlineExceeded: codes.DeadlineExceeded,
		core.ErrInvalidOption: codes.Internal, keyfunc.ErrUnsupported: codes.Internal,
	} {
		if got := status.Code(grpclock.ToStatus(err)); got != code {
			t.Errorf("%v: %v, want %v", err, got, code)
		}
	}
}

func TestFieldKinds(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	full := &testsvc.Request{Tenant: "acme", Order: &testsvc.Order{
		Id: "A:1", Number: -7, Shard: 3, Rush: true, Kind: testsvc.Kind_KIND_RETAIL, Version: proto.Int32(0),
		Tags: []string{"x"}, Blob: []byte("b"), Price: 1.5,
	}}
	for path, want := range map[string]string{
		"tenant": "acme", "order.id": "A%3A1", "order.number": "-7", "order.shard": "3", "order.rush": "true",
		"order.kind": "KIND_RETAIL", "order.version": "0",
	} {
		client := serve(t, &service{do: lockName}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Field(path))))
		reply, err := client.Do(context.Background(), full)
		if err != nil || reply.Lock != want {
			t.Errorf("%s: got %v, %v; want %q", path, reply, err, want)
		}
		// Unset, or a proto3 zero value, is missing.
		if _, err := client.Do(context.Background(), &testsvc.Request{Order: &testsvc.Order{}}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s unset: %v", path, err)
		}
	}
	unnamed := &testsvc.Request{Order: &testsvc.Order{Kind: 9}}
	client := serve(t, &service{do: lockName}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Field("order.kind"))))
	if reply, err := client.Do(context.Background(), unnamed); err != nil || reply.Lock != "9" {
		t.Errorf("enum number without a name: %v, %v", reply, err)
	}
	for _, path := range []string{"order.tags", "order.blob", "order.price", "order", "tenant.x", "order.nope"} {
		client := serve(t, &service{do: lockName}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, keyfunc.Field(path))))
		if _, err := client.Do(context.Background(), full); status.Code(err) != codes.Internal {
			t.Errorf("%s: %v, want Internal", path, err)
		}
	}
}

func TestReleasedAfterPanicAndRouteLabel(t *testing.T) {
	adaptertest.LeakCheck(t)
	var route adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(route.Handler()))
	id := adaptertest.Uniq(t)
	var heldInside bool
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		heldInside = e.Exists(t, "order:"+keyfunc.Escape(id))
		panic("handler bug")
	}}, grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(), grpclock.UnaryServerInterceptor(e.Locker, orderKey)))
	if _, err := client.Do(context.Background(), order(id)); err == nil {
		t.Fatalf("got %v", err)
	}
	if !heldInside || e.Exists(t, "order:"+keyfunc.Escape(id)) {
		t.Fatalf("held inside: %v; held after the panic: %v", heldInside, e.Exists(t, "order:"+keyfunc.Escape(id)))
	}
	if route.Last() != "/reqlock.testsvc.Test/Do" {
		t.Fatalf("AcquireCall.Route = %q", route.Last())
	}
}

func TestLostLeaseCancelsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), core.ErrNotHeld) {
				return &testsvc.Reply{Lock: "lost"}, nil
			}
			return nil, context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil, status.Error(codes.Unknown, "the context outlived the lease")
		}
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithTTL(50*time.Millisecond))))
	if reply, err := client.Do(context.Background(), order(adaptertest.Uniq(t))); err != nil || reply.Lock != "lost" {
		t.Fatalf("got %v, %v", reply, err)
	}
}

// chat is a stream handler that answers each message with the stream
// context's lease name, after taking the context before the first message.
func chat(stream testsvc.Test_ChatServer) error {
	ctx := stream.Context() // taken before the lock, as handlers do
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		name := "<none>"
		if l := grpclock.LeaseFromContext(ctx); l != nil {
			name = l.Name()
		}
		if err := stream.Send(&testsvc.Reply{Lock: name}); err != nil {
			return err
		}
	}
}

func chatOnce(t *testing.T, client testsvc.TestClient, ctx context.Context, reqs ...*testsvc.Request) ([]string, error) {
	t.Helper()
	s, err := client.Chat(ctx)
	if err != nil {
		return nil, err
	}
	var got []string
	for _, r := range reqs {
		if err := s.Send(r); err != nil {
			break
		}
		reply, err := s.Recv()
		if err != nil {
			return got, err
		}
		got = append(got, reply.Lock)
	}
	_ = s.CloseSend()
	_, err = s.Recv()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return got, err
}

func TestStreamLocksFromFirstMessageOrMetadata(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)

	byField := serve(t, &service{chat: chat}, grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, orderKey, grpclock.WithWait(50*time.Millisecond))))
	got, err := chatOnce(t, byField, context.Background(), order(id), order("other"))
	if want := "order:" + keyfunc.Escape(id); err != nil || len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("lock from the first message: %q, %v", got, err)
	}
	if e.Exists(t, "order:"+keyfunc.Escape(id)) {
		t.Fatal("still held after the stream ended")
	}
	if _, err := chatOnce(t, byField, context.Background(), &testsvc.Request{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("first message without an id: %v", err)
	}
	held, err := e.Locker.Acquire(context.Background(), "order:"+keyfunc.Escape(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chatOnce(t, byField, context.Background(), order(id)); status.Code(err) != codes.Aborted {
		t.Fatalf("busy: %v", err)
	}
	_ = held.Release(context.Background())

	byMetadata := serve(t, &service{chat: chat}, grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, must(keyfunc.Template("tenant:{header.x-tenant}")))))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	if got, err := chatOnce(t, byMetadata, ctx, order("1")); err != nil || len(got) != 1 || got[0] != "tenant:acme" {
		t.Fatalf("lock from metadata: %q, %v", got, err)
	}
	if _, err := chatOnce(t, byMetadata, context.Background(), order("1")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no metadata: %v", err)
	}
}

func TestStreamsOfOneOrderNeverOverlap(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	var o redistest.Overlap
	client := serve(t, &service{chat: func(stream testsvc.Test_ChatServer) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		defer o.Enter()()
		time.Sleep(time.Millisecond)
		return stream.Send(&testsvc.Reply{})
	}}, grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, orderKey)))
	id := adaptertest.Uniq(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := chatOnce(t, client, context.Background(), order(id)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if o.Entries() != 8 || o.Overlaps() != 0 {
		t.Fatalf("%d streams, %d overlapped", o.Entries(), o.Overlaps())
	}
}

// TestUnderSelector locks only the methods a go-grpc-middleware v2 selector
// picks.
func TestUnderSelector(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	only := func(method string) selector.Matcher {
		return selector.MatchFunc(func(_ context.Context, m interceptors.CallMeta) bool { return m.Method == method })
	}
	for method, want := range map[string]string{"Do": "order:7", "Chat": "<none>"} {
		client := serve(t, &service{do: lockName, chat: chat},
			grpc.ChainUnaryInterceptor(selector.UnaryServerInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey), only(method))),
			grpc.ChainStreamInterceptor(selector.StreamServerInterceptor(grpclock.StreamServerInterceptor(e.Locker, orderKey), only(method))))
		reply, err := client.Do(context.Background(), order("7"))
		if err != nil || reply.Lock != want {
			t.Errorf("selector of %s: Do got %v, %v; want %q", method, reply, err, want)
		}
		wantStream := map[string]string{"Do": "<none>", "Chat": "order:7"}[method]
		if got, err := chatOnce(t, client, context.Background(), order("7")); err != nil || len(got) != 1 || got[0] != wantStream {
			t.Errorf("selector of %s: Chat got %q, %v; want %q", method, got, err, wantStream)
		}
	}
}

// recorder is an interceptor placed before grpclock that reports, on got,
// the error the rest of the server chain returned for each call: what the
// server produced, whatever the client saw. entered is signalled (without
// blocking) when a call reaches it.
type recorder struct {
	entered chan struct{}
	got     chan error
}

func newRecorder() *recorder {
	return &recorder{entered: make(chan struct{}, 1), got: make(chan error, 1)}
}

func (r *recorder) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	select {
	case r.entered <- struct{}{}:
	default:
	}
	resp, err := handler(ctx, req)
	r.got <- err
	return resp, err
}

// result waits for the error the server produced.
func (r *recorder) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.got:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not finish the call within 10 s")
		return nil
	}
}

// deadlineOnly has a deadline that it never enforces: the client sends it
// (grpc-timeout) but does not give up at it, so the call's end is the
// server's doing, not a race with the client's cancellation.
type deadlineOnly struct {
	context.Context
	deadline time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.deadline, true }

// TestCallerDeadlineAndCancelSeenByServer: while the order is held, the
// caller's deadline passing makes the server answer DeadlineExceeded, and the
// caller going away makes it end the call with Canceled, with grpclock's own
// messages (ToStatus).
func TestCallerDeadlineAndCancelSeenByServer(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	icpt := grpclock.UnaryServerInterceptor(e.Locker, orderKey)

	t.Run("deadline", func(t *testing.T) {
		rec := newRecorder()
		client := serve(t, &service{do: lockName}, grpc.ChainUnaryInterceptor(rec.unary, icpt))
		// A deadline far enough off that it has not passed before the call
		// reaches the server and its message is read, however busy the
		// machine: the deadline must pass while the call waits for the order.
		ctx := deadlineOnly{context.Background(), time.Now().Add(2 * time.Second)}
		// At the deadline the server cancels the call's context and resets
		// the stream, so the client sees a cancellation; what matters is the
		// status the server produced.
		_, _ = client.Do(ctx, order(id))
		want := grpclock.ToStatus(context.DeadlineExceeded)
		if got := rec.result(t); status.Code(got) != codes.DeadlineExceeded || got.Error() != want.Error() {
			t.Fatalf("the server produced %v, want DeadlineExceeded from ToStatus", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		rec := newRecorder()
		client := serve(t, &service{do: lockName}, grpc.ChainUnaryInterceptor(rec.unary, icpt))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := client.Do(ctx, order(id)); done <- err }()
		<-rec.entered // the call is on the server, waiting for the order
		cancel()
		want := grpclock.ToStatus(context.Canceled)
		if got := rec.result(t); status.Code(got) != codes.Canceled || got.Error() != want.Error() {
			t.Fatalf("the server produced %v, want Canceled from ToStatus", got)
		}
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Fatalf("the client got %v", err)
		}
	})
}

// TestErrorHandlerReturningNilNeverRunsUnlocked: an error handler that only
// logs (returns nil) does not make the call proceed; it fails with the
// default status instead, for unary calls and both kinds of stream.
func TestErrorHandlerReturningNilNeverRunsUnlocked(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	e.Hold(t, "tenant:"+keyfunc.Escape(id))
	var logged atomic.Int64
	logOnly := grpclock.WithErrorHandler(func(ctx context.Context, err error) error { logged.Add(1); return nil })
	var ran atomic.Int64
	svc := &service{
		do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
			ran.Add(1)
			return &testsvc.Reply{}, nil
		},
		chat: func(stream testsvc.Test_ChatServer) error { ran.Add(1); return chat(stream) },
	}
	byTenant := must(keyfunc.Template("tenant:{header.x-tenant}"))
	client := serve(t, svc,
		grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithWait(0), logOnly)),
		grpc.StreamInterceptor(selectorByMetadata(
			grpclock.StreamServerInterceptor(e.Locker, byTenant, grpclock.WithWait(0), logOnly),
			grpclock.StreamServerInterceptor(e.Locker, orderKey, grpclock.WithWait(0), logOnly))))
	if _, err := client.Do(context.Background(), order(id)); status.Code(err) != codes.Aborted || ran.Load() != 0 {
		t.Errorf("unary: %v, handler ran %d", err, ran.Load())
	}
	got, err := chatOnce(t, client, context.Background(), order(id))
	if status.Code(err) != codes.Aborted || len(got) != 0 {
		t.Errorf("stream locked at the first message: %v, replies %q", err, got)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", id)
	if _, err := chatOnce(t, client, ctx, order("1")); status.Code(err) != codes.Aborted || ran.Load() != 1 {
		t.Errorf("stream locked by metadata: %v, handler ran %d (once for the first-message stream)", err, ran.Load())
	}
	if logged.Load() != 3 {
		t.Errorf("the error handler saw %d failures, want 3", logged.Load())
	}
}

// selectorByMetadata sends streams with x-tenant metadata to byMetadata,
// others to other.
func selectorByMetadata(byMetadata, other grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if md, _ := metadata.FromIncomingContext(ss.Context()); len(md.Get("x-tenant")) > 0 {
			return byMetadata(srv, ss, info, handler)
		}
		return other(srv, ss, info, handler)
	}
}

// TestStalledRedisIsUnavailableOrFailOpen: a Redis that accepts connections
// but never replies gives Unavailable, not Aborted, even with a per-method
// wait shorter than the I/O timeout; fail-open then runs the handler and
// reports the storage error to its hook.
func TestStalledRedisIsUnavailableOrFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	client := serve(t, &service{do: lockName}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(l, orderKey, grpclock.WithWait(20*time.Millisecond))))
	if _, err := client.Do(context.Background(), order("1")); status.Code(err) != codes.Unavailable {
		t.Fatalf("fail-closed: %v, want Unavailable", err)
	}
	var seen error
	client = serve(t, &service{do: lockName}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(l, orderKey, grpclock.WithWait(20*time.Millisecond),
		grpclock.WithFailOpenHook(func(ctx context.Context, err error) { seen = err }))))
	if reply, err := client.Do(context.Background(), order("1")); err != nil || reply.Lock != "<none>" || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: %v, %v; the hook got %v", reply, err, seen)
	}
}

// TestTTLPrecedence: WithTTLFunc, then core.ContextWithTTL set by an earlier
// interceptor, then WithTTL, then the Locker's.
func TestTTLPrecedence(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var pttl time.Duration
	svc := &service{do: func(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
		pttl = e.Client.PTTL(ctx, grpclock.LeaseFromContext(ctx).Key()).Val()
		return &testsvc.Reply{}, nil
	}}
	withTTL := func(ttl time.Duration) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if ttl > 0 {
				ctx = core.ContextWithTTL(ctx, ttl)
			}
			return h(ctx, req)
		}
	}
	slow := grpclock.WithTTLFunc(func(ctx context.Context, method string) time.Duration {
		if method == "/reqlock.testsvc.Test/Do" && metadata.ValueFromIncomingContext(ctx, "slow") != nil {
			return 2 * time.Hour
		}
		return 0
	})
	for _, tc := range []struct {
		ctxTTL   time.Duration
		slow     bool
		min, max time.Duration
	}{
		{0, false, 55 * time.Second, time.Minute},
		{time.Hour, false, 59 * time.Minute, time.Hour},
		{time.Hour, true, 119 * time.Minute, 2 * time.Hour},
	} {
		client := serve(t, svc, grpc.ChainUnaryInterceptor(withTTL(tc.ctxTTL),
			grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithTTL(time.Minute), slow)))
		ctx := context.Background()
		if tc.slow {
			ctx = metadata.AppendToOutgoingContext(ctx, "slow", "1")
		}
		if _, err := client.Do(ctx, order(adaptertest.Uniq(t))); err != nil || pttl < tc.min || pttl > tc.max {
			t.Errorf("context TTL %v, slow %v: %v, PTTL %v, want in [%v, %v]", tc.ctxTTL, tc.slow, err, pttl, tc.min, tc.max)
		}
	}
}
