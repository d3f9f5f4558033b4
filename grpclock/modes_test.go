package grpclock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/grpclock/internal/testsvc"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

// describe is a handler that answers how the call is locked: the names of
// its lease, its mode and its slot ("a,b|shared|0"), "<none>" unlocked.
func describe(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	l := grpclock.LeaseFromContext(ctx)
	if l == nil {
		return &testsvc.Reply{Lock: "<none>"}, nil
	}
	return &testsvc.Reply{Lock: fmt.Sprintf("%s|%s|%d", strings.Join(l.Names(), ","), l.Mode(), l.Slot())}, nil
}

// readWrite watches the critical sections of the readers and writers of one
// name: a writer beside anyone, or a reader beside a writer, is a
// violation. Each side counts itself in before it looks at the other, so
// that of two sections that overlap, at least one sees the other.
type readWrite struct {
	readers, writers atomic.Int64
	violations       atomic.Int64
}

func (rw *readWrite) read() {
	rw.readers.Add(1)
	defer rw.readers.Add(-1)
	for range 2 {
		if rw.writers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
	}
}

func (rw *readWrite) write() {
	if rw.writers.Add(1) > 1 {
		rw.violations.Add(1)
	}
	defer rw.writers.Add(-1)
	for range 2 {
		if rw.readers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond)
	}
}

// concurrently runs f(i) for i in [0, n) at once and returns the errors.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// TestSharedReadersOverlapWriterAlone: calls of an interceptor WithShared
// run together (three meet at a barrier inside their handlers), and a call
// of an exclusive interceptor on the same names never runs beside any of
// them nor beside another writer.
func TestSharedReadersOverlapWriterAlone(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	id := adaptertest.Uniq(t)
	var rw readWrite
	var meet atomic.Pointer[adaptertest.Barrier]
	readers := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
			return nil, status.Error(codes.FailedPrecondition, "the readers did not run together")
		}
		rw.read()
		return describe(ctx, req)
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithShared())))
	writers := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		rw.write()
		return describe(ctx, req)
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey)))

	meet.Store(adaptertest.NewBarrier(3))
	for _, err := range concurrently(3, func(int) error {
		reply, err := readers.Do(context.Background(), order(id))
		if err == nil && !strings.HasSuffix(reply.Lock, "|shared|0") {
			err = fmt.Errorf("the reader's lease is %q, want a shared one", reply.Lock)
		}
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	meet.Store(nil)

	errs := concurrently(12, func(i int) error {
		client := readers
		if i%3 == 0 {
			client = writers
		}
		_, err := client.Do(context.Background(), order(id))
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := rw.violations.Load(); n != 0 {
		t.Fatalf("%d times a writer ran beside another holder", n)
	}
}

// TestSharedMethods: the calls of the methods WithSharedMethods names take
// the names shared, the other methods' calls exclusively; unary calls and
// streams alike.
func TestSharedMethods(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	opts := []grpclock.Option{grpclock.WithSharedMethods(testsvc.Test_Do_FullMethodName)}
	client := serve(t, &service{do: describe, chat: func(stream testsvc.Test_ChatServer) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		reply, _ := describe(stream.Context(), nil)
		return stream.Send(reply)
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, opts...)),
		grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, orderKey, opts...)))
	name := "order:" + keyfunc.Escape(id)
	if reply, err := client.Do(context.Background(), order(id)); err != nil || reply.Lock != name+"|shared|0" {
		t.Errorf("read method: %v, %v; want a shared lease", reply, err)
	}
	if got, err := chatOnce(t, client, context.Background(), order(id)); err != nil || len(got) != 1 || got[0] != name+"|exclusive|0" {
		t.Errorf("write method: %q, %v; want an exclusive lease", got, err)
	}

	// A writer elsewhere keeps the reads out; readers elsewhere do not.
	held := e.Hold(t, name)
	busy := serve(t, &service{do: describe}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey,
		grpclock.WithSharedMethods(testsvc.Test_Do_FullMethodName), grpclock.WithWait(20*time.Millisecond))))
	if _, err := busy.Do(context.Background(), order(id)); status.Code(err) != codes.Aborted {
		t.Errorf("read beside a writer: %v, want Aborted", err)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	share, err := e.Locker.Acquire(context.Background(), name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer share.Release(context.Background())
	if reply, err := busy.Do(context.Background(), order(id)); err != nil || reply.Lock != name+"|shared|0" {
		t.Errorf("read beside a reader: %v, %v; want a shared lease", reply, err)
	}

	for _, opts := range [][]grpclock.Option{
		{grpclock.WithSharedMethods()},
		{grpclock.WithSharedMethods("")},
		{grpclock.WithSharedIf(nil)},
		{grpclock.WithShared(), grpclock.WithPermits(2)},
		{grpclock.WithPermits(0)},
		{grpclock.WithMaxNames(0)},
	} {
		if err := grpclock.Check(e.Locker, orderKey, opts...); err == nil || !strings.HasPrefix(err.Error(), "grpclock: ") {
			t.Errorf("%d options: Check = %v, want a grpclock error", len(opts), err)
		}
	}
}

// TestPermits: with WithPermits(3), three calls hold the name at once, in
// slots 0, 1 and 2; never more than three, never two in one slot; a fourth
// beside three holders elsewhere fails with Aborted.
func TestPermits(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	id := adaptertest.Uniq(t)
	var (
		meet       atomic.Pointer[adaptertest.Barrier]
		mu         sync.Mutex
		inside     = map[int]bool{}
		violations int
	)
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		slot := grpclock.LeaseFromContext(ctx).Slot()
		mu.Lock()
		if inside[slot] || len(inside) >= 3 {
			violations++
		}
		inside[slot] = true
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(inside, slot)
			mu.Unlock()
		}()
		if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
			return nil, status.Error(codes.FailedPrecondition, "the permit holders did not run together")
		}
		time.Sleep(time.Millisecond)
		return describe(ctx, req)
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithPermits(3))))

	meet.Store(adaptertest.NewBarrier(3))
	var slots []string
	var smu sync.Mutex
	for _, err := range concurrently(3, func(int) error {
		reply, err := client.Do(context.Background(), order(id))
		if err == nil {
			smu.Lock()
			slots = append(slots, reply.Lock[strings.LastIndexByte(reply.Lock, '|')+1:])
			smu.Unlock()
		}
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if slices.Sort(slots); !slices.Equal(slots, []string{"0", "1", "2"}) {
		t.Errorf("slots of three holders at once: %q, want 0, 1 and 2", slots)
	}
	meet.Store(nil)

	for _, err := range concurrently(12, func(int) error {
		_, err := client.Do(context.Background(), order(id))
		return err
	}) {
		if err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	n := violations
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d times a holder entered a slot in use or beside 3 others", n)
	}

	name := "order:" + keyfunc.Escape(id)
	for range 3 {
		lease, err := e.Locker.Acquire(context.Background(), name, core.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background())
	}
	busy := serve(t, &service{do: describe}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey,
		grpclock.WithPermits(3), grpclock.WithWait(20*time.Millisecond))))
	if _, err := busy.Do(context.Background(), order(id)); status.Code(err) != codes.Aborted {
		t.Fatalf("a fourth holder: %v, want Aborted", err)
	}
	other := serve(t, &service{do: describe}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, orderKey, grpclock.WithPermits(5))))
	if _, err := other.Do(context.Background(), order(id)); status.Code(err) != codes.Internal {
		t.Fatalf("another n: %v, want Internal (a mode mismatch)", err)
	}
}

// TestSeveralNames: a key of two fields, or of a repeated field, locks
// every name it yields at once, all or none.
func TestSeveralNames(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	tenant, tags := "t"+id, []string{"x" + id, "y" + id, "x" + id}
	req := &testsvc.Request{Tenant: tenant, Order: &testsvc.Order{Id: id, Tags: tags}}
	for _, tc := range []struct {
		name  string
		key   keyfunc.Func
		names []string
	}{
		{"two fields", must(keyfunc.Templates("order:{field.order.id}", "tenant:{field.tenant}")),
			[]string{"order:" + keyfunc.Escape(id), "tenant:" + keyfunc.Escape(tenant)}},
		{"repeated field", must(keyfunc.Template("tag:{field.order.tags[*]}")), // a repeated item is taken once
			[]string{"tag:" + keyfunc.Escape(tags[0]), "tag:" + keyfunc.Escape(tags[1])}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var heldInside []bool
			client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				for _, n := range tc.names {
					heldInside = append(heldInside, e.Exists(t, n))
				}
				return describe(ctx, req)
			}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, tc.key, grpclock.WithWait(20*time.Millisecond))))
			reply, err := client.Do(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.Split(reply.Lock, "|")[0], ",")
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.names))
			if !slices.Equal(got, want) || slices.Contains(heldInside, false) || len(heldInside) != len(want) {
				t.Errorf("the lease covers %q (held inside: %v), want %q, all held", got, heldInside, want)
			}
			for _, n := range tc.names {
				if e.Exists(t, n) {
					t.Errorf("%s still held after the call", n)
				}
			}

			// One name busy: the call fails and holds none of them.
			held := e.Hold(t, tc.names[1])
			if _, err := client.Do(context.Background(), req); status.Code(err) != codes.Aborted {
				t.Errorf("one name busy: %v, want Aborted", err)
			}
			if e.Exists(t, tc.names[0]) {
				t.Errorf("%s left held by a call that failed", tc.names[0])
			}
			_ = held.Release(context.Background())
		})
	}

	tagKey := must(keyfunc.Template("tag:{field.order.tags[*]}"))
	for _, tc := range []struct {
		name string
		req  *testsvc.Request
		opts []grpclock.Option
	}{
		{"no items", &testsvc.Request{Order: &testsvc.Order{}}, nil},
		{"an empty item", &testsvc.Request{Order: &testsvc.Order{Tags: []string{"a", ""}}}, nil},
		{"too many", req, []grpclock.Option{grpclock.WithMaxNames(1)}},
	} {
		client := serve(t, &service{do: describe}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, tagKey, tc.opts...)))
		if _, err := client.Do(context.Background(), tc.req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", tc.name, err)
		}
	}

	// A stream locks the names of its first message.
	client := serve(t, &service{chat: func(stream testsvc.Test_ChatServer) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		reply, _ := describe(stream.Context(), nil)
		return stream.Send(reply)
	}}, grpc.StreamInterceptor(grpclock.StreamServerInterceptor(e.Locker, tagKey)))
	got, err := chatOnce(t, client, context.Background(), req)
	if want := "tag:" + keyfunc.Escape(tags[0]) + ",tag:" + keyfunc.Escape(tags[1]); err != nil || len(got) != 1 || !strings.HasPrefix(got[0], want+"|") {
		t.Errorf("stream: %q, %v; want the names %s", got, err, want)
	}
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
		return describe(ctx, req)
	}}, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(e.Locker, must(keyfunc.Template("tag:{field.order.tags[*]}")))))
	for _, err := range concurrently(16, func(i int) error {
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
