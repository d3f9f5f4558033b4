package core_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// ran is a function of AfterDone that counts its runs and closes a channel
// at its first.
type ran struct {
	n    atomic.Int32
	once chan struct{}
}

func newRan() *ran { return &ran{once: make(chan struct{})} }

func (r *ran) f() {
	if r.n.Add(1) == 1 {
		close(r.once)
	}
}

func (r *ran) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.once:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the function of AfterDone did not run", what)
	}
}

// AfterDone runs its function once Done closes (release, loss by TTL, an
// AcquireAll lease, a nested lease's outer release), never before, once;
// stop before then keeps it from running and reports true, stop after it
// reports false; a lease already over runs it at once.
func TestAfterDone(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil)
	ctx := context.Background()

	lease, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	r := newRan()
	stop := lease.AfterDone(r.f)
	time.Sleep(20 * time.Millisecond)
	if r.n.Load() != 0 {
		t.Fatal("AfterDone ran its function while the lease was held")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "release")
	if stop() {
		t.Fatal("stop after the function ran reported true")
	}
	again := newRan()
	lease.AfterDone(again.f)
	again.wait(t, "a released lease")

	// Stopped before the release: never runs.
	lease, err = e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	r = newRan()
	stop = lease.AfterDone(r.f)
	if !stop() || stop() {
		t.Fatal("stop before Done: want true, then false")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if r.n.Load() != 0 {
		t.Fatal("a stopped function of AfterDone ran")
	}

	// Lost when its TTL runs out.
	lease, err = e.locker.Acquire(ctx, uniq(t), core.TTL(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r = newRan()
	lease.AfterDone(r.f)
	r.wait(t, "TTL run out")
	if time.Now().Before(lease.ValidUntil()) || !lease.Lost() {
		t.Fatal("the function of AfterDone ran before the lease was lost")
	}
	_ = lease.Release(ctx)

	// AcquireAll, and a nested lease (its outer lease owns the hold).
	all, err := e.locker.AcquireAll(ctx, []string{uniq(t), uniq(t)})
	if err != nil {
		t.Fatal(err)
	}
	r = newRan()
	stopAll := all.AfterDone(r.f)
	if err := all.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "AcquireAll")
	if stopAll() {
		t.Fatal("AcquireAll: stop after the function ran reported true")
	}
	all, err = e.locker.AcquireAll(ctx, []string{uniq(t), uniq(t)})
	if err != nil {
		t.Fatal(err)
	}
	r = newRan()
	if stopAll = all.AfterDone(r.f); !stopAll() {
		t.Fatal("AcquireAll: stop before Done reported false")
	}
	_ = all.Release(ctx)
	time.Sleep(20 * time.Millisecond)
	if r.n.Load() != 0 {
		t.Fatal("AcquireAll: a stopped function of AfterDone ran")
	}

	outer, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := e.locker.Acquire(core.ContextWithLease(ctx, outer), outer.Name())
	if err != nil {
		t.Fatal(err)
	}
	r = newRan()
	inner.AfterDone(r.f)
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if r.n.Load() != 0 {
		t.Fatal("a nested lease's AfterDone ran at its own release, while the outer lease holds the name")
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the outer lease's release")
	time.Sleep(20 * time.Millisecond)
	if n := r.n.Load(); n != 1 {
		t.Fatalf("the function of AfterDone ran %d times", n)
	}
}

// Registering AfterDone starts no goroutine: that is its point (a goroutine
// blocked on Done would cost every request one, and its release the
// scheduling of it).
func TestAfterDoneStartsNoGoroutine(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	var leases []*core.Lease
	var stops []func() bool
	for range 20 {
		lease, err := e.locker.Acquire(ctx, uniq(t))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	before := runtime.NumGoroutine()
	for _, lease := range leases {
		stops = append(stops, lease.AfterDone(func() {}))
	}
	if after := runtime.NumGoroutine(); after >= before+len(leases)/2 {
		t.Fatalf("%d goroutines before 20 AfterDone, %d after: want none per lease", before, after)
	}
	for i, lease := range leases {
		if !stops[i]() {
			t.Fatal("stop before Done reported false")
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
