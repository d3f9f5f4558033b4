package connectlock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/connectlock"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// describe answers how the call is locked: the names of its lease, its
// mode and its slot ("a,b|shared|0"), "<none>" unlocked.
func describe(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	l := connectlock.LeaseFromContext(ctx)
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
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the readers did not run together"))
		}
		rw.read()
		return describe(ctx, req)
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithShared())))
	writers := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		rw.write()
		return describe(ctx, req)
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey)))

	meet.Store(adaptertest.NewBarrier(3))
	for _, err := range concurrently(3, func(int) error {
		got, err := call(readers, context.Background(), order(id))
		if err == nil && !strings.HasSuffix(got, "|shared|0") {
			err = fmt.Errorf("the reader's lease is %q, want a shared one", got)
		}
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	meet.Store(nil)

	for _, err := range concurrently(12, func(i int) error {
		client := readers
		if i%3 == 0 {
			client = writers
		}
		_, err := call(client, context.Background(), order(id))
		return err
	}) {
		if err != nil {
			t.Error(err)
		}
	}
	if n := rw.violations.Load(); n != 0 {
		t.Fatalf("%d times a writer ran beside another holder", n)
	}
}

// TestSharedMethods: the calls of the procedures WithSharedMethods names
// take the names shared, the other procedures' calls exclusively; unary
// calls and streams alike.
func TestSharedMethods(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	name := "order:" + keyfunc.Escape(id)
	client := serve(t, &service{do: describe, chat: func(ctx context.Context, s *bidi) error {
		if _, err := s.Receive(); err != nil {
			return err
		}
		reply, _ := describe(ctx, nil)
		return s.Send(reply)
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithSharedMethods(testsvcconnect.TestDoProcedure))))
	if got, err := call(client, context.Background(), order(id)); err != nil || got != name+"|shared|0" {
		t.Errorf("read procedure: %q, %v; want a shared lease", got, err)
	}
	if got, err := chatOnce(client, context.Background(), nil, order(id)); err != nil || len(got) != 1 || got[0] != name+"|exclusive|0" {
		t.Errorf("write procedure: %q, %v; want an exclusive lease", got, err)
	}

	// A writer elsewhere keeps the reads out; readers elsewhere do not.
	held := e.Hold(t, name)
	busy := serve(t, &service{do: describe}, with(connectlock.NewInterceptor(e.Locker, orderKey,
		connectlock.WithSharedMethods(testsvcconnect.TestDoProcedure), connectlock.WithWait(20*time.Millisecond))))
	if _, err := call(busy, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeAborted {
		t.Errorf("read beside a writer: %v, want CodeAborted", err)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	share, err := e.Locker.Acquire(context.Background(), name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer share.Release(context.Background())
	if got, err := call(busy, context.Background(), order(id)); err != nil || got != name+"|shared|0" {
		t.Errorf("read beside a reader: %q, %v; want a shared lease", got, err)
	}

	for _, opts := range [][]connectlock.Option{
		{connectlock.WithSharedMethods()},
		{connectlock.WithSharedMethods("")},
		{connectlock.WithSharedIf(nil)},
		{connectlock.WithShared(), connectlock.WithPermits(2)},
		{connectlock.WithPermits(0)},
		{connectlock.WithMaxNames(0)},
	} {
		if err := connectlock.Check(e.Locker, orderKey, opts...); err == nil || !strings.HasPrefix(err.Error(), "connectlock: ") {
			t.Errorf("%d options: Check = %v, want a connectlock error", len(opts), err)
		}
	}
}

// TestPermits: with WithPermits(3), three calls hold the name at once, in
// slots 0, 1 and 2; never more than three, never two in one slot; a fourth
// beside three holders elsewhere fails with CodeAborted.
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
		slot := connectlock.LeaseFromContext(ctx).Slot()
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
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the permit holders did not run together"))
		}
		time.Sleep(time.Millisecond)
		return describe(ctx, req)
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithPermits(3))))

	meet.Store(adaptertest.NewBarrier(3))
	var slots []string
	var smu sync.Mutex
	for _, err := range concurrently(3, func(int) error {
		got, err := call(client, context.Background(), order(id))
		if err == nil {
			smu.Lock()
			slots = append(slots, got[strings.LastIndexByte(got, '|')+1:])
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
		_, err := call(client, context.Background(), order(id))
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
	busy := serve(t, &service{do: describe}, with(connectlock.NewInterceptor(e.Locker, orderKey,
		connectlock.WithPermits(3), connectlock.WithWait(20*time.Millisecond))))
	if _, err := call(busy, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("a fourth holder: %v, want CodeAborted", err)
	}
	other := serve(t, &service{do: describe}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithPermits(5))))
	if _, err := call(other, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeInternal {
		t.Fatalf("another n: %v, want CodeInternal (a mode mismatch)", err)
	}
}

// TestSeveralNames: a key of a message field and a header locks both names
// at once, all or none; a stream locks them at its first message.
func TestSeveralNames(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	tenant := "t" + id
	key := must(keyfunc.Templates("order:{field.order.id}", "tenant:{header.x-tenant}"))
	names := []string{"order:" + keyfunc.Escape(id), "tenant:" + keyfunc.Escape(tenant)}
	var heldInside []bool
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		for _, n := range names {
			heldInside = append(heldInside, e.Exists(t, n))
		}
		return describe(ctx, req)
	}, chat: func(ctx context.Context, s *bidi) error {
		if _, err := s.Receive(); err != nil {
			return err
		}
		reply, _ := describe(ctx, nil)
		return s.Send(reply)
	}}, with(connectlock.NewInterceptor(e.Locker, key, connectlock.WithWait(20*time.Millisecond))))
	got, err := call(client, context.Background(), order(id), "X-Tenant", tenant)
	if want := strings.Join(names, ",") + "|exclusive|0"; err != nil || got != want || slices.Contains(heldInside, false) || len(heldInside) != 2 {
		t.Errorf("got %q, %v (held inside: %v); want %q, both held", got, err, heldInside, want)
	}
	for _, n := range names {
		if e.Exists(t, n) {
			t.Errorf("%s still held after the call", n)
		}
	}
	if got, err := chatOnce(client, context.Background(), []string{"X-Tenant", tenant}, order(id)); err != nil || len(got) != 1 || !strings.HasPrefix(got[0], strings.Join(names, ",")+"|") {
		t.Errorf("stream: %q, %v; want both names", got, err)
	}

	// One name busy: the call fails and holds none of them.
	held := e.Hold(t, names[1])
	if _, err := call(client, context.Background(), order(id), "X-Tenant", tenant); connect.CodeOf(err) != connect.CodeAborted {
		t.Errorf("one name busy: %v, want CodeAborted", err)
	}
	if e.Exists(t, names[0]) {
		t.Errorf("%s left held by a call that failed", names[0])
	}
	_ = held.Release(context.Background())

	if _, err := call(client, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("no header: %v, want CodeInvalidArgument", err)
	}
	tooMany := serve(t, &service{do: describe}, with(connectlock.NewInterceptor(e.Locker, key, connectlock.WithMaxNames(1))))
	if _, err := call(tooMany, context.Background(), order(id), "X-Tenant", tenant); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("more names than WithMaxNames: %v, want CodeInvalidArgument", err)
	}
}
