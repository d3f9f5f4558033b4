package rueidisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
)

// client is a kind of Redis client a Locker can be built on.
type client struct {
	name string
	// locker returns a new Locker of the shared server with opts, on a
	// client of its own, and the count of the client's round trips; both
	// are closed when the test ends.
	locker func(t *testing.T, opts ...core.Option) (*core.Locker, *atomic.Int64)
}

var clients = []client{
	{"go-redis", func(t *testing.T, opts ...core.Option) (*core.Locker, *atomic.Int64) {
		c := shared.Client(t)
		rt := &redistest.RoundTrips{}
		c.AddHook(rt)
		return opened(t, core.New(c, opts...)), &rt.N
	}},
	{"rueidis", func(t *testing.T, opts ...core.Option) (*core.Locker, *atomic.Int64) {
		c := &counting{Client: newClient(t, shared.Addr())}
		return opened(t, core.NewWithStore(newStore(t, c), opts...)), &c.n
	}},
}

// opened fails the test if l is not usable, and closes it when the test
// ends (before its store and client).
func opened(t *testing.T, l *core.Locker) *core.Locker {
	t.Helper()
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// waitQueued waits until n waiters are in the queue of key.
func waitQueued(t *testing.T, key string, n int64) {
	t.Helper()
	admin := shared.Client(t)
	waitFor(t, fmt.Sprintf("%d waiters in the queue of %s", n, key), func() bool {
		return admin.ZCard(context.Background(), redisscript.QueueKey(key)).Val() == n
	})
}

// assertNoQueue fails the test if the lock key or its queue's keys are
// left.
func assertNoQueue(t *testing.T, key string) {
	t.Helper()
	admin := shared.Client(t)
	if n := admin.Exists(context.Background(), key, redisscript.QueueKey(key), redisscript.WaitersKey(key)).Val(); n != 0 {
		t.Errorf("%d of the lock %s and its queue's keys are left", n, key)
	}
}

// Lockers on go-redis and on rueidis, all WithFair (plain and with
// fencing), share one fair queue: under contention no two critical
// sections overlap, fences strictly increase, the lock passes from each
// kind of client to the other; waiters that queue one after the other get
// the lock in the order they queued, whichever client each is on, the
// grants crossing from go-redis to rueidis and back; and no queue is left.
func TestInteropFair(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fenced"}[fenced], func(t *testing.T) {
			leakCheck(t)
			opts := []core.Option{core.WithFair(), core.WithWait(30 * time.Second), core.WithTTL(10 * time.Second)}
			if fenced {
				opts = append(opts, core.WithFencing())
			}
			t.Run("contention", func(t *testing.T) {
				goredis, rue := lockers(t, opts...)
				name, holders := interop(t, goredis, rue, fenced, true)
				var toRue, toGoredis int
				for i := 1; i < len(holders); i++ {
					switch {
					case holders[i-1] == goredis && holders[i] == rue:
						toRue++
					case holders[i-1] == rue && holders[i] == goredis:
						toGoredis++
					}
				}
				if toRue == 0 || toGoredis == 0 {
					t.Errorf("the lock passed %d times from go-redis to rueidis and %d times back, in %d critical sections: want both", toRue, toGoredis, len(holders))
				}
				key, _ := goredis.Key(name)
				assertNoQueue(t, key)
			})
			t.Run("arrival order", func(t *testing.T) {
				interopArrivalOrder(t, opts)
			})
		})
	}
}

// interopArrivalOrder queues 6 waiters behind a holder on go-redis, one
// after the other (each once the one before it is in line), each on a
// Locker and a client of its own, alternately on rueidis and go-redis: the
// releases grant the lock to each in turn.
func interopArrivalOrder(t *testing.T, opts []core.Option) {
	ctx := context.Background()
	name := uniq(t)
	holder, _ := clients[0].locker(t, opts...)
	key, _ := holder.Key(name)
	first, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	type section struct {
		waiter int
		fence  int64
	}
	var mu sync.Mutex
	var sections []section
	var wg sync.WaitGroup
	// A test that fails early ends its waiters.
	waiting, stopWaiting := context.WithCancel(ctx)
	t.Cleanup(func() {
		stopWaiting()
		wg.Wait()
	})
	for i := range waiters {
		c := clients[(i+1)%2] // rueidis first, after the holder on go-redis
		// A patience of seconds: a waiter that a loaded host stalls keeps
		// its place.
		l, _ := c.locker(t, append(opts, core.WithFairPatience(5*time.Second))...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(waiting, time.Minute)
			defer cancel()
			lease, err := l.Acquire(ctx, name)
			if err != nil {
				t.Errorf("waiter %d (%s): %v", i, c.name, err)
				return
			}
			mu.Lock()
			sections = append(sections, section{i, lease.Fence()})
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := lease.Release(ctx); err != nil {
				t.Errorf("waiter %d (%s): %v", i, c.name, err)
			}
		}()
		waitQueued(t, key, int64(i+1))
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	last := first.Fence()
	for i, s := range sections {
		if s.waiter != i {
			t.Fatalf("the waiters got the lock in the order %v, want the order they queued in", sections)
		}
		if s.fence != 0 && s.fence <= last {
			t.Errorf("waiter %d got fence %d after %d: fences must strictly increase", i, s.fence, last)
		}
		last = s.fence
	}
	if len(sections) != waiters {
		t.Fatalf("%d of %d waiters got the lock", len(sections), waiters)
	}
	assertNoQueue(t, key)
}

// A waiter granted the lock by a release hears it by pub/sub and confirms
// it with one round trip (its poll, which dates the lease from the store's
// answer), with its fence when it asked for one: a rueidis waiter as a
// go-redis one, whichever client released.
func TestFairGrantCostsTheWaiterOneRoundTrip(t *testing.T) {
	for _, holderClient := range clients {
		for _, waiterClient := range clients {
			for _, fenced := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s releases, %s waits, fenced=%v", holderClient.name, waiterClient.name, fenced), func(t *testing.T) {
					leakCheck(t)
					ctx := context.Background()
					opts := []core.Option{core.WithFair()}
					if fenced {
						opts = append(opts, core.WithFencing())
					}
					// Every script in the server's cache: each call of the
					// waiter is one round trip (no EVALSHA that finds its
					// script missing and an EVAL), so that its count tells
					// which calls it made.
					loadScripts(t)
					holder, _ := holderClient.locker(t, opts...)
					// Polls a minute apart (a third of the patience), and a
					// wait longer than the test: the grant is heard by
					// pub/sub (and confirmed by a poll) or not at all.
					waiter, n := waiterClient.locker(t, append(opts, core.WithFairPatience(3*time.Minute), core.WithWait(2*time.Minute))...)
					name := uniq(t)
					key, _ := holder.Key(name)
					lease, err := holder.Acquire(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					n.Store(0)
					got := make(chan *core.Lease, 1)
					waiting, stopWaiting := context.WithCancel(ctx)
					done := make(chan struct{})
					t.Cleanup(func() { // a test that fails early ends its waiter
						stopWaiting()
						<-done
					})
					go func() {
						defer close(done)
						l, err := waiter.Acquire(waiting, name)
						if err != nil {
							t.Error(err)
						}
						got <- l
					}()
					waitQueued(t, key, 1)
					// Its first call queued it (one round trip); its
					// subscription's confirmation asks it to poll once more
					// (the second): after that, it makes none until its next
					// poll, a minute later.
					waitFor(t, "the waiter's poll at its subscription's confirmation", func() bool { return n.Load() >= 2 })
					// Count from when it has been quiet for a while, besides.
					last, quiet := n.Load(), time.Now()
					for time.Since(quiet) < 300*time.Millisecond {
						time.Sleep(20 * time.Millisecond)
						if c := n.Load(); c != last {
							last, quiet = c, time.Now()
						}
					}
					before := n.Load()
					if err := lease.Release(ctx); err != nil {
						t.Fatal(err)
					}
					var l *core.Lease
					select {
					case l = <-got:
					case <-time.After(30 * time.Second):
						t.Fatal("the grant's message did not reach the waiter within 30s")
					}
					if l == nil {
						t.FailNow()
					}
					if d := n.Load() - before; d != 1 {
						t.Errorf("the granted waiter made %d round trips after the release, want 1 (the poll that confirms the grant)", d)
					}
					if fenced && l.Fence() <= lease.Fence() {
						t.Errorf("the granted fence %d is not above the previous holder's %d", l.Fence(), lease.Fence())
					}
					if !fenced && l.Fence() != 0 {
						t.Errorf("a lease granted without fencing has fence %d", l.Fence())
					}
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
					assertNoQueue(t, key)
				})
			}
		}
	}
}

// loadScripts puts the scripts of the stores in the shared server's cache.
func loadScripts(t *testing.T) {
	t.Helper()
	admin := shared.Client(t)
	for _, src := range []string{
		redisscript.Acquire, redisscript.AcquireFenced, redisscript.Release,
		redisscript.Extend, redisscript.ExtendFenced, redisscript.FenceFloor,
		redisscript.Enqueue, redisscript.Dequeue, redisscript.Poll,
	} {
		if err := admin.ScriptLoad(context.Background(), src).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Grants receives the grants of its token only, with their fence and TTL;
// a Watch of the same key is woken by every message. Each confirmation of
// the subscription, the first and that of a new connection after a lost
// one, asks the waiter to poll.
func TestGrants(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, newClient(t, proxy.Addr()))
	admin := shared.Client(t)
	ctx := context.Background()
	key := "grants:{" + uniq(t) + "}"
	ch := redisscript.Channel(key)
	grants, stop := s.Grants(key, "mine")
	defer stop()
	watch, stopWatch := s.Watch(key)
	defer stopWatch()
	pollRequest := func(when string) {
		t.Helper()
		select {
		case g := <-grants:
			if g.OK {
				t.Fatalf("%s: a grant %+v, want a poll request", when, g)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no poll request within 10s", when)
		}
	}
	publish := func(payload string) {
		t.Helper()
		if err := admin.Publish(ctx, ch, payload).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-watch:
		case <-time.After(10 * time.Second):
			t.Fatalf("the watcher was not woken by the message %q", payload)
		}
	}
	pollRequest("at the subscription's confirmation")

	// The watcher was woken after the message was passed on to every
	// waiter of the channel: nothing more is coming to grants.
	for _, other := range []string{"theirs 7 1000", "", "mine x 1000", "mine 7"} {
		publish(other)
		select {
		case g := <-grants:
			t.Fatalf("the message %q reached the waiter of mine as %+v", other, g)
		default:
		}
	}
	publish("mine 42 1500")
	select {
	case g := <-grants:
		if want := (core.Grant{OK: true, Fence: 42, TTL: 1500 * time.Millisecond}); g != want {
			t.Fatalf("grant = %+v, want %+v", g, want)
		}
	default:
		t.Fatal("the grant of mine did not reach its waiter")
	}

	proxy.Cut()
	waitFor(t, "the subscription's end with its connection", func() bool { return numSub(t, ctx, admin, ch) == 0 })
	proxy.Restore()
	pollRequest("at the confirmation on a new connection")
	publish("mine 43 1500")
	select {
	case g := <-grants:
		if !g.OK || g.Fence != 43 {
			t.Fatalf("grant after the new subscription = %+v, want fence 43", g)
		}
	default:
		t.Fatal("the grant of mine did not reach its waiter after the new subscription")
	}
}

// An uncontended acquire and release of a fair Locker on rueidis take two
// round trips, as without WithFair (once the scripts are cached).
func TestFairUncontendedIsTwoRoundTrips(t *testing.T) {
	leakCheck(t)
	l, n := clients[1].locker(t, core.WithFair())
	ctx := context.Background()
	name := uniq(t)
	for i := range 11 {
		if i == 1 {
			n.Store(0) // the first cycle caches the scripts
		}
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Load(); got != 20 {
		t.Fatalf("10 uncontended fair acquire and release cycles took %d round trips, want 20", got)
	}
}
