package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// RPCMode is the lock options of an RPC adapter's interceptor or
// middleware in the scenarios of RunRPCModes, which the adapter's test
// turns into its own options: every option that is set is given.
type RPCMode struct {
	Wait        time.Duration // WithWait(Wait), when not 0
	Shared      bool          // WithShared()
	SharedDo    bool          // WithSharedMethods(the full name of the test service's Do)
	SharedOther bool          // WithSharedMethods(a method the scenarios never call)
	Permits     int           // WithPermits(Permits), when not 0
	MaxNames    int           // WithMaxNames(MaxNames), when not 0
	// RequestIDHeader gives WithRequestIDHeader(RequestIDHeader), when
	// not "".
	RequestIDHeader string
}

// RPCRequest is one call of the scenarios of RunRPCModes.
type RPCRequest struct {
	ID     string   // the message's order.id field
	Header []string // headers or metadata: name, value, ...
	Stream bool     // sent as the first message of a stream, not to Do (RPC.Streams)
	Tenant string   // the message's tenant field, for adapters whose test message has one
	Tags   []string // the message's order.tags field, for adapters whose test message has one
}

// RPCCall makes a call to the service an RPC.Serve serves and returns the
// lock its handler saw (Describe), or the call's error.
type RPCCall func(ctx context.Context, req RPCRequest) (string, error)

// RPCCode is what a failed call of the scenarios means, as an RPC adapter
// reports it in its framework's terms.
type RPCCode int

// The failures the scenarios expect.
const (
	RPCOther      RPCCode = iota // anything else
	RPCBusy                      // a name is held elsewhere (gRPC Aborted, Kratos REQLOCK_BUSY)
	RPCBadRequest                // the key yields no names, or too many (InvalidArgument)
	RPCInternal                  // the lock failed otherwise, as on a mode mismatch (Internal)
)

// RPCNameCase is a key of several names that a call must hold all at once
// or none (RPC.NameCases).
type RPCNameCase struct {
	Name  string       // the subtest's name
	Key   keyfunc.Func // the key
	Names []string     // the names it yields for Req, at least two
	Req   RPCRequest   // the call (without Stream)
}

// RPCBadCase is a call whose key yields no names or too many, refused as a
// bad request (RPC.BadRequests).
type RPCBadCase struct {
	Name     string
	Key      keyfunc.Func
	Req      RPCRequest
	MaxNames int // WithMaxNames(MaxNames), when not 0
}

// RPC is an RPC adapter's glue for RunRPCModes.
type RPC struct {
	// Serve serves the adapter's test service on e's Locker behind its
	// interceptor or middleware of key and mode. The handler runs handle
	// with the call's lease (nil when unlocked), fails the call if handle
	// returns an error, and else answers Describe of the lease.
	Serve func(t *testing.T, e *Env, key keyfunc.Func, mode RPCMode, handle func(*core.Lease) error) RPCCall
	// Code tells what a call's error means.
	Code func(err error) RPCCode
	// Streams tells whether the service has a streaming method, whose
	// calls the scenarios make too (RPCRequest.Stream).
	Streams bool
	// NameCases are keys of several names beyond the shared one (a message
	// field and a header), such as repeated fields.
	NameCases []RPCNameCase
	// BadRequests are refused calls beyond the shared ones (no header, more
	// names than WithMaxNames).
	BadRequests []RPCBadCase
}

// OrderKey is the key of the scenarios: "order:{field.order.id}".
var OrderKey = mustTemplate("order:{field.order.id}")

// Describe tells how a call is locked: the names of its lease, its mode
// and its slot ("a,b|shared|0"), "<none>" for nil. The test services of
// the RPC adapters answer it.
func Describe(l *core.Lease) string {
	if l == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s|%s|%d", strings.Join(l.Names(), ","), l.Mode(), l.Slot())
}

// Concurrently runs f(i) for i in [0, n) at once and returns the errors.
func Concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errs
}

// RunRPCModes runs the lock-mode scenarios of an RPC adapter (grpclock,
// connectlock, kratoslock) on a real redis-server (Shared) through r:
// shared readers beside exclusive writers, shared methods, numbered
// permits, keys of several names, and the holder record of a call's lock
// (its method and request id). Each adapter's tests call it with
// their glue; RunModes is the HTTP adapters' counterpart.
func RunRPCModes(t *testing.T, r RPC) {
	t.Run("SharedReadersOverlapWriterAlone", func(t *testing.T) { rpcSharedReaders(t, r) })
	t.Run("SharedMethods", func(t *testing.T) { rpcSharedMethods(t, r) })
	t.Run("Permits", func(t *testing.T) { rpcPermits(t, r) })
	t.Run("SeveralNames", func(t *testing.T) { rpcSeveralNames(t, r) })
	t.Run("HolderIdentity", func(t *testing.T) { rpcHolderIdentity(t, r) })
}

// rpcEnv is the Env of the scenarios whose calls wait their turn.
func rpcEnv(t *testing.T) *Env {
	LeakCheck(t)
	return NewEnv(t, nil, core.WithWait(wait), core.WithSpin(time.Millisecond, time.Millisecond))
}

// noErrors fails the test (fatally if fatal) for every error of errs.
func noErrors(t *testing.T, fatal bool, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil && fatal {
			t.Fatal(err)
		} else if err != nil {
			t.Error(err)
		}
	}
}

// rpcSharedReaders: calls of an interceptor WithShared run together (three
// meet at a barrier inside their handlers), and a call of an exclusive
// interceptor on the same names never runs beside any of them nor beside
// another writer.
func rpcSharedReaders(t *testing.T, r RPC) {
	e := rpcEnv(t)
	id := Uniq(t)
	var rw RW
	var meet sync.Mutex // guards barrier
	var barrier *Barrier
	section := func(write bool) func(*core.Lease) error {
		return func(*core.Lease) error {
			meet.Lock()
			b := barrier
			meet.Unlock()
			if b != nil && !write && !b.Arrive(patience) {
				return errors.New("the readers did not run together")
			}
			defer rw.Enter(write)()
			time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
			return nil
		}
	}
	readers := r.Serve(t, e, OrderKey, RPCMode{Shared: true}, section(false))
	writers := r.Serve(t, e, OrderKey, RPCMode{}, section(true))

	meet.Lock()
	barrier = NewBarrier(3)
	meet.Unlock()
	noErrors(t, true, Concurrently(3, func(int) error {
		got, err := readers(context.Background(), RPCRequest{ID: id})
		if err == nil && !strings.HasSuffix(got, "|shared|0") {
			err = fmt.Errorf("the reader's lease is %q, want a shared one", got)
		}
		return err
	}))
	meet.Lock()
	barrier = nil
	meet.Unlock()

	noErrors(t, false, Concurrently(12, func(i int) error {
		call := readers
		if i%3 == 0 {
			call = writers
		}
		_, err := call(context.Background(), RPCRequest{ID: id})
		return err
	}))
	rw.Check(t, "readers and writers")
}

// rpcSharedMethods: the calls of the methods WithSharedMethods names take
// the names shared, the other methods' calls exclusively (unary calls and
// streams alike); a writer elsewhere keeps the reads out, readers
// elsewhere do not.
func rpcSharedMethods(t *testing.T, r RPC) {
	LeakCheck(t)
	e := NewEnv(t, nil, core.WithWait(patience))
	id := Uniq(t)
	name := "order:" + keyfunc.Escape(id)
	reads := r.Serve(t, e, OrderKey, RPCMode{SharedDo: true}, nil)
	if got, err := reads(context.Background(), RPCRequest{ID: id}); err != nil || got != name+"|shared|0" {
		t.Errorf("read method: %q, %v; want a shared lease", got, err)
	}
	if r.Streams {
		if got, err := reads(context.Background(), RPCRequest{ID: id, Stream: true}); err != nil || got != name+"|exclusive|0" {
			t.Errorf("write method (a stream): %q, %v; want an exclusive lease", got, err)
		}
	}
	writes := r.Serve(t, e, OrderKey, RPCMode{SharedOther: true}, nil)
	if got, err := writes(context.Background(), RPCRequest{ID: id}); err != nil || got != name+"|exclusive|0" {
		t.Errorf("write method: %q, %v; want an exclusive lease", got, err)
	}

	held := e.Hold(t, name)
	busy := r.Serve(t, e, OrderKey, RPCMode{SharedDo: true, Wait: 20 * time.Millisecond}, nil)
	if _, err := busy(context.Background(), RPCRequest{ID: id}); r.Code(err) != RPCBusy {
		t.Errorf("read beside a writer: %v, want busy", err)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	share, err := e.Locker.Acquire(context.Background(), name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer share.Release(context.Background())
	if got, err := busy(context.Background(), RPCRequest{ID: id}); err != nil || got != name+"|shared|0" {
		t.Errorf("read beside a reader: %q, %v; want a shared lease", got, err)
	}
}

// rpcPermits: with WithPermits(3), three calls hold the name at once, in
// slots 0, 1 and 2; never more than three, never two in one slot; a fourth
// beside three holders elsewhere is busy, and another n is a mode
// mismatch.
func rpcPermits(t *testing.T, r RPC) {
	e := rpcEnv(t)
	id := Uniq(t)
	var (
		mu         sync.Mutex
		barrier    *Barrier
		inside     = map[int]bool{}
		violations []string
	)
	call := r.Serve(t, e, OrderKey, RPCMode{Permits: 3}, func(l *core.Lease) error {
		slot := l.Slot()
		mu.Lock()
		if inside[slot] || len(inside) >= 3 {
			violations = append(violations, fmt.Sprintf("a holder entered slot %d beside the slots %v", slot, slices.Sorted(mapKeys(inside))))
		}
		inside[slot] = true
		b := barrier
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(inside, slot)
			mu.Unlock()
		}()
		if b != nil && !b.Arrive(patience) {
			return errors.New("the permit holders did not run together")
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
		return nil
	})

	mu.Lock()
	barrier = NewBarrier(3)
	mu.Unlock()
	var slots []string
	var smu sync.Mutex
	noErrors(t, true, Concurrently(3, func(int) error {
		got, err := call(context.Background(), RPCRequest{ID: id})
		if err == nil {
			smu.Lock()
			slots = append(slots, got[strings.LastIndexByte(got, '|')+1:])
			smu.Unlock()
		}
		return err
	}))
	if slices.Sort(slots); !slices.Equal(slots, []string{"0", "1", "2"}) {
		t.Errorf("slots of three holders at once: %q, want 0, 1 and 2", slots)
	}
	mu.Lock()
	barrier = nil
	mu.Unlock()

	noErrors(t, false, Concurrently(12, func(int) error {
		_, err := call(context.Background(), RPCRequest{ID: id})
		return err
	}))
	mu.Lock()
	for _, v := range violations {
		t.Error(v)
	}
	mu.Unlock()

	name := "order:" + keyfunc.Escape(id)
	for range 3 {
		lease, err := e.Locker.Acquire(context.Background(), name, core.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background())
	}
	busy := r.Serve(t, e, OrderKey, RPCMode{Permits: 3, Wait: 20 * time.Millisecond}, nil)
	if _, err := busy(context.Background(), RPCRequest{ID: id}); r.Code(err) != RPCBusy {
		t.Fatalf("a fourth holder: %v, want busy", err)
	}
	other := r.Serve(t, e, OrderKey, RPCMode{Permits: 5}, nil)
	if _, err := other(context.Background(), RPCRequest{ID: id}); r.Code(err) != RPCInternal {
		t.Fatalf("another n: %v, want an internal error (a mode mismatch)", err)
	}
}

func mapKeys(m map[int]bool) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// rpcSeveralNames: a key of several names (a message field and a header,
// and r.NameCases) locks them all at once, all or none, streams at their
// first message; a key that yields no names or too many is a bad request.
func rpcSeveralNames(t *testing.T, r RPC) {
	id := Uniq(t)
	tenant := "t" + id
	key := mustTemplates("order:{field.order.id}", "tenant:{header.x-tenant}")
	cases := append([]RPCNameCase{{
		Name:  "field and header",
		Key:   key,
		Names: []string{"order:" + keyfunc.Escape(id), "tenant:" + keyfunc.Escape(tenant)},
		Req:   RPCRequest{ID: id, Header: []string{"x-tenant", tenant}},
	}}, r.NameCases...)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { rpcAllOrNone(t, r, tc) })
	}
	bad := append([]RPCBadCase{
		{Name: "no header", Key: key, Req: RPCRequest{ID: id}},
		{Name: "more names than WithMaxNames", Key: key, Req: RPCRequest{ID: id, Header: []string{"x-tenant", tenant}}, MaxNames: 1},
	}, r.BadRequests...)
	LeakCheck(t)
	e := NewEnv(t, nil, core.WithWait(patience))
	for _, tc := range bad {
		call := r.Serve(t, e, tc.Key, RPCMode{MaxNames: tc.MaxNames}, nil)
		if _, err := call(context.Background(), tc.Req); r.Code(err) != RPCBadRequest {
			t.Errorf("%s: %v, want a bad request", tc.Name, err)
		}
	}
}

// rpcAllOrNone checks one RPCNameCase: the call holds every name inside
// and none after; with one name busy, it fails and holds none.
func rpcAllOrNone(t *testing.T, r RPC, tc RPCNameCase) {
	LeakCheck(t)
	e := NewEnv(t, nil, core.WithWait(patience))
	var mu sync.Mutex
	var heldInside []bool
	call := r.Serve(t, e, tc.Key, RPCMode{Wait: 20 * time.Millisecond}, func(*core.Lease) error {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range tc.Names {
			heldInside = append(heldInside, e.Exists(t, n))
		}
		return nil
	})
	want := strings.Join(slices.Sorted(slices.Values(tc.Names)), ",") + "|exclusive|0"
	got, err := call(context.Background(), tc.Req)
	mu.Lock()
	inside := heldInside
	mu.Unlock()
	if err != nil || got != want || slices.Contains(inside, false) || len(inside) != len(tc.Names) {
		t.Errorf("got %q, %v (held inside: %v); want %q, all held", got, err, inside, want)
	}
	for _, n := range tc.Names {
		if e.Exists(t, n) {
			t.Errorf("%s still held after the call", n)
		}
	}
	if r.Streams {
		req := tc.Req
		req.Stream = true
		if got, err := call(context.Background(), req); err != nil || got != want {
			t.Errorf("stream: %q, %v; want %q", got, err, want)
		}
	}

	held := e.Hold(t, tc.Names[1])
	if _, err := call(context.Background(), tc.Req); r.Code(err) != RPCBusy {
		t.Errorf("one name busy: %v, want busy", err)
	}
	if e.Exists(t, tc.Names[0]) {
		t.Errorf("%s left held by a call that failed", tc.Names[0])
	}
	_ = held.Release(context.Background())
}

// RPCOptions are an RPC adapter's option constructors (its WithWait,
// WithShared, ...) and the full names of its test service's methods, from
// which Of builds the options of an RPCMode and CheckBadOptions the bad
// sets of options.
type RPCOptions[O any] struct {
	Wait            func(time.Duration) O
	Shared          func() O
	SharedMethods   func(fullMethods ...string) O
	SharedIfNil     O // WithSharedIf(nil)
	Permits         func(int) O
	MaxNames        func(int) O
	RequestIDHeader func(string) O
	// DoMethod is the full name of the method RPCRequests call (Do);
	// OtherMethod one they never call.
	DoMethod, OtherMethod string
}

// Of returns the options of m: every option that is set is given.
func (o RPCOptions[O]) Of(m RPCMode) []O {
	var opts []O
	if m.Wait != 0 {
		opts = append(opts, o.Wait(m.Wait))
	}
	if m.Shared {
		opts = append(opts, o.Shared())
	}
	if m.SharedDo {
		opts = append(opts, o.SharedMethods(o.DoMethod))
	}
	if m.SharedOther {
		opts = append(opts, o.SharedMethods(o.OtherMethod))
	}
	if m.Permits != 0 {
		opts = append(opts, o.Permits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, o.MaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, o.RequestIDHeader(m.RequestIDHeader))
	}
	return opts
}

// CheckBadOptions checks that options that contradict each other, or are
// empty, are set-up errors of check (the adapter's Check) that name the
// package pkg ("grpclock: ...").
func (o RPCOptions[O]) CheckBadOptions(t *testing.T, pkg string, check func(opts ...O) error) {
	t.Helper()
	for _, bad := range []struct {
		what string
		opts []O
	}{
		{"WithSharedMethods()", []O{o.SharedMethods()}},
		{`WithSharedMethods("")`, []O{o.SharedMethods("")}},
		{"WithSharedIf(nil)", []O{o.SharedIfNil}},
		{"WithShared(), WithPermits(2)", []O{o.Shared(), o.Permits(2)}},
		{"WithPermits(0)", []O{o.Permits(0)}},
		{"WithMaxNames(0)", []O{o.MaxNames(0)}},
		{`WithRequestIDHeader("x id")`, []O{o.RequestIDHeader("x id")}},
	} {
		if err := check(bad.opts...); err == nil || !strings.HasPrefix(err.Error(), pkg+": ") {
			t.Errorf("%s: Check = %v, want a %s error", bad.what, err, pkg)
		}
	}
}
