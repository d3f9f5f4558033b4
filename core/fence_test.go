package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

func TestFencesIncreaseAcrossLockersAndClientRestarts(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	ctx := context.Background()
	opts := []core.Option{core.WithFencing(), core.WithWait(5 * time.Second), core.WithSpin(time.Millisecond, time.Millisecond)}
	envs := []*env{newEnv(t, nil, opts...), newEnv(t, nil, opts...)}
	var last int64
	for i := 0; i < 10; i++ {
		if i == 5 { // a client restart: a new client and Locker, the same server
			envs[0] = newEnv(t, nil, opts...)
		}
		lease, err := envs[i%2].locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Fence() <= last {
			t.Fatalf("acquire %d: fence %d after %d, want strictly increasing", i, lease.Fence(), last)
		}
		last = lease.Fence()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Without fencing the fence is 0 and no counter is written.
	plain := newEnv(t, nil)
	lease := hold(t, plain, uniq(t))
	if lease.Fence() != 0 {
		t.Fatalf("fence %d without WithFencing", lease.Fence())
	}
	if n := plain.client.Exists(ctx, lease.Key()+":fence").Val(); n != 0 {
		t.Fatal("a fence counter was written without WithFencing")
	}
}

func TestFenceOfNestedAndHandedOffLeases(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithFencing(), core.WithWatchdog(), core.WithTTL(time.Second))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := e.locker.Acquire(core.ContextWithLease(ctx, first), first.Name())
	if err != nil {
		t.Fatal(err)
	}
	if nested.Fence() != first.Fence() || nested.Done() != first.Done() {
		t.Fatal("a nested lease has a fence or Done of its own")
	}
	_ = nested.Release(ctx)
	mid, err := first.Handoff(ctx, request(first, time.Second)) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mid.Release(ctx) })
	e.rt.N.Store(0)
	second, err := mid.Handoff(ctx, request(mid, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Release(ctx) })
	if mid.Fence() <= first.Fence() || second.Fence() <= mid.Fence() {
		t.Fatalf("handed-off leases have fences %d, %d, %d: not strictly increasing", first.Fence(), mid.Fence(), second.Fence())
	}
	if n := e.rt.N.Load(); n != 1 {
		t.Fatalf("a fenced handoff made %d round trips, want 1 (extend and INCR in one script)", n)
	}
	// The new holder has a watchdog of its own: it keeps the lock past its TTL.
	time.Sleep(1500 * time.Millisecond)
	if got := e.client.Get(ctx, second.Key()).Val(); got != second.Token() {
		t.Fatal("the handed-off lease was not renewed past its TTL")
	}
	select {
	case <-second.Done():
		t.Fatal("the handed-off lease is done")
	default:
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := e.locker.Acquire(ctx, first.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release(ctx)
	if third.Fence() <= second.Fence() {
		t.Fatalf("the next acquire's fence %d is not above the handed-off lease's %d", third.Fence(), second.Fence())
	}
}

// TestScriptErrorAfterItsSetLeavesNoLock: the fenced acquire script sets the
// lock key, then fails on a fence counter that is not a number (Redis does
// not roll a script back). Acquire reports the storage error; the key it
// set must not stay locked with no lease to release it.
func TestScriptErrorAfterItsSetLeavesNoLock(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithFencing(), core.WithTTL(time.Minute))
	ctx := context.Background()
	name := uniq(t)
	key, _ := e.locker.Key(name)
	e.client.Set(ctx, key+":fence", "not a number", time.Minute)
	if _, err := e.locker.Acquire(ctx, name); !errors.Is(err, core.ErrStorage) {
		t.Fatalf("acquire with a broken fence counter = %v, want ErrStorage", err)
	}
	if n := e.client.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("the failed script left the lock set (PTTL %v) with no lease to release it", e.client.PTTL(ctx, key).Val())
	}
}
