package scale

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/redistest"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// The command mix of a lock cycle (ANALYSIS.md): which Redis commands each
// store call and each contender's cycle sends, counted by INFO
// commandstats, where a script counts once as EVALSHA and once more per
// command it calls. Counts per call are exact (one client, one goroutine,
// scripts cached by a warm-up); the contended run's are per attempt and per
// cycle of a short run and depend on timing only through how many attempts
// find the name busy. Run with -v to see the tables:
//
//	cd benchmarks && go test -count=1 -run TestCommandMix -v ./scale

// mix is the commands a piece of work sent, per unit of it.
type mix struct {
	calls map[string]int64
	usec  map[string]int64
	per   int64
}

func (m mix) String() string {
	var names []string
	var total int64
	for k, v := range m.calls {
		names = append(names, k)
		total += v
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f:", float64(total)/float64(m.per))
	for _, k := range names {
		fmt.Fprintf(&b, " %s %.2f", k, float64(m.calls[k])/float64(m.per))
	}
	return b.String()
}

// usecPerCall is commandstats' µs per call of each command (a script's
// includes its inner commands').
func (m mix) usecPerCall() string {
	var names []string
	for k := range m.calls {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(m.usec[k])/float64(m.calls[k])))
	}
	return strings.Join(parts, ", ")
}

// measure runs work and returns the lock commands it sent, per n units.
func measure(t *testing.T, c *redis.Client, n int64, work func()) mix {
	t.Helper()
	ctx := context.Background()
	before, err := readStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	work()
	after, err := readStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	d := after.sub(before)
	return mix{calls: d.Calls, usec: d.Usec, per: n}
}

// attemptCounter is an Observer summing the store attempts of Acquires.
type attemptCounter struct{ attempts, acquires atomic.Int64 }

func (a *attemptCounter) ObserveAcquire(_ context.Context, e core.AcquireEvent) core.LeaseObserver {
	a.attempts.Add(int64(e.Attempts))
	a.acquires.Add(1)
	return nil
}

func TestCommandMix(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	const n = 100
	key := func(tag string, i int) string { return fmt.Sprintf("reqlock:{%s:%d}", tag, i) }

	// 1. Each store call, on a free and on a busy key.
	st := redisstore.New(redis.NewClient(srv.Options()))
	t.Cleanup(func() { _ = st.Close() })
	// Warm up: every script the calls use is cached (EVAL once).
	_, _, _ = st.TryAcquireFree(ctx, "reqlock:{w}", "W1", time.Second, false)
	_, _, _ = st.TryAcquireFree(ctx, "reqlock:{w}", "W1", time.Second, true)
	_, _, _ = st.TryAcquireWaiting(ctx, "reqlock:{w}", "W1", time.Second, time.Second, false)
	_, _ = st.Release(ctx, "reqlock:{w}", "W1")
	_ = handRelease(ctx, c, "reqlock:{w}", "W1")
	hold := func(tag string) { // a foreign holder on every key of tag
		for i := range n {
			if err := c.Set(ctx, key(tag, i), "OTHER", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := []struct {
		name string
		busy bool
		call func(k string) error
	}{
		{"floor: SET NX PX", false, func(k string) error { _, err := setNX(ctx, c, k, "T", time.Minute); return err }},
		{"floor: SET NX PX", true, func(k string) error { _, err := setNX(ctx, c, k, "T", time.Minute); return err }},
		{"floor: compare-and-delete", false, func(k string) error { return handRelease(ctx, c, k, "T") }},
		{"TryAcquireFree (SET NX PX)", false, func(k string) error { _, _, err := st.TryAcquireFree(ctx, k, "T", time.Minute, false); return err }},
		{"TryAcquireFree (SET NX PX)", true, func(k string) error { _, _, err := st.TryAcquireFree(ctx, k, "T", time.Minute, false); return err }},
		{"TryAcquire (SET NX PX GET)", false, func(k string) error { _, _, err := st.TryAcquire(ctx, k, "T", time.Minute, false); return err }},
		{"TryAcquire (SET NX PX GET)", true, func(k string) error { _, _, err := st.TryAcquire(ctx, k, "T", time.Minute, false); return err }},
		{"TryAcquireWaiting (acquire_waiting.lua)", false, func(k string) error {
			_, _, err := st.TryAcquireWaiting(ctx, k, "T", time.Minute, time.Second, false)
			return err
		}},
		{"TryAcquireWaiting (acquire_waiting.lua)", true, func(k string) error {
			_, _, err := st.TryAcquireWaiting(ctx, k, "T", time.Minute, time.Second, false)
			return err
		}},
		{"Release (release_unqueued.lua)", false, func(k string) error { _, err := st.Release(ctx, k, "T"); return err }},
		{"TryAcquireFree fenced (acquire_fenced.lua)", false, func(k string) error { _, _, err := st.TryAcquireFree(ctx, k, "T", time.Minute, true); return err }},
	}
	t.Logf("store calls, commands per call (INFO commandstats; µs per call):")
	for i, cl := range calls {
		tag := fmt.Sprintf("c%d", i)
		if cl.busy {
			hold(tag)
		} else if strings.Contains(cl.name, "elease") || strings.Contains(cl.name, "delete") {
			for j := range n { // held by token T, to be released
				if err := c.Set(ctx, key(tag, j), "T", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		m := measure(t, c, n, func() {
			for j := range n {
				if err := cl.call(key(tag, j)); err != nil {
					t.Fatal(err)
				}
			}
		})
		state := "free"
		if cl.busy {
			state = "busy"
		}
		t.Logf("  %-45s %s  %s  [%s]", cl.name, state, m, m.usecPerCall())
	}
	// Client allocations per call (testing.AllocsPerRun, fresh keys): the
	// why the first attempt sends SET NX PX without GET.
	t.Logf("client allocations per store call:")
	var seq atomic.Int64
	for _, cl := range calls {
		if strings.Contains(cl.name, "elease") || strings.Contains(cl.name, "delete") {
			continue
		}
		tag := fmt.Sprintf("a%d", seq.Add(1))
		if cl.busy {
			hold(tag)
		}
		j := 0
		a := testing.AllocsPerRun(n-1, func() {
			if cl.busy {
				_ = cl.call(key(tag, j%n))
			} else {
				_ = cl.call(key(tag, 1000+j))
			}
			j++
		})
		state := "free"
		if cl.busy {
			state = "busy"
		}
		t.Logf("  %-45s %s  %.0f allocs", cl.name, state, a)
	}
	st.Announce()
	for j := range n {
		_ = c.Set(ctx, key("ann", j), "T", time.Minute).Err()
	}
	m := measure(t, c, n, func() {
		for j := range n {
			if _, err := st.Release(ctx, key("ann", j), "T"); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("  %-45s %s  %s  [%s]", "Release after Announce (WithNotify)", "free", m, m.usecPerCall())

	// 2. Whole uncontended cycles, one goroutine, distinct names.
	shape := Shape{TTL: 10 * time.Second, Wait: time.Second, SpinMin: 10 * time.Millisecond, SpinRandom: 10 * time.Millisecond}
	type contender struct {
		name string
		open func(c redis.UniversalClient) (Lock, *attemptCounter, error)
	}
	reqWith := func(extra []core.Option, guard ...hotspot.Option) func(redis.UniversalClient) (Lock, *attemptCounter, error) {
		return func(rc redis.UniversalClient) (Lock, *attemptCounter, error) {
			ac := new(attemptCounter)
			opts := append([]core.Option{core.WithTTL(shape.TTL), core.WithWait(shape.Wait), core.WithSpin(shape.SpinMin, shape.SpinRandom), core.WithObservers(ac)}, extra...)
			var g *hotspot.Guard
			if guard != nil {
				g = hotspot.New(guard...)
				opts = append(opts, core.WithHandlers(g))
			}
			l := core.New(rc, opts...)
			return &reqLock{l: l, guard: g}, ac, l.Err()
		}
	}
	fromVariant := func(name string) func(redis.UniversalClient) (Lock, *attemptCounter, error) {
		return func(rc redis.UniversalClient) (Lock, *attemptCounter, error) {
			v, err := LookupVariant(name)
			if err != nil {
				return nil, nil, err
			}
			l, err := v.open(rc, shape)
			return l, nil, err
		}
	}
	contenders := []contender{
		{Floor, fromVariant(Floor)},
		{"reqlock", reqWith(nil)},
		{"reqlock+hotspot", reqWith(nil, hotspot.WithCapacity(1000))},
		{"reqlock+hotspot+handoff3", reqWith(nil, hotspot.WithCapacity(1000), hotspot.WithHandoff(3))},
		{"reqlock WithNotify", reqWith([]core.Option{core.WithNotify()})},
		{"reqlock WithFencing", reqWith([]core.Option{core.WithFencing()})},
		{"bsm/redislock", fromVariant("bsm/redislock")},
		{"go-redsync/redsync", fromVariant("go-redsync/redsync")},
	}
	closeLock := func(l Lock) {
		if cl, ok := l.(interface{ Close() error }); ok {
			_ = cl.Close()
		}
	}
	t.Logf("uncontended cycles (1 goroutine, %d distinct names), commands per cycle:", n)
	for i, ct := range contenders {
		rc := redis.NewClient(srv.Options())
		l, _, err := ct.open(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm(ctx, []Lock{l}, 2, fmt.Sprintf("w%d:", i)); err != nil {
			t.Fatal(err)
		}
		m := measure(t, c, n, func() {
			for j := range n {
				release, err := l.Acquire(ctx, fmt.Sprintf("u%d:%d", i, j))
				if err != nil {
					t.Fatal(err)
				}
				if err := release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Logf("  %-26s %s  [%s]", ct.name, m, m.usecPerCall())
		// Uncontended, every cycle sends the same commands: the counts
		// are exact multiples of the cycles, and the floor's are SET and
		// the compare-and-delete (EVALSHA, GET, DEL), one each.
		for cmd, v := range m.calls {
			if v%n != 0 {
				t.Errorf("%s: %d %s calls in %d uncontended cycles", ct.name, v, cmd, n)
			}
		}
		if ct.name == Floor && m.String() != "4.00: del 1.00 evalsha 1.00 get 1.00 set 1.00" {
			t.Errorf("floor: %s, want SET, EVALSHA, GET and DEL once per cycle", m)
		}
		closeLock(l)
		_ = rc.Close()
	}

	// 3. Busy attempts: a foreign holder keeps the name for the whole wait
	// budget of 300 ms; commands per store attempt of the Acquire.
	t.Logf("an Acquire that times out on a held name (wait 300 ms, sleep 10-20 ms), commands per attempt:")
	for i, ct := range contenders[:8] {
		rc := redis.NewClient(srv.Options())
		l, ac, err := ct.open(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm(ctx, []Lock{l}, 2, fmt.Sprintf("x%d:", i)); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("busy%d", i)
		if err := c.Set(ctx, handLockKey(name), "OTHER", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		var attempts int64
		m := measure(t, c, 1, func() {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if ac != nil {
				ac.attempts.Store(0)
			}
			if _, err := l.Acquire(wctx, name); err == nil {
				t.Fatal("acquired a held name")
			}
			if ac != nil {
				attempts = ac.attempts.Load()
			}
		})
		if attempts == 0 { // the floor: one SET per attempt
			attempts = m.calls["set"]
		}
		m.per = attempts
		t.Logf("  %-26s %d attempts, per attempt %s", ct.name, attempts, m)
		closeLock(l)
		_ = rc.Close()
	}

	// 4. A short contended run: 2 Lockers × 4 goroutines over 4 names,
	// critical section 1 ms, for 2 s; commands per cycle and store attempts
	// per cycle (reqlock's from an Observer, the floor's from its SETs).
	t.Logf("contended: 2 Lockers × 4 goroutines over 4 names, hold 1 ms, 2 s; commands per cycle:")
	for i, ct := range contenders[:8] {
		var locks []Lock
		var counters []*attemptCounter
		var clients []redis.UniversalClient
		for range 2 {
			rc := redis.NewClient(srv.Options())
			l, ac, err := ct.open(rc)
			if err != nil {
				t.Fatal(err)
			}
			locks, counters, clients = append(locks, l), append(counters, ac), append(clients, rc)
		}
		if err := warm(ctx, locks, 4, fmt.Sprintf("y%d:", i)); err != nil {
			t.Fatal(err)
		}
		for _, ac := range counters {
			if ac != nil {
				ac.attempts.Store(0)
				ac.acquires.Store(0)
			}
		}
		var cyc Cycles
		m := measure(t, c, 1, func() {
			cyc = runLoad(ctx, locks, Load{Lockers: 2, Goroutines: 4, Names: 4, Hold: time.Millisecond, For: 2 * time.Second}, fmt.Sprintf("k%d:", i), 0)
		})
		if cyc.Overlaps != 0 || cyc.Total == 0 {
			t.Fatalf("%s: %+v", ct.name, cyc)
		}
		var attempts int64
		for _, ac := range counters {
			if ac != nil {
				attempts += ac.attempts.Load()
			}
		}
		if counters[0] == nil {
			attempts = m.calls["set"]
		}
		m.per = cyc.Total
		t.Logf("  %-26s %d cycles (%d failed), %.2f store attempts per cycle, %s", ct.name, cyc.Total, cyc.Failed, float64(attempts)/float64(cyc.Total), m)
		for j, l := range locks {
			closeLock(l)
			_ = clients[j].Close()
		}
	}
}
