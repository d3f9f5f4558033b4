package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
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

// TestFenceOfNestedAndHandedOffLeases: a nested lease shares its outer
// lease's fence; a hand-off draws a higher one in its one round trip (the
// round trips of the hand-off are counted on its own context, not those
// of the watchdogs renewing meanwhile); the new holder's watchdog keeps the
// lock past its TTL. A TTL of 3 s renewed every 500 ms gives each renewal
// about 2 s to succeed.
func TestFenceOfNestedAndHandedOffLeases(t *testing.T) {
	leakCheck(t)
	const ttl = 3 * time.Second
	e := newEnv(t, nil, core.WithFencing(), core.WithWatchdog(), core.WithTTL(ttl), core.WithWatchdogInterval(500*time.Millisecond))
	var handoffs ctxRoundTrips
	e.client.AddHook(&handoffs)
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
	mid, err := first.Handoff(ctx, request(first, ttl)) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mid.Release(ctx) })
	second, err := mid.Handoff(handoffs.mark(ctx), request(mid, ttl))
	if err != nil {
		t.Fatal(err)
	}
	handedOff := time.Now()
	t.Cleanup(func() { _ = second.Release(ctx) })
	if mid.Fence() <= first.Fence() || second.Fence() <= mid.Fence() {
		t.Fatalf("handed-off leases have fences %d, %d, %d: not strictly increasing", first.Fence(), mid.Fence(), second.Fence())
	}
	if n := handoffs.n.Load(); n != 1 {
		t.Fatalf("a fenced handoff made %d round trips, want 1 (extend and INCR in one script)", n)
	}
	// The new holder has a watchdog of its own: it keeps the lock past its TTL.
	for time.Since(handedOff) < 3*ttl/2 {
		if !waitRenewed(t, second) {
			t.Fatal("the handed-off lease was lost")
		}
	}
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
	// The clean-up deletes it at once, or, when its first call runs out of
	// time on a loaded machine, in the background: well within the TTL.
	for deadline := time.Now().Add(15 * time.Second); e.client.Exists(ctx, key).Val() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the failed script left the lock set (PTTL %v) with no lease to release it", e.client.PTTL(ctx, key).Val())
		}
	}
}

// acquireSoon takes name with l, retrying while the store fails (a client
// reconnecting after a restart), for up to 30 s.
func acquireSoon(t *testing.T, l *core.Locker, name string) *core.Lease {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lease, err := l.Acquire(context.Background(), name)
		switch {
		case err == nil:
			return lease
		case !errors.Is(err, core.ErrStorage) || time.Now().After(deadline):
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFencesIncreaseAcrossFlushallAndRestart: a FLUSHALL or a restart
// without persistence loses the fence counter, but not the server's clock:
// the fences drawn afterwards stay above every earlier one, so that a fenced
// store accepts the next holders, and no fence is handed out twice.
func TestFencesIncreaseAcrossFlushallAndRestart(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	e := newEnv(t, srv, core.WithFencing(), core.WithIOTimeout(2*time.Second))
	admin := srv.Client(t)
	ctx := context.Background()
	name := uniq(t)
	var (
		highest            int64 // what a fenced store has accepted
		rejected, repeated int
		seen               = map[int64]bool{}
		drawn              int
		phases             []string
	)
	draw := func(phase string, n int) {
		first := int64(0)
		for i := 0; i < n; i++ {
			lease := acquireSoon(t, e.locker, name)
			f := lease.Fence()
			if i == 0 {
				first = f
			}
			if f <= highest {
				rejected++ // a fenced store would refuse this valid holder
			}
			if seen[f] {
				repeated++
			}
			seen[f], highest, drawn = true, max(highest, f), drawn+1
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		phases = append(phases, fmt.Sprintf("%s: from %d", phase, first))
	}
	draw("before", 20)
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	draw("after FLUSHALL", 20)
	srv.Restart(t)
	draw("after a restart without persistence", 20)
	t.Logf("fences %s; of %d fences, %d would be rejected by a fenced store, %d were drawn twice", strings.Join(phases, "; "), drawn, rejected, repeated)
	if rejected > 0 || repeated > 0 {
		t.Fatalf("across FLUSHALL and a restart, %d of %d fences were not above every earlier one (%d drawn twice)", rejected, drawn, repeated)
	}
}

// TestFenceCounterExpiresAfterTheLock: a name's fence counter does not
// outlive the name's use by more than a few seconds: every fenced acquire,
// hand-off and Redlock write-back gives it the lock's TTL and 5 s more.
// The two PTTLs are read at one instant (MULTI); the locks live 10 s and
// more, so that they are read before they expire on a loaded machine.
func TestFenceCounterExpiresAfterTheLock(t *testing.T) {
	leakCheck(t)
	const ttl = 10 * time.Second
	e := newEnv(t, nil, core.WithFencing(), core.WithTTL(ttl))
	ctx := context.Background()
	check := func(what string, lease *core.Lease) {
		t.Helper()
		lock, counter := pttls(t, e.client, lease.Key())
		t.Logf("%s: the lock's PTTL %v, the counter's %v", what, lock, counter)
		if counter < lock+4*time.Second || counter > lock+5*time.Second+100*time.Millisecond {
			t.Fatalf("%s: the fence counter's PTTL is %v with the lock's at %v: want the lock's and 5 s more", what, counter, lock)
		}
	}
	first := hold(t, e, uniq(t))
	check("acquire", first)
	next, err := first.Handoff(ctx, request(first, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Release(ctx) })
	check("hand-over", next)

	nodes := redistest.StartNodes(t, 3)
	rl := redlockEnv(t, nodes, core.WithFencing(), core.WithTTL(ttl), core.WithIOTimeout(5*time.Second))
	lease, err := rl.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	for i, n := range nodes {
		c := n.Client(t)
		// The acquire returned once a quorum had the key: a node behind it
		// gets it in the background.
		for deadline := time.Now().Add(15 * time.Second); c.Get(ctx, lease.Key()).Val() != lease.Token(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("redlock node %d does not hold the lock", i)
			}
		}
		lock, counter := pttls(t, c, lease.Key())
		if counter < lock+4*time.Second || counter > lock+5*time.Second+100*time.Millisecond {
			t.Fatalf("redlock node %d: the fence counter's PTTL is %v with the lock's at %v after the write-back: want the lock's and 5 s more", i, counter, lock)
		}
	}
}

// pttls returns the PTTLs of key and of its fence counter, read at one
// instant (in one MULTI), so that time passing between two reads does not
// count.
func pttls(t *testing.T, c *redis.Client, key string) (lock, counter time.Duration) {
	t.Helper()
	ctx := context.Background()
	var l, f *redis.DurationCmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		l, f = p.PTTL(ctx, key), p.PTTL(ctx, key+":fence")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return l.Val(), f.Val()
}
