package core_test

// The fault suite: each test runs an overlap-detecting critical section
// against real servers while a fault happens, and logs its figures
// (go test ./core -run Fault -v shows them).

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// section is a critical section of length d under lease. A request-scoped
// section stops early when the lease's Done closes, as the adapters cancel
// the request then; a careless one runs to the end regardless. It reports
// whether Done cut it short.
func section(o *redistest.Overlap, lease *core.Lease, d time.Duration, careless bool) (cut bool) {
	exit := o.Enter()
	defer exit()
	done := lease.Done()
	if careless {
		done = nil
	}
	select {
	case <-time.After(d):
		return false
	case <-done:
		return true
	}
}

// contend runs rounds of acquire-then-body on name in goroutines per locker
// and waits for them all; body gets the lease and must release it. A failed
// acquire fails the test and ends its goroutine.
func contend(t *testing.T, lockers []*core.Locker, goroutines, rounds int, name string, body func(*core.Lease)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, l := range lockers {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					lease, err := l.Acquire(context.Background(), name)
					if err != nil {
						t.Errorf("acquire %s: %v", name, err)
						return
					}
					body(lease)
				}
			}()
		}
	}
	wg.Wait()
}

// lockers returns n Lockers with opts, each on a client of its own of the
// shared server.
func lockers(t *testing.T, n int, opts ...core.Option) []*core.Locker {
	ls := make([]*core.Locker, n)
	for i := range ls {
		ls[i] = newEnv(t, nil, opts...).locker
	}
	return ls
}

// TestFaultHandlersThreeTimesTheTTL runs handlers that take 3× the TTL, and
// do not even watch Done: with the watchdog no two of them overlap and none
// loses its lease; without it (the control, run at the same time with a
// TTL of 300 ms and sections as long) they overlap.
func TestFaultHandlersThreeTimesTheTTL(t *testing.T) {
	leakCheck(t)
	// The watchdog's TTL, renewed every 150 ms: each renewal has over a
	// second to succeed before the watchdog gives up, which a loaded
	// machine's stalls and slow replies stay within.
	const ttl, every = 1500 * time.Millisecond, 150 * time.Millisecond
	run := func(t *testing.T, watchdog bool) (o *redistest.Overlap, ok, lost int64) {
		opts := []core.Option{core.WithWait(30 * time.Second), core.WithSpin(5*time.Millisecond, 5*time.Millisecond)}
		if watchdog {
			opts = append(opts, core.WithTTL(ttl), core.WithWatchdog(), core.WithWatchdogInterval(every))
		} else {
			// The control's lock expires 4.2 s before its first holder's
			// section ends: the second one is in by then on any schedule.
			opts = append(opts, core.WithTTL(300*time.Millisecond))
		}
		name := uniq(t)
		o = &redistest.Overlap{}
		contend(t, lockers(t, 2, opts...), 1, 1, name, func(lease *core.Lease) {
			section(o, lease, 3*ttl, true)
			select {
			case <-lease.Done():
				atomic.AddInt64(&lost, 1)
			default:
			}
			if err := lease.Release(context.Background()); err == nil {
				atomic.AddInt64(&ok, 1)
			} else if !errors.Is(err, core.ErrNotHeld) || watchdog {
				t.Errorf("release: %v", err)
			}
		})
		return o, ok, lost
	}
	var control *redistest.Overlap
	controlled := make(chan struct{})
	go func() {
		defer close(controlled)
		control, _, _ = run(t, false)
	}()
	o, ok, lost := run(t, true)
	<-controlled
	t.Logf("watchdog on: %d sections of 3×TTL by 2 holders in 2 lockers: %d overlaps, %d released cleanly, %d leases lost", o.Entries(), o.Overlaps(), ok, lost)
	t.Logf("watchdog off (control): %d sections: %d overlaps", control.Entries(), control.Overlaps())
	if o.Overlaps() != 0 || lost != 0 || ok != 2 {
		t.Fatalf("with the watchdog: %d overlaps, %d leases lost, %d of 2 released cleanly", o.Overlaps(), lost, ok)
	}
	if control.Overlaps() == 0 {
		t.Fatal("without the watchdog, sections three times the TTL did not overlap: the test cannot see the fault")
	}
}

// TestFaultRedisRestartMidRun kills Redis for longer than the TTL while
// holders and waiters run, then restarts it (empty: no persistence). Every
// failure must be a fast ErrStorage, held leases must end (Done) before
// Redis comes back, and the same Lockers must work again afterwards,
// notifications included.
//
// The TTL leaves a section that watches Done a second (the watchdog's
// interval) between Done and the lock's expiry to stop in, and the outage
// (twice the TTL) four more seconds before Redis comes back empty: a loaded
// machine's stalls cannot make sections overlap by chance.
func TestFaultRedisRestartMidRun(t *testing.T) {
	leakCheck(t)
	const ttl = 3 * time.Second
	srv := redistest.Start(t)
	name := uniq(t)
	opts := []core.Option{
		core.WithTTL(ttl), core.WithWatchdog(), core.WithNotify(), core.WithFencing(),
		core.WithWait(20 * time.Second), core.WithSpin(5*time.Millisecond, 5*time.Millisecond),
		core.WithIOTimeout(time.Second),
	}
	envs := []*env{newEnv(t, srv, opts...), newEnv(t, srv, opts...)}
	for _, e := range envs {
		t.Cleanup(func() { _ = e.locker.Close() })
	}

	var (
		o                       redistest.Overlap
		phase                   atomic.Int32 // 0 before the outage, 1 during, 2 after
		mu                      sync.Mutex
		okBy                    [3]int
		storageErrs, cutByDone  int
		slowestFailure          time.Duration
		otherErrs               []error
		fenceBefore, fenceAfter int64
		stop                    = make(chan struct{})
		wg                      sync.WaitGroup
	)
	for _, e := range envs {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for {
					select {
					case <-stop:
						return
					default:
					}
					p := phase.Load()
					start := time.Now()
					lease, err := e.locker.Acquire(ctx, name)
					took := time.Since(start)
					mu.Lock()
					switch {
					case err == nil:
						okBy[p]++
						if p == 0 {
							fenceBefore = max(fenceBefore, lease.Fence())
						} else if p == 2 {
							fenceAfter = max(fenceAfter, lease.Fence())
						}
					case errors.Is(err, core.ErrStorage) && !errors.Is(err, core.ErrTimeout):
						storageErrs++
						slowestFailure = max(slowestFailure, took)
					default:
						otherErrs = append(otherErrs, err)
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if section(&o, lease, 40*time.Millisecond, false) {
						mu.Lock()
						cutByDone++
						mu.Unlock()
					}
					_ = lease.Release(ctx) // ErrStorage or ErrNotHeld across the outage
				}
			}()
		}
	}
	// Acquires before the outage.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30s", what)
			}
		}
	}
	waitFor("acquire before the outage", func() bool { return okBy[0] >= 4 })
	// A lease held across the crash, by a request that watches Done.
	held, err := envs[0].locker.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	srv.Stop()
	down := time.Now()
	var heldDone time.Duration
	select {
	case <-held.Done():
		heldDone = time.Since(down)
	case <-time.After(2 * ttl):
	}
	time.Sleep(2*ttl - time.Since(down))
	// Done reads the clock (its timer may not have run yet on a loaded
	// machine): it must be closed before Redis comes back.
	select {
	case <-held.Done():
		if heldDone == 0 {
			heldDone = time.Since(down)
		}
	default:
		t.Fatalf("a lease held when Redis died was still not done %v later, when Redis comes back", time.Since(down))
	}
	srv.Restart(t)
	downFor := time.Since(down)
	_ = held.Release(context.Background())
	phase.Store(2)
	waitFor("acquire after the outage", func() bool { return okBy[2] >= 4 })
	// Both clients dial again: after a run of failed dials a go-redis pool
	// answers with the last dial error until its background dial, once a
	// second, succeeds.
	for _, e := range envs {
		for deadline := time.Now().Add(30 * time.Second); e.client.Ping(context.Background()).Err() != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a client still fails 30s after Redis came back")
			}
		}
	}
	close(stop)
	wg.Wait()

	t.Logf("Redis down %v (TTL %v): acquired %d before, %d during, %d after; %d fast storage errors (slowest %v); %d sections cut by Done; %d overlaps; other errors %v",
		downFor.Round(time.Millisecond), ttl, okBy[0], okBy[1], okBy[2], storageErrs, slowestFailure.Round(time.Millisecond), cutByDone, o.Overlaps(), otherErrs)
	t.Logf("a lease held when Redis died was done %v later, before Redis came back", heldDone.Round(time.Millisecond))
	t.Logf("fences: up to %d before the restart, up to %d after it (the counter is lost with an empty Redis, the server's clock is not)", fenceBefore, fenceAfter)
	if len(otherErrs) > 0 {
		t.Fatalf("errors other than ErrStorage: %v", otherErrs)
	}
	if storageErrs == 0 || okBy[0] == 0 || okBy[2] == 0 {
		t.Fatalf("want acquires before and after the outage and storage errors during it; got %d, %d, %d", okBy[0], okBy[2], storageErrs)
	}
	if slowestFailure > 10*time.Second {
		t.Fatalf("a failed acquire took %v: it should fail fast, not wait out its budget", slowestFailure)
	}
	if o.Overlaps() != 0 {
		t.Fatalf("%d overlaps across the outage", o.Overlaps())
	}
	if fenceAfter <= fenceBefore {
		t.Fatalf("the fences after the restart (up to %d) went back below those before it (up to %d)", fenceAfter, fenceBefore)
	}
	// The shared subscription came back with Redis: a waiter with a sleep of
	// a minute is woken by a release.
	checkWake(t, envs[0].locker, envs[1].locker, srv)
}

// checkWake makes waiter wait for a name held by holder with a sleep far
// longer than its context, and releases the name: only a notification can
// let the waiter in before its context ends. nodes are the servers of the
// deployment, where the waiter's subscription is looked for.
func checkWake(t *testing.T, holder, waiter *core.Locker, nodes ...*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	name := uniq(t)
	held, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(core.ContextWithTTL(ctx, 10*time.Second), 3*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		lease, err := waiter.Acquire(wctx, name)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	waitSubscribed(t, held.Key()+":released", nodes...)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter was not woken by the release: %v", err)
	}
}

// waitSubscribed waits until channel has a subscriber on one of nodes.
func waitSubscribed(t *testing.T, channel string, nodes ...*redistest.Server) {
	t.Helper()
	var admins []*redis.Client
	for _, n := range nodes {
		if n.Running() {
			admins = append(admins, n.Client(t))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, a := range admins {
			if a.PubSubNumSub(context.Background(), channel).Val()[channel] > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber on %s", channel)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fencedStore is the downstream store of the fencing pattern, kept in Redis
// here: it remembers the highest fencing token it accepted for a resource
// and rejects writes with a lower one. Every accepted write is appended to a
// log, in the store's own order, for the analysis.
var fencedStore = redis.NewScript(`
local seen = tonumber(redis.call("HGET", KEYS[1], "fence") or "0")
if tonumber(ARGV[1]) < seen then
  return 0
end
redis.call("HSET", KEYS[1], "fence", ARGV[1])
redis.call("RPUSH", KEYS[2], ARGV[2])
return 1
`)

// TestFaultFrozenHolderFencedStore freezes holders past their TTL in the
// middle of their critical section (as a GC pause or a stopped VM would: no
// watchdog could run either). Every holder writes to a fenced store when it
// begins and when it ends; a stale write is an end accepted after another
// holder began. With fencing none is accepted; without it (the control, whose
// fences are all 0) they are.
//
// A freeze lasts until another holder has begun (its lock expired and was
// taken), not a fixed time that a loaded machine could let pass before any
// other holder got in: it happens only while other holders are sure to come,
// at the even cycles of the first eight of twelve (a holder has at most two
// more rounds after its own).
func TestFaultFrozenHolderFencedStore(t *testing.T) {
	leakCheck(t)
	const ttl = 100 * time.Millisecond
	const goroutines, rounds = 4, 3 // 2 Lockers × 2 goroutines
	run := func(t *testing.T, fencing bool) (attempts, frozen, rejected, staleAccepted int) {
		name := uniq(t)
		opts := []core.Option{core.WithTTL(ttl), core.WithWait(30 * time.Second), core.WithSpin(2*time.Millisecond, 3*time.Millisecond)}
		if fencing {
			opts = append(opts, core.WithFencing())
		}
		store, log := "store:"+name, "log:"+name
		client := shared.Client(t) // the store's, apart from the lock's
		var mu sync.Mutex
		var cycles, begins atomic.Int64
		contend(t, lockers(t, 2, opts...), goroutines/2, rounds, name, func(lease *core.Lease) {
			ctx := context.Background()
			write := func(what string) bool {
				n, err := fencedStore.Run(ctx, client, []string{store, log}, lease.Fence(), what+":"+lease.Token()).Int()
				if err != nil {
					t.Errorf("store: %v", err)
				}
				return n == 1
			}
			if !write("begin") {
				mu.Lock()
				rejected++
				mu.Unlock()
			}
			began := begins.Add(1)
			if c := cycles.Add(1); c%2 == 0 && c <= goroutines*rounds-rounds {
				// Frozen: no renewal, no Done, nothing runs, until another
				// holder has begun.
				for deadline := time.Now().Add(30 * time.Second); begins.Load() == began; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Errorf("no other holder took the lock in 30s, %v after the TTL of a frozen holder", ttl)
						break
					}
				}
			}
			stale := time.Now().After(lease.ValidUntil())
			accepted := write("end")
			mu.Lock()
			attempts++
			if stale {
				frozen++
			}
			if !accepted {
				rejected++
			}
			mu.Unlock()
			_ = lease.Release(ctx) // ErrNotHeld after a freeze
		})
		entries, err := client.LRange(context.Background(), log, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		// An end accepted after another holder's begin that came after its own.
		begun := map[string]int{}
		for i, entry := range entries {
			what, id, _ := strings.Cut(entry, ":")
			if what == "begin" {
				begun[id] = i
				continue
			}
			for other, at := range begun {
				if other != id && at > begun[id] && at < i {
					staleAccepted++
					break
				}
			}
		}
		return attempts, frozen, rejected, staleAccepted
	}
	attempts, frozen, rejected, stale := run(t, true)
	t.Logf("fencing on: %d end writes, %d of them by holders frozen past their TTL, %d rejected by the store, %d stale writes accepted", attempts, frozen, rejected, stale)
	if stale != 0 {
		t.Fatalf("the fenced store accepted %d stale writes", stale)
	}
	if frozen == 0 || rejected == 0 {
		t.Fatalf("no holder was frozen past its TTL and overtaken (%d frozen, %d rejected): the test saw no fault", frozen, rejected)
	}
	attempts, frozen, rejected, stale = run(t, false)
	t.Logf("fencing off (control): %d end writes, %d frozen, %d rejected, %d stale writes accepted", attempts, frozen, rejected, stale)
	if stale == 0 {
		t.Fatal("without fencing no stale write was accepted: the test cannot see the fault")
	}
}
