package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// countingQueue is a LocalQueue that gives every Enter a turn of its own and
// counts the turns still open, so that a test can see a turn that was never
// left.
type countingQueue struct{ open atomic.Int64 }

type countingTurn struct{ q *countingQueue }

func (q *countingQueue) Enter(context.Context, string, string, time.Time) (core.LocalTurn, error) {
	q.open.Add(1)
	return countingTurn{q}, nil
}

func (countingTurn) Passed() *core.Lease   { return nil }
func (countingTurn) Pass(*core.Lease) bool { return false }
func (t countingTurn) Leave()              { t.q.open.Add(-1) }

// recovered calls f and reports whether it panicked.
func recovered(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// A Handler that panics in Release before calling next: the panic goes on,
// but the lock is released in the store and the local turn ends, as for a
// Handler that returns without calling next.
func TestPanicInReleaseStillReleases(t *testing.T) {
	leakCheck(t)
	q := &countingQueue{}
	var boom atomic.Bool
	e := newEnv(t, nil, core.WithLocalQueue(q), core.WithHandlers(core.HandlerFuncs{
		OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
			if boom.Load() {
				panic("boom")
			}
			return next(ctx, lease)
		},
	}))
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	boom.Store(true)
	if !recovered(func() { _ = lease.Release(ctx) }) {
		t.Fatal("the Handler's panic did not reach the caller")
	}
	if n, _ := e.client.Exists(ctx, lease.Key()).Result(); n != 0 {
		t.Fatal("the lock stayed in the store after a Release whose Handler panicked")
	}
	if n := q.open.Load(); n != 0 {
		t.Fatalf("%d local turns still open", n)
	}
}

// A Handler that panics in Acquire after next took the lock: the panic goes
// on, the lock (which has no holder) is released in the store and in the
// local queue, and the Observers see a failed acquire.
func TestPanicInAcquireAfterNextReleases(t *testing.T) {
	leakCheck(t)
	q := &countingQueue{}
	var mu sync.Mutex
	var seen []core.AcquireEvent
	obs := observerFunc(func(e core.AcquireEvent) core.LeaseObserver {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
		return nil
	})
	// With the watchdog, a lock left without a holder would be renewed
	// forever.
	e := newEnv(t, nil, core.WithLocalQueue(q), core.WithObservers(obs), core.WithWatchdog(), core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			if _, err := next(ctx, req); err != nil {
				return err
			}
			panic("boom")
		},
	}))
	ctx := context.Background()
	name := uniq(t)
	if !recovered(func() { _, _ = e.locker.Acquire(ctx, name) }) {
		t.Fatal("the Handler's panic did not reach the caller")
	}
	key, _ := e.locker.Key(name)
	if n, _ := e.client.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("the lock taken before the panic stayed in the store")
	}
	if n := q.open.Load(); n != 0 {
		t.Fatalf("%d local turns still open", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0].Outcome != core.OutcomeError || seen[0].Lease != nil || seen[0].Err == nil {
		t.Fatalf("observers saw %+v, want one failed acquire (OutcomeError, no lease)", seen)
	}
}

// panickyStore is a Store whose TryAcquire panics while boom is set.
type panickyStore struct {
	core.Store
	boom atomic.Bool
}

func (s *panickyStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if s.boom.Load() {
		panic("boom")
	}
	return s.Store.TryAcquire(ctx, key, token, ttl, fenced)
}

// A Store that panics after the local turn was taken: the turn ends.
func TestPanicInStoreLeavesTheLocalTurn(t *testing.T) {
	leakCheck(t)
	q := &countingQueue{}
	s := &panickyStore{Store: core.NewRedisStore(shared.Client(t))}
	l := core.NewWithStore(s, core.WithLocalQueue(q))
	s.boom.Store(true)
	if !recovered(func() { _, _ = l.Acquire(context.Background(), uniq(t)) }) {
		t.Fatal("the store's panic did not reach the caller")
	}
	if n := q.open.Load(); n != 0 {
		t.Fatalf("%d local turns still open after the store panicked", n)
	}
}
