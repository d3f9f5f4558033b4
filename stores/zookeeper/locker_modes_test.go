package zkstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestLockerModes: a Locker on the store takes shared holds together, keeps
// an exclusive Acquire out while they hold and lets no new share in while
// it waits, hands out permits in distinct slots, and takes several names
// at once.
func TestLockerModes(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	store := newStore(t, conn, zkstore.WithRoot(r), zkstore.WithSessionTimeout(sessionTimeout))
	locker := core.NewWithStore(store, core.WithTTL(3*time.Second), core.WithWatchdog(), core.WithFencing(), core.WithNotify())
	t.Cleanup(func() { _ = locker.Close() })
	bg := context.Background()

	r1, err := locker.Acquire(bg, "doc", core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := locker.Acquire(bg, "doc", core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if r1.Mode() != core.ModeShared || r1.Fence() <= 0 || r2.Fence() <= r1.Fence() {
		t.Errorf("shared leases: mode %v, fences %d then %d; want shared, increasing", r1.Mode(), r1.Fence(), r2.Fence())
	}
	if _, err := locker.Acquire(bg, "doc", core.Wait(100*time.Millisecond)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("exclusive Acquire beside shared holders: %v; want ErrTimeout", err)
	}
	// A waiting writer: once its record is there, new readers wait too.
	type result struct {
		lease *core.Lease
		err   error
	}
	writer := make(chan result, 1)
	go func() {
		l, err := locker.Acquire(bg, "doc", core.Wait(20*time.Second))
		writer <- result{l, err}
	}()
	key, err := locker.Key("doc")
	if err != nil {
		t.Fatal(err)
	}
	dir := r + "/" + key // the store escapes none of its characters
	eventually(t, 10*time.Second, "the waiting writer left no record", func() bool {
		return slices.Contains(children(t, conn, dir), "w")
	})
	if _, err := locker.Acquire(bg, "doc", core.Shared(), core.Wait(100*time.Millisecond)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a new shared Acquire while a writer waits: %v; want ErrTimeout", err)
	}
	for _, l := range []*core.Lease{r1, r2} {
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	w := <-writer
	if w.err != nil {
		t.Fatalf("the waiting writer: %v", w.err)
	}
	if w.lease.Fence() <= r2.Fence() {
		t.Errorf("the writer's fence %d is not above the readers' %d", w.lease.Fence(), r2.Fence())
	}
	if err := w.lease.Release(bg); err != nil {
		t.Fatal(err)
	}

	var slots []int
	var held []*core.Lease
	for range 3 {
		l, err := locker.Acquire(bg, "stock", core.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, l.Slot())
		held = append(held, l)
	}
	if slices.Sort(slots); !slices.Equal(slots, []int{0, 1, 2}) {
		t.Errorf("slots of three permits of 3: %v", slots)
	}
	if _, err := locker.Acquire(bg, "stock", core.Permits(3), core.Wait(100*time.Millisecond)); !errors.Is(err, core.ErrTimeout) {
		t.Errorf("a fourth permit of 3: %v; want ErrTimeout", err)
	}
	if _, err := locker.Acquire(bg, "stock", core.Permits(2)); !errors.Is(err, core.ErrModeMismatch) {
		t.Errorf("permits(2) beside permits(3): %v; want ErrModeMismatch", err)
	}
	for _, l := range held {
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}

	all, err := locker.AcquireAll(bg, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Names(); !slices.Equal(got, []string{"a", "b"}) || all.FenceOf("a") <= 0 || all.FenceOf("b") <= 0 {
		t.Errorf("AcquireAll: names %v, fences %d and %d", got, all.FenceOf("a"), all.FenceOf("b"))
	}
	if _, err := locker.Acquire(bg, "a", core.Wait(100*time.Millisecond)); !errors.Is(err, core.ErrTimeout) {
		t.Errorf("Acquire of a name AcquireAll holds: %v; want ErrTimeout", err)
	}
	if err := all.Release(bg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		l, err := locker.Acquire(bg, name)
		if err != nil {
			t.Fatalf("Acquire(%q) after AcquireAll's release: %v", name, err)
		}
		_ = l.Release(bg)
	}
}
