package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// lockerModes runs a Locker on store through the three lock modes: permits
// in distinct slots, shared holders together, a mismatch refused, and a
// waiting writer that new readers do not overtake.
func lockerModes(t *testing.T, store core.Store, probe core.Sharer, opts ...core.Option) {
	t.Helper()
	locker := core.NewWithStore(store, append([]core.Option{core.WithTTL(10 * time.Second), core.WithWait(20 * time.Second)}, opts...)...)
	t.Cleanup(func() { _ = locker.Close() })
	ctx := context.Background()
	name := "modes:" + uniq(t)
	must := func(l *core.Lease, err error) *core.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	release := func(ls ...*core.Lease) {
		t.Helper()
		for _, l := range ls {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	p0 := must(locker.Acquire(ctx, name, core.Permits(2)))
	p1 := must(locker.Acquire(ctx, name, core.Permits(2)))
	if p0.Slot() == p1.Slot() || p0.Slot()+p1.Slot() != 1 {
		t.Fatalf("two permits of Permits(2) in slots %d and %d", p0.Slot(), p1.Slot())
	}
	if _, err := locker.Acquire(ctx, name, core.Permits(2), core.Wait(time.Second)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a third permit of Permits(2): %v, want ErrTimeout", err)
	}
	if _, err := locker.Acquire(ctx, name, core.Shared()); !errors.Is(err, core.ErrModeMismatch) {
		t.Fatalf("a shared hold beside permits: %v, want ErrModeMismatch", err)
	}
	release(p0, p1)

	r1 := must(locker.Acquire(ctx, name, core.Shared()))
	r2 := must(locker.Acquire(ctx, name, core.Shared()))
	if r1.Mode() != core.ModeShared {
		t.Fatalf("mode %v", r1.Mode())
	}
	type result struct {
		l   *core.Lease
		err error
	}
	writer := make(chan result, 1)
	go func() {
		l, err := locker.Acquire(ctx, name)
		writer <- result{l, err}
	}()
	// Wait until the writer has recorded itself: a probe share fails.
	key := r1.Key()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, _, _, err := probe.TryAcquireShare(ctx, key, "probe", 10*time.Second, core.Hold{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if _, err := probe.ReleaseShare(ctx, key, "probe"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiting writer never kept a new share out")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := locker.Acquire(ctx, name, core.Shared(), core.Wait(time.Second)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a new reader while a writer waits: %v, want ErrTimeout", err)
	}
	release(r1, r2)
	w := <-writer
	if w.err != nil {
		t.Fatalf("the writer: %v", w.err)
	}
	release(w.l)
	release(must(locker.Acquire(ctx, name, core.Shared())))
}

// TestLockerModes runs a Locker through the lock modes on etcd, with push
// wake-ups.
func TestLockerModes(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	lockerModes(t, s, newStore(t, newClient(t, "")), core.WithNotify())
}

// TestLockerAcquireAll: AcquireAll takes several names in one transaction;
// a name held by a share keeps it waiting.
func TestLockerAcquireAll(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	locker := core.NewWithStore(s, core.WithTTL(10*time.Second), core.WithWait(20*time.Second), core.WithFencing())
	t.Cleanup(func() { _ = locker.Close() })
	ctx := context.Background()
	a, b := "all:"+uniq(t), "all:"+uniq(t)
	r, err := locker.Acquire(ctx, b, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.AcquireAll(ctx, []string{b, a}, core.Wait(time.Second)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("AcquireAll of a shared name: %v, want ErrTimeout", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := locker.AcquireAll(ctx, []string{b, a})
	if err != nil {
		t.Fatal(err)
	}
	if all.FenceOf(a) == 0 || all.FenceOf(b) == 0 {
		t.Fatalf("fences %d, %d", all.FenceOf(a), all.FenceOf(b))
	}
	if err := all.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
