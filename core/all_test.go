package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
)

// These tests were written by a review of AcquireAll; each failed before
// its fix.

// waitingAll is a Redis store (Sharer and MultiAcquirer) that signals the
// first exclusive attempt that records a waiting writer.
type waitingAll struct {
	core.Sharer
	ma      core.MultiAcquirer
	waiting chan struct{}
	once    sync.Once
}

func (s *waitingAll) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	return s.ma.TryAcquireAll(ctx, keys, token, ttl, fenced)
}

func (s *waitingAll) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Sharer.TryAcquireWaiting(ctx, key, token, ttl, patience, fenced)
	s.once.Do(func() { close(s.waiting) })
	return ok, fence, err
}

// TestAcquireAllKeepsReadersOut: an exclusive AcquireAll that waits behind
// a shared holder keeps new shared holds out, as an exclusive Acquire
// does; otherwise overlapping readers could starve it forever.
func TestAcquireAllKeepsReadersOut(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	base := sharerOf(t)
	s := &waitingAll{Sharer: base, ma: base.(core.MultiAcquirer), waiting: make(chan struct{})}
	l := core.NewWithStore(s)
	a, b := uniq(t), uniq(t)
	reader, err := l.Acquire(ctx, a, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		lease, err := l.AcquireAll(ctx, []string{a, b}, core.Wait(30*time.Second))
		if err == nil {
			_ = lease.Release(ctx)
		}
		done <- err
	}()
	select {
	case <-s.waiting:
	case err := <-done:
		t.Fatalf("AcquireAll ended before it waited: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("AcquireAll never waited as a writer (no TryAcquireWaiting)")
	}
	if late, err := l.Acquire(ctx, a, core.Shared(), core.Wait(0)); err == nil {
		_ = late.Release(ctx)
		_ = reader.Release(ctx)
		<-done
		t.Fatal("a new shared hold was taken while an exclusive AcquireAll of the name waits: readers can starve it")
	}
	_ = reader.Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAcquireAllSlots: two holders of Permits(2) over the same names tell
// their slots apart, name by name (SlotOf) and for the first name (Slot).
func TestAcquireAllSlots(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	e := newEnv(t, nil)
	a, b := uniq(t), uniq(t)
	first, err := e.locker.AcquireAll(ctx, []string{a, b}, core.Permits(2), core.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(ctx)
	second, err := e.locker.AcquireAll(ctx, []string{a, b}, core.Permits(2), core.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if first.Slot() == second.Slot() {
		t.Fatalf("two holders of Permits(2) of %q both report Slot() %d", first.Name(), first.Slot())
	}
	for _, n := range []string{a, b} {
		if first.SlotOf(n) == second.SlotOf(n) {
			t.Fatalf("two holders of Permits(2) of %q both report SlotOf %d", n, first.SlotOf(n))
		}
	}
}

// notAtomic is a Redis store whose TryAcquireAll always answers
// ErrNotAtomic, as a Cluster does for names of several slots.
type notAtomic struct{ core.Sharer }

func (notAtomic) TryAcquireAll(context.Context, []string, string, time.Duration, bool) (bool, []int64, error) {
	return false, nil, core.ErrNotAtomic
}

type startCounter struct {
	mu               sync.Mutex
	starts, acquires map[string]int
}

func (c *startCounter) ObserveStart(_ context.Context, e core.StartEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts[e.Name]++
}

func (c *startCounter) ObserveAcquire(_ context.Context, e core.AcquireEvent) core.LeaseObserver {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acquires[e.Name]++
	return nil
}

// TestAcquireAllStartsOnce: one StartEvent per AcquireEvent, whichever
// path AcquireAll takes, or lockotel's pending gauge never comes back to 0.
func TestAcquireAllStartsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) core.Store
		busy  bool
	}{
		{"not atomic", func(t *testing.T) core.Store { return notAtomic{sharerOf(t)} }, false},
		{"atomic, free", func(t *testing.T) core.Store { return sharerOf(t) }, false},
		{"atomic, then one by one", func(t *testing.T) core.Store { return sharerOf(t) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			ctx := context.Background()
			obs := &startCounter{starts: map[string]int{}, acquires: map[string]int{}}
			l := core.NewWithStore(tc.store(t), core.WithObservers(obs))
			a, b := uniq(t), uniq(t)
			if tc.busy {
				other := newEnv(t, nil).locker
				held, err := other.Acquire(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(100*time.Millisecond, func() { _ = held.Release(ctx) })
			}
			lease, err := l.AcquireAll(ctx, []string{a, b}, core.Wait(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{a, b} {
				if obs.starts[n] != 1 || obs.acquires[n] != 1 {
					t.Errorf("%q: %d StartEvents, %d AcquireEvents, want 1 and 1", n, obs.starts[n], obs.acquires[n])
				}
			}
		})
	}
}

// TestAcquireAllOneByOneRenewsItsFirstNames: when AcquireAll takes its
// names one by one and waits for a later name longer than the TTL, it
// does not return a lease one of whose names expired meanwhile.
func TestAcquireAllOneByOneRenewsItsFirstNames(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	l := core.NewWithStore(notAtomic{core.NewRedisStore(c).(core.Sharer)})
	a, b := "a-"+uniq(t), "b-"+uniq(t)
	ka, _ := l.Key(a)
	blocker, err := l.Acquire(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *core.Lease
		err   error
	}
	res := make(chan result, 1)
	go func() {
		lease, err := l.AcquireAll(ctx, []string{b, a}, core.TTL(2*time.Second), core.Wait(30*time.Second))
		res <- result{lease, err}
	}()
	seen := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		n, err := c.Exists(ctx, ka).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			seen = true
		} else if seen {
			break // a was taken, and has expired while AcquireAll waits for b
		}
	}
	if !seen {
		t.Fatal("AcquireAll never took its first name")
	}
	_ = blocker.Release(ctx)
	r := <-res
	if r.err != nil {
		t.Fatalf("AcquireAll: %v", r.err)
	}
	defer r.lease.Release(ctx)
	if r.lease.Lost() || !time.Now().Before(r.lease.ValidUntil()) {
		t.Fatalf("AcquireAll succeeded with a lease that is already lost (Lost %v, ValidUntil %v ago)", r.lease.Lost(), time.Since(r.lease.ValidUntil()))
	}
}

// TestAcquireAllOnARing: a Ring shards by its own hash, not by Cluster
// slot, so names whose keys share a slot may live on two shards: the Redis
// store takes them one by one there, and AcquireAll never leaves a name
// that another Acquire can take while it is held.
func TestAcquireAllOnARing(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	s1, s2 := redistest.Start(t), redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"s1": s1.Addr(), "s2": s2.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	l := core.New(ring)
	t.Cleanup(func() { _ = l.Close() })
	bySlot := map[int]string{}
	pairs := 0
	for i := 0; pairs < 20 && i < 2_000_000; i++ {
		name := fmt.Sprintf("n%d", i)
		key, _ := l.Key(name)
		slot := redisscript.Slot(key)
		first, ok := bySlot[slot]
		if !ok {
			bySlot[slot] = name
			continue
		}
		delete(bySlot, slot)
		pairs++
		all, err := l.AcquireAll(ctx, []string{first, name}, core.Wait(0))
		if err != nil {
			t.Fatalf("AcquireAll(%q, %q): %v", first, name, err)
		}
		for _, n := range []string{first, name} {
			if other, err := l.Acquire(ctx, n, core.Wait(0)); err == nil {
				_ = other.Release(ctx)
				_ = all.Release(ctx)
				t.Fatalf("%q is held by AcquireAll(%q, %q) and taken again by Acquire: two holders", n, first, name)
			}
		}
		_ = all.Release(ctx)
	}
}
