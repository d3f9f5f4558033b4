package rueidisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
)

// The conformance suite on a standalone server, through a proxy that Down
// cuts.
func TestConformance(t *testing.T) {
	proxy := redistest.NewProxy(t, shared.Addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		return newStore(t, newClient(t, proxy.Addr()))
	}, storetest.Options{
		Down: func(*testing.T) { proxy.Cut() },
		Up:   func(*testing.T) { proxy.Restore() },
	})
}

// The conformance suite with acquire.lua in place of SET NX GET, as on
// servers before Redis 7.0.
func TestConformanceWithoutSetGet(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s := newStore(t, newClient(t, shared.Addr()))
		rueidisstore.WithoutSetGet(s)
		return s
	})
}

// The conformance suite on a Redis Cluster of three masters.
func TestConformanceCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, 0)
	storetest.Run(t, func(t *testing.T) core.Store {
		return newStore(t, newClient(t, cluster.Addrs()...))
	})
}

// lockers returns a Locker on go-redis (core.New) and one on rueidis
// (core.NewWithStore) of the shared server, both with opts.
func lockers(t *testing.T, opts ...core.Option) (goredis, rue *core.Locker) {
	t.Helper()
	goredis = core.New(shared.Client(t), opts...)
	rue = core.NewWithStore(newStore(t, newClient(t, shared.Addr())), opts...)
	for _, l := range []*core.Locker{goredis, rue} {
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
	}
	return goredis, rue
}

// A go-redis Locker and a rueidis Locker contend for one name, with
// WithNotify, plain (SET NX GET) and with fencing (acquire_fenced.lua): no
// two critical sections overlap, and with fencing the fences strictly
// increase in the order of the critical sections, whichever client drew
// them.
func TestInteropMutualExclusionAndFences(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fenced"}[fenced], func(t *testing.T) {
			leakCheck(t)
			opts := []core.Option{core.WithNotify(), core.WithWait(30 * time.Second), core.WithTTL(10 * time.Second)}
			if fenced {
				opts = append(opts, core.WithFencing())
			}
			goredis, rue := lockers(t, opts...)
			interop(t, goredis, rue, fenced, false)
		})
	}
}

// interop runs 3 goroutines on each Locker, 15 critical sections each, on
// one name, and returns the name and the Locker of each critical section,
// in their order. In lockstep, a goroutine starts its next round (an
// acquire) once every goroutine has ended its last one (a release, or an
// error): each round has a critical section of each goroutine, so that,
// however the machine schedules them, the lock passes from each kind of
// client to the other (two rounds cannot be ordered otherwise).
func interop(t *testing.T, goredis, rue *core.Locker, fenced, lockstep bool) (name string, holders []*core.Locker) {
	name = uniq(t)
	var o redistest.Overlap
	var mu sync.Mutex
	var last int64
	sections := map[*core.Locker]int{}
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	lockers := []*core.Locker{goredis, rue, goredis, rue, goredis, rue}
	var roundMu sync.Mutex
	roundCond := sync.NewCond(&roundMu)
	ended, stopped := 0, false // rounds ended by all goroutines; a goroutine stopped early
	endRound := func(stop bool) {
		roundMu.Lock()
		defer roundMu.Unlock()
		ended++
		stopped = stopped || stop
		roundCond.Broadcast()
	}
	waitRound := func(round int) {
		if !lockstep {
			return
		}
		roundMu.Lock()
		defer roundMu.Unlock()
		for ended < round*len(lockers) && !stopped {
			roundCond.Wait()
		}
	}
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := true
			defer func() {
				if stop {
					endRound(true)
				}
			}()
			for round := range 15 {
				waitRound(round)
				ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					cancel()
					fail(err)
					return
				}
				exit := o.Enter()
				mu.Lock()
				if fenced && lease.Fence() <= last {
					errs = append(errs, fmt.Errorf("fence %d after %d: fences must strictly increase", lease.Fence(), last))
				}
				last = lease.Fence()
				sections[l]++
				holders = append(holders, l)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				exit()
				if err := lease.Release(ctx); err != nil {
					fail(err)
				}
				cancel()
				endRound(false)
			}
			stop = false
		}()
	}
	wg.Wait()
	if n := o.Overlaps(); n > 0 {
		t.Errorf("%d of %d critical sections overlapped", n, o.Entries())
	}
	for _, err := range errs {
		t.Error(err)
	}
	if sections[goredis] == 0 || sections[rue] == 0 {
		t.Errorf("critical sections: %d by go-redis, %d by rueidis; want both", sections[goredis], sections[rue])
	}
	return name, holders
}

// A release by either client wakes a waiter of the other at once (its
// random sleep is a minute): WithNotify works across go-redis and rueidis.
func TestInteropNotifyWakesTheOtherClient(t *testing.T) {
	leakCheck(t)
	opts := []core.Option{core.WithNotify(), core.WithWait(2 * time.Minute), core.WithSpin(time.Minute, 0)}
	goredis, rue := lockers(t, opts...)
	admin := shared.Client(t)
	for _, tc := range []struct {
		name           string
		holder, waiter *core.Locker
	}{
		{"go-redis releases, rueidis waits", goredis, rue},
		{"rueidis releases, go-redis waits", rue, goredis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			name := uniq(t)
			key, _ := tc.holder.Key(name)
			lease, err := tc.holder.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := tc.waiter.Acquire(ctx, name)
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			// Wait for the waiter's subscription, so that the release is not
			// published before anyone listens.
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := admin.PubSubNumSub(ctx, redisscript.Channel(key)).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n[redisscript.Channel(key)] > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not subscribe to the release channel within 10s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			start := time.Now()
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("the waiter had the lock %v after the release", time.Since(start).Round(time.Millisecond))
			case <-time.After(30 * time.Second): // half the waiter's sleep
				t.Fatal("the waiter was not woken by the release of the other client")
			}
		})
	}
}

// The Notifier of a rueidis Store is woken by a release through the
// go-redis store, and no notice comes before it.
func TestInteropWatch(t *testing.T) {
	leakCheck(t)
	rs := newStore(t, newClient(t, shared.Addr()))
	gs := core.NewRedisStore(shared.Client(t))
	t.Cleanup(func() { _ = gs.(interface{ Close() error }).Close() })
	gs.(core.Notifier).Announce()
	ctx := context.Background()
	key := "interop:{" + uniq(t) + "}"
	c, stop := rs.Watch(key)
	defer stop()
	if ok, _, err := gs.TryAcquire(ctx, key, "holder", time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquire = %v, %v", ok, err)
	}
	select {
	case <-c:
		t.Fatal("a notice before any release")
	case <-time.After(100 * time.Millisecond):
	}
	deadline := time.After(10 * time.Second)
	for {
		if _, err := gs.Release(ctx, key, "holder"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c:
			return
		case <-deadline:
			t.Fatal("no notice within 10s of releases through go-redis")
		case <-time.After(50 * time.Millisecond): // the subscription may not be in place yet
		}
		if ok, _, err := gs.TryAcquire(ctx, key, "holder", time.Minute, false); err != nil || !ok {
			t.Fatalf("TryAcquire = %v, %v", ok, err)
		}
	}
}

// Locks taken through either client use the same keys: a key locked by one
// is busy for the other, and the other's release of another token leaves it.
func TestInteropSameKeys(t *testing.T) {
	leakCheck(t)
	rs := newStore(t, newClient(t, shared.Addr()))
	gs := core.NewRedisStore(shared.Client(t))
	t.Cleanup(func() { _ = gs.(interface{ Close() error }).Close() })
	ctx := context.Background()
	key := "interop:{" + uniq(t) + "}"
	for _, fenced := range []bool{false, true} {
		ok, f1, err := rs.TryAcquire(ctx, key, "r", time.Minute, fenced)
		if err != nil || !ok {
			t.Fatalf("rueidis TryAcquire = %v, %v", ok, err)
		}
		if ok, _, err := gs.TryAcquire(ctx, key, "g", time.Minute, fenced); ok || err != nil {
			t.Fatalf("go-redis TryAcquire of a key rueidis holds = %v, %v", ok, err)
		}
		if ok, err := gs.Release(ctx, key, "r"); !ok || err != nil {
			t.Fatalf("go-redis Release of rueidis's lock by its token = %v, %v", ok, err)
		}
		ok, f2, err := gs.TryAcquire(ctx, key, "g", time.Minute, fenced)
		if !ok || err != nil || f2 < f1 || (fenced && f2 == f1) {
			t.Fatalf("go-redis TryAcquire after the release = %v, %d, %v (rueidis drew %d)", ok, f2, err, f1)
		}
		if ok, err := rs.Release(ctx, key, "g"); !ok || err != nil {
			t.Fatalf("rueidis Release of go-redis's lock by its token = %v, %v", ok, err)
		}
	}
}

// Round trips per uncontended acquire and release: two, with rueidis as
// with go-redis (once the scripts are cached).
func TestRoundTrips(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	rc := &counting{Client: newClient(t, shared.Addr())}
	rs := newStore(t, rc)
	gc := shared.Client(t)
	rt := &redistest.RoundTrips{}
	gc.AddHook(rt)
	gs := core.NewRedisStore(gc)
	t.Cleanup(func() { _ = gs.(interface{ Close() error }).Close() })
	for _, tc := range []struct {
		name  string
		store core.Store
		n     func() int64
		reset func()
	}{
		{"rueidis", rs, rc.n.Load, func() { rc.n.Store(0) }},
		{"go-redis", gs, rt.N.Load, func() { rt.N.Store(0) }},
	} {
		key := "rt:{" + uniq(t) + "}"
		for round := range 3 { // the first round caches the scripts
			for _, fenced := range []bool{false, true} {
				tc.reset()
				ok, _, err := tc.store.TryAcquire(ctx, key, "t", time.Minute, fenced)
				if err != nil || !ok {
					t.Fatalf("%s: TryAcquire = %v, %v", tc.name, ok, err)
				}
				if ok, err := tc.store.Release(ctx, key, "t"); err != nil || !ok {
					t.Fatalf("%s: Release = %v, %v", tc.name, ok, err)
				}
				if n := tc.n(); round > 0 && n != 2 {
					t.Errorf("%s: an acquire and release (fenced %v) took %d round trips, want 2", tc.name, fenced, n)
				}
			}
		}
	}
}

// New refuses bad arguments.
func TestBadArguments(t *testing.T) {
	leakCheck(t)
	client := newClient(t, shared.Addr())
	for _, tc := range []struct {
		name   string
		client rueidis.Client
		opts   []rueidisstore.Option
	}{
		{"nil client", nil, nil},
		{"nil option", client, []rueidisstore.Option{nil}},
		{"zero I/O timeout", client, []rueidisstore.Option{rueidisstore.WithIOTimeout(0)}},
		{"negative linger", client, []rueidisstore.Option{rueidisstore.WithNotifyLinger(-time.Second)}},
	} {
		s, err := rueidisstore.New(tc.client, tc.opts...)
		if err == nil || s != nil || !strings.HasPrefix(err.Error(), "rueidisstore: ") {
			t.Errorf("%s: New = %v, %v; want nil and an error of rueidisstore", tc.name, s, err)
		}
	}
}

// An attempt whose reply comes after the caller's deadline returns the
// context's error, and the SET it sent is undone in the background well
// before its TTL.
func TestAttemptCutByTheDeadlineIsUndone(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, newClient(t, proxy.Addr()))
	admin := shared.Client(t)
	ctx := context.Background()
	key := "cut:{" + uniq(t) + "}"
	proxy.SetDelay(100 * time.Millisecond)
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err := s.TryAcquire(c, key, "cut", time.Minute, false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire past its deadline = %v, want context.DeadlineExceeded", err)
	}
	proxy.SetDelay(0)
	time.Sleep(500 * time.Millisecond) // the SET, held 100ms by the proxy, has landed by now
	deadline := time.Now().Add(10 * time.Second)
	for admin.Exists(ctx, key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the attempt cut by its deadline left %s held", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends the subscription's goroutine and connection, with waiters or
// not; Watch and Grants after Close never fire.
func TestCloseEndsTheSubscription(t *testing.T) {
	leakCheck(t)
	client := newClient(t, shared.Addr())
	s, err := rueidisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	_, stop := s.Watch("close:{" + uniq(t) + "}")
	defer stop()
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c, stop2 := s.Watch("close:{" + uniq(t) + "}")
	defer stop2()
	g, stop3 := s.Grants("close:{"+uniq(t)+"}", "t")
	defer stop3()
	select {
	case <-c:
		t.Fatal("a Watch after Close fired")
	case <-g:
		t.Fatal("a Grants after Close received")
	case <-time.After(50 * time.Millisecond):
	}
}

// Both clients draw fences from one counter: a counter set far ahead of the
// clock by one client's draws (as a raised Redlock floor would) is
// continued by the other's.
func TestInteropSharedFenceCounter(t *testing.T) {
	leakCheck(t)
	rs := newStore(t, newClient(t, shared.Addr()))
	gs := core.NewRedisStore(shared.Client(t))
	t.Cleanup(func() { _ = gs.(interface{ Close() error }).Close() })
	admin := shared.Client(t)
	ctx := context.Background()
	key := "interop:{" + uniq(t) + "}"
	ahead := time.Now().Add(24 * time.Hour).UnixMicro() // far ahead of the server's clock
	for i, s := range []core.Store{gs, rs, gs, rs} {
		if err := admin.Set(ctx, redisscript.FenceKey(key), ahead, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		ok, fence, err := s.TryAcquire(ctx, key, "t", time.Minute, true)
		if err != nil || !ok || fence != ahead+1 {
			t.Fatalf("draw %d: fenced TryAcquire = %v, %d, %v; want the shared counter + 1 = %d", i, ok, fence, err, ahead+1)
		}
		ok, fence, err = s.Extend(ctx, key, "t", time.Minute, true)
		if err != nil || !ok || fence != ahead+2 {
			t.Fatalf("draw %d: fenced Extend = %v, %d, %v; want %d", i, ok, fence, err, ahead+2)
		}
		if ok, err := s.Release(ctx, key, "t"); err != nil || !ok {
			t.Fatalf("draw %d: Release = %v, %v", i, ok, err)
		}
	}
}

// numSub returns the number of subscribers of channel.
func numSub(t *testing.T, ctx context.Context, admin *redis.Client, channel string) int64 {
	t.Helper()
	n, err := admin.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// waitFor polls cond every 10ms for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the subscription's connection is lost, the Store takes another and
// subscribes again: releases wake the watcher again afterwards.
func TestWatchResubscribesAfterAConnectionLoss(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, newClient(t, proxy.Addr()))
	admin := shared.Client(t)
	ctx := context.Background()
	key := "resub:{" + uniq(t) + "}"
	ch := redisscript.Channel(key)
	c, stop := s.Watch(key)
	defer stop()
	waitFor(t, "the first subscription", func() bool { return numSub(t, ctx, admin, ch) == 1 })
	proxy.Cut()
	waitFor(t, "the subscription's end with its connection", func() bool { return numSub(t, ctx, admin, ch) == 0 })
	proxy.Restore()
	waitFor(t, "a new subscription", func() bool { return numSub(t, ctx, admin, ch) == 1 })
	if err := admin.Publish(ctx, ch, "").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice after the subscription was renewed")
	}
}

// A channel stays subscribed for the linger after its last waiter left,
// and no longer.
func TestWatchLinger(t *testing.T) {
	leakCheck(t)
	admin := shared.Client(t)
	ctx := context.Background()
	for _, linger := range []time.Duration{0, time.Hour} {
		s := newStore(t, newClient(t, shared.Addr()), rueidisstore.WithNotifyLinger(linger))
		key := "linger:{" + uniq(t) + "}"
		ch := redisscript.Channel(key)
		_, stop := s.Watch(key)
		waitFor(t, "the subscription", func() bool { return numSub(t, ctx, admin, ch) == 1 })
		stop()
		if linger == 0 {
			waitFor(t, "the end of the subscription without a linger", func() bool { return numSub(t, ctx, admin, ch) == 0 })
			continue
		}
		time.Sleep(200 * time.Millisecond)
		if n := numSub(t, ctx, admin, ch); n != 1 {
			t.Fatalf("a channel with a linger of an hour had %d subscribers 200ms after its last waiter left, want 1", n)
		}
	}
}
