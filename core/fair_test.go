package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

func TestFairMutualExclusion(t *testing.T) {
	name := uniq(t)
	var envs []*env
	for range 3 {
		envs = append(envs, newEnv(t, nil, core.WithFair(), core.WithWait(20*time.Second)))
	}
	ok, failed, o := hammer(t, envs, name, 3, 10, time.Millisecond)
	if o.Overlaps() > 0 || failed > 0 || ok != 90 {
		t.Fatalf("ok %d, failed %d, overlaps %d: want 90, 0, 0", ok, failed, o.Overlaps())
	}
	assertNoQueue(t, envs[0], name)
}

// assertNoQueue checks that the queue keys of name are gone.
func assertNoQueue(t *testing.T, e *env, name string) {
	t.Helper()
	key, _ := e.locker.Key(name)
	if n := e.client.Exists(context.Background(), key, key+":queue", key+":waiters").Val(); n != 0 {
		t.Fatalf("%d of the lock and its queue keys are left", n)
	}
}

// TestFairGrantsInArrivalOrder queues waiters one after the other behind a
// holder, each on a Locker of its own, and checks that they get the lock in
// the order they came.
func TestFairGrantsInArrivalOrder(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		e := newEnv(t, nil, core.WithFair(), core.WithWait(10*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := e.locker.Acquire(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, holder, name, int64(i+1))
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grants in order %v, want 0..%d", order, waiters-1)
		}
	}
	assertNoQueue(t, holder, name)
}

// waitQueued waits until n waiters queue for name.
func waitQueued(t *testing.T, e *env, name string, n int64) {
	t.Helper()
	key, _ := e.locker.Key(name)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if e.client.ZCard(context.Background(), key+":queue").Val() == n {
			return
		}
	}
	t.Fatalf("%d waiters did not queue for %q", n, name)
}

// TestFairHandoffCostsTheNewHolderNoRoundTrip: a waiter granted the lock by a
// release learns it by pub/sub, without a round trip of its own.
func TestFairHandoffCostsTheNewHolderNoRoundTrip(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	waiter := newEnv(t, nil, core.WithFair(), core.WithFairPatience(30*time.Second))
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.locker.Acquire(ctx, name)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, holder, name, 1)
	time.Sleep(100 * time.Millisecond) // the subscription is confirmed (a poll follows it)
	before := waiter.rt.N.Load()
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if n := waiter.rt.N.Load() - before; n != 0 {
		t.Fatalf("the granted waiter made %d round trips after the release, want 0", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFairUncontendedIsTwoRoundTrips(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil, core.WithFair())
	ctx := context.Background()
	for i := range 11 {
		if i == 1 {
			e.rt.N.Store(0) // the first cycle loads the scripts
		}
		lease, err := e.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.rt.N.Load(); n != 20 {
		t.Fatalf("10 uncontended fair acquire+release cycles made %d round trips, want 20", n)
	}
}

// TestFairGiveUpLeavesTheQueue: a waiter whose budget runs out leaves the
// queue, and the lock goes to the waiter behind it.
func TestFairGiveUpLeavesTheQueue(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	quitter := newEnv(t, nil, core.WithFair(), core.WithWait(200*time.Millisecond))
	if _, err := quitter.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	key, _ := holder.locker.Key(name)
	if n := holder.client.ZCard(ctx, key+":queue").Val(); n != 0 {
		t.Fatalf("%d entries left in the queue after the waiter gave up", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoQueue(t, holder, name)
}

// TestFairGrantToDeadWaiterIsFreedByPatience: a waiter that queued and then
// stopped polling (its process died) is skipped after its patience; a lock
// granted to it is freed after its patience, not its TTL.
func TestFairGrantToDeadWaiterIsFreedByPatience(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	patience := 300 * time.Millisecond
	holder := newEnv(t, nil, core.WithFair(), core.WithTTL(time.Minute))
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The dead waiter: queued by hand, as its Locker would, then silent.
	key, _ := holder.locker.Key(name)
	store := core.NewRedisStore(holder.client).(core.Queuer)
	if g, err := store.Enqueue(ctx, key, "dead-waiter", time.Minute, patience, false); err != nil || g.OK {
		t.Fatalf("Enqueue = %+v, %v", g, err)
	}
	if err := lease.Release(ctx); err != nil { // grants it to the dead waiter
		t.Fatal(err)
	}
	if v := holder.client.Get(ctx, key).Val(); v != "dead-waiter" {
		t.Fatalf("the lock holds %q after the release, want the dead waiter's grant", v)
	}
	if d := holder.client.PTTL(ctx, key).Val(); d > patience {
		t.Fatalf("the grant to the waiter lasts %v, want at most its patience %v", d, patience)
	}
	live := newEnv(t, nil, core.WithFair(), core.WithFairPatience(patience), core.WithWait(5*time.Second))
	l, err := live.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("the live waiter behind a dead grant: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoQueue(t, holder, name)
}

// TestFairGrantIsExtendedToTheTTL: a lock granted for the waiter's patience
// is extended to the lease's TTL while the request holds it.
func TestFairGrantIsExtendedToTheTTL(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	patience := 150 * time.Millisecond
	holder := newEnv(t, nil, core.WithFair())
	waiter := newEnv(t, nil, core.WithFair(), core.WithFairPatience(patience), core.WithTTL(10*time.Second))
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.locker.Acquire(ctx, name)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, holder, name, 1)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	time.Sleep(3 * patience)
	key, _ := holder.locker.Key(name)
	if d := holder.client.PTTL(ctx, key).Val(); d < 5*time.Second || l.Lost() {
		t.Fatalf("after 3 patiences the granted lock has PTTL %v (lost %v), want it extended to about 10s", d, l.Lost())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFairNeedsAQueue(t *testing.T) {
	nodes := redistest.StartNodes(t, 3)
	l := core.NewRedlock(nodes.Clients(t), core.WithFair())
	if err := l.Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Redlock with WithFair: Err() = %v, want ErrInvalidOption", err)
	}
	if err := core.New(shared.Client(t), core.WithFairPatience(time.Millisecond)).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("patience 1ms: Err() = %v, want ErrInvalidOption", err)
	}
}
