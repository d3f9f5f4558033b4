package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// waitInLine waits for token's turn at key as a fair Locker does: it polls
// with Enqueue every third of patience and listens to Grants in between,
// until a grant or ctx's end (then it leaves the line with Dequeue).
func waitInLine(ctx context.Context, s *zkstore.Store, key, token string, ttl, patience time.Duration) (core.Grant, error) {
	var grants <-chan core.Grant
	for {
		g, err := s.Enqueue(ctx, key, token, ttl, patience, true)
		if err != nil || g.OK {
			return g, err
		}
		if grants == nil {
			var stop func()
			grants, stop = s.Grants(key, token)
			defer stop()
		}
		select {
		case <-ctx.Done():
			_ = s.Dequeue(context.Background(), key, token)
			return core.Grant{}, ctx.Err()
		case <-time.After(patience / 3):
		case g := <-grants:
			if g.OK {
				return g, nil
			}
			grants = nil // a poll request; Grants again after the poll
		}
	}
}

// mustEnqueue queues token at key and fails the test if it is granted or
// fails.
func mustEnqueue(t testing.TB, s *zkstore.Store, key, token string, ttl, patience time.Duration) {
	t.Helper()
	g, err := s.Enqueue(ctx(t), key, token, ttl, patience, true)
	if err != nil || g.OK {
		t.Fatalf("Enqueue(%q) behind a holder: %+v, %v; want to wait", token, g, err)
	}
}

// TestQueueTakesFreeKey: Enqueue on a free key takes it at once, for the
// smaller of its TTL and its patience, with a fence; the holder extends and
// releases it like any lock.
func TestQueueTakesFreeKey(t *testing.T) {
	leakCheck(t)
	s := newStore(t, dial(t, "", 0))
	key := uniq(t)
	g, err := s.Enqueue(ctx(t), key, "tok", time.Minute, time.Second, true)
	if err != nil || !g.OK || g.Fence <= 0 || g.TTL != time.Second {
		t.Fatalf("Enqueue of a free key: %+v, %v; want OK with a fence and TTL 1s", g, err)
	}
	ok, fence, err := s.Extend(ctx(t), key, "tok", time.Minute, true)
	if err != nil || !ok || fence <= g.Fence {
		t.Fatalf("Extend of a lock taken by Enqueue: %v, %d, %v (grant's fence %d)", ok, fence, err, g.Fence)
	}
	if ok, err := s.Release(ctx(t), key, "tok"); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
}

// TestQueueGrantsInArrivalOrder: waiters on four connections queue behind
// a holder in a known order and poll; a contender that does not queue
// (TryAcquire) finds the key busy while they wait; once the holder
// releases, they get the lock in their order of arrival, one at a time,
// with increasing fences; and when the last is done, the key's nodes are
// gone. The patience (3 s, polls every second) outlasts the stall of a
// waiter on a loaded machine: a waiter that misses it is dead, and skipped.
func TestQueueGrantsInArrivalOrder(t *testing.T) {
	leakCheck(t)
	const ttl, patience = time.Minute, 3 * time.Second
	conn := dial(t, "", 0)
	r := root(t)
	holder := newStore(t, conn, zkstore.WithRoot(r))
	key := "fair"
	const n = 4
	waiters := make([]*zkstore.Store, n)
	for i := range waiters { // connected before anyone queues
		waiters[i] = newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	}
	rude := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	hfence := mustAcquire(t, holder, key, "holder", ttl, true)
	for i := range waiters {
		mustEnqueue(t, waiters[i], key, fmt.Sprint("w", i), ttl, patience)
	}
	if ok, _, err := rude.TryAcquire(ctx(t), key, "rude", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquire past the queue: %v, %v; want busy", ok, err)
	}

	var mu sync.Mutex
	var order []int
	var fences []int64
	inside := 1 // the holder
	var wg sync.WaitGroup
	for i, s := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tok := fmt.Sprint("w", i)
			g, err := waitInLine(c, s, key, tok, ttl, patience)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			if g.TTL <= 0 || g.TTL > patience {
				t.Errorf("waiter %d: grant's TTL %v; want in (0, %v]", i, g.TTL, patience)
			}
			mu.Lock()
			inside++
			if inside > 1 {
				t.Errorf("waiter %d holds the lock with another", i)
			}
			order = append(order, i)
			fences = append(fences, g.Fence)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			if ok, err := s.Release(context.Background(), key, tok); err != nil || !ok {
				t.Errorf("waiter %d: Release: %v, %v", i, ok, err)
			}
		}()
	}
	time.Sleep(patience) // the waiters poll at least twice before the release
	mu.Lock()
	inside--
	mu.Unlock()
	if ok, err := holder.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release by the holder: %v, %v", ok, err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grants in the order %v; want the order of arrival 0..%d", order, n-1)
		}
	}
	last := hfence
	for i, f := range fences {
		if f <= last {
			t.Errorf("waiter %d's fence %d is not above the one before, %d", i, f, last)
		}
		last = f
	}
	if got := children(t, conn, r+"/"+key); len(got) != 0 {
		t.Errorf("nodes %q left after the last waiter released", got)
	}
}

// TestQueueSkipsDeadWaiter: a waiter that queued and stopped polling (its
// process stalls; its session lives) is dead after its patience: the
// waiter behind it gets the lock then, and not before. The dead waiter's
// next poll queues it again, behind the new holder, which has renewed its
// lock for a minute. The patience (3 s) outlasts the stall of the live
// waiter on a loaded machine.
func TestQueueSkipsDeadWaiter(t *testing.T) {
	leakCheck(t)
	const ttl, patience = time.Minute, 3 * time.Second
	key := uniq(t)
	holder := newStore(t, dial(t, "", 0))
	dead := newStore(t, dial(t, "", 0))
	live := newStore(t, dial(t, "", 0))
	mustAcquire(t, holder, key, "holder", ttl, true)
	lastPoll := time.Now()
	mustEnqueue(t, dead, key, "dead", ttl, patience)
	mustEnqueue(t, live, key, "live", ttl, patience)
	if ok, err := holder.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release by the holder: %v, %v", ok, err)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := waitInLine(c, live, key, "live", ttl, patience)
	if err != nil || !g.OK {
		t.Fatalf("the live waiter behind a dead one: %+v, %v", g, err)
	}
	if waited := time.Since(lastPoll); waited < patience-patience/100 {
		t.Errorf("the live waiter got the lock %v after the dead waiter's last poll; not before its patience, %v", waited, patience)
	}
	// The holder extends its grant to its TTL, as a Locker does.
	if ok, _, err := live.Extend(ctx(t), key, "live", ttl, false); err != nil || !ok {
		t.Fatalf("Extend by the live waiter after its grant: %v, %v", ok, err)
	}
	g, err = dead.Enqueue(ctx(t), key, "dead", ttl, patience, true)
	if err != nil || g.OK {
		t.Errorf("the dead waiter's late poll: %+v, %v; want to wait again", g, err)
	}
	if err := dead.Dequeue(ctx(t), key, "dead"); err != nil {
		t.Errorf("Dequeue: %v", err)
	}
	if ok, err := live.Release(ctx(t), key, "live"); err != nil || !ok {
		t.Errorf("Release: %v, %v", ok, err)
	}
}

// TestQueueDequeuePassesGrant: a waiter that does not poll (a long
// patience) learns of its grant from Grants alone when the holder
// releases; if it then leaves with Dequeue instead of taking the lock, the
// next waiter gets it.
func TestQueueDequeuePassesGrant(t *testing.T) {
	leakCheck(t)
	const ttl, patience = time.Minute, 20 * time.Second
	key := uniq(t)
	holder := newStore(t, dial(t, "", 0))
	first := newStore(t, dial(t, "", 0))
	second := newStore(t, dial(t, "", 0))
	hfence := mustAcquire(t, holder, key, "holder", ttl, true)
	mustEnqueue(t, first, key, "first", ttl, patience)
	mustEnqueue(t, second, key, "second", ttl, patience)
	c1, stop1 := first.Grants(key, "first")
	defer stop1()
	c2, stop2 := second.Grants(key, "second")
	defer stop2()
	time.Sleep(100 * time.Millisecond) // the watches are set
	if ok, err := holder.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release by the holder: %v, %v", ok, err)
	}
	var g core.Grant
	select {
	case g = <-c1:
	case g = <-c2:
		t.Fatalf("the second waiter got %+v before the first", g)
	case <-time.After(10 * time.Second):
		t.Fatal("no grant within 10s of the release")
	}
	if !g.OK || g.Fence <= hfence || g.TTL <= 0 || g.TTL > patience {
		t.Fatalf("grant %+v; want OK, a fence above %d, a TTL in (0, %v]", g, hfence, patience)
	}
	// The lock is the first waiter's: nobody else takes it.
	if ok, _, err := holder.TryAcquire(ctx(t), key, "other", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquire of a granted key: %v, %v", ok, err)
	}
	if err := first.Dequeue(ctx(t), key, "first"); err != nil {
		t.Fatalf("Dequeue: %v", err)
	}
	select {
	case g = <-c2:
	case <-time.After(10 * time.Second):
		t.Fatal("no grant to the second waiter within 10s of the first's Dequeue")
	}
	if !g.OK {
		t.Fatalf("grant %+v", g)
	}
	if ok, _, err := second.Extend(ctx(t), key, "second", ttl, false); err != nil || !ok {
		t.Fatalf("Extend by the granted waiter: %v, %v", ok, err)
	}
	if ok, err := second.Release(ctx(t), key, "second"); err != nil || !ok {
		t.Fatalf("Release by the granted waiter: %v, %v", ok, err)
	}
}

// TestQueueGivingUpLeavesNothing: waiters that give up (Dequeue) leave no
// node behind, and the key's parent goes once nobody holds or waits.
func TestQueueGivingUpLeavesNothing(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	s := newStore(t, conn, zkstore.WithRoot(r))
	key := "k"
	mustAcquire(t, s, key, "holder", time.Minute, false)
	for i := range 3 {
		w := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
		tok := fmt.Sprint("w", i)
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := waitInLine(c, w, key, tok, time.Minute, 150*time.Millisecond)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a waiter behind a holder: %v; want its deadline", err)
		}
	}
	// A waiter whose last Enqueue was cut by its deadline leaves its node
	// to the store's clean-up, in the background.
	eventually(t, 30*time.Second, "nodes of waiters left after they gave up", func() bool {
		return len(children(t, conn, r+"/"+key)) == 1
	})
	if ok, err := s.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	eventually(t, 30*time.Second, "the key's parent node stayed", func() bool {
		ok, _, err := conn.Exists(r + "/" + key)
		if err != nil {
			t.Fatal(err)
		}
		return !ok
	})
}
