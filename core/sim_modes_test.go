package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// TestSimModes is the deterministic simulation of TestSimulation (same
// engine, store, network, faults and checker) for the lock family: each
// seed gives its names modes (some taken Shared or exclusively, some with
// Permits(n), one n per name, the others exclusively), and the workers of
// the processes without WithFair take them so, and now and then take 2 or
// 3 of them at once with AcquireAll, listed in an order of the call's own
// (exclusive, or shared over names taken Shared); on some seeds the store
// takes several keys in one step only within one of its slots (as a Redis
// Cluster: ErrNotAtomic, and the engine takes them one by one). Workers of
// processes WithFair take names exclusively (and AcquireAll), and now and
// then ask for a shared hold, which must be refused at once with
// ErrInvalidOption. A few calls of a name with permits disagree on n (or
// ask Shared), and may get ErrModeMismatch.
//
// Beyond TestSimulation's invariant, checked after every event, when a
// lease is obtained, during its critical section and at its release:
//
//   - each lease that reports itself valid, each part of a lease of
//     AcquireAll on its own, holds its name in the store: an exclusive
//     lease as the key's holder, a share (shared or permit) as a live
//     share of its token in the key's record of shares, until ValidUntil
//     once nothing naming its token is in flight;
//   - among the leases of a name that report themselves valid, whatever
//     the store says: an exclusive lease has none beside it; shares are
//     all shared, or all permits of one n; at most n permits, their Slot()s
//     distinct and below n;
//   - fences of a name increase across modes: a share's fence is above
//     that of every exclusive lease obtained valid before it, an exclusive
//     lease's above every lease's, and each is the one the store last drew
//     for its token on that key;
//   - all or none: a TryAcquireAll answered false leaves none of its keys
//     to its token; and when an Acquire or AcquireAll of a process without
//     a fair queue returns (failed or not), the store holds none of its
//     names for the tokens of its attempts that did not make the lease,
//     among those whose every command was answered (a command whose reply
//     was lost or late may or may not have run: its clean-up is the
//     store's Undo or UndoShare, in the background) and that it did not
//     hand off to a local waiter;
//   - writers do not starve: once the faults have stopped and the workers
//     are done, four readers take one shared name over and over, each
//     holding it for 10 to 50 ms and taking it again within a
//     millisecond, so that at almost every instant some share is live;
//     a writer's Acquire of the name (wait 5 s) must succeed: its waiting
//     record stops new shares, those live drain, and it gets the name.
//     The check runs without faults only: under faults a writer's attempts
//     may be lost or late beyond its record's patience, new shares then
//     come in lawfully, and no bound holds;
//   - all or none, once more without faults: while another process holds
//     the second name, an AcquireAll of the first two by a process with a
//     local queue (which takes them one by one) must fail, and leave the
//     first to none of its tokens;
//   - progress and no goroutine leak, as in TestSimulation.
//
// The CI seeds catch each of these defects of the engine, put in on
// purpose (the seeds of 1..40 that failed, each run on its own):
//
//	E1 an exclusive retry never records a waiting writer (TryAcquire)      40 (starvation)
//	E2 a permit's lease built without its slot (Slot() 0)                   11 (permits)
//	E3 AcquireAll one by one keeps the names it took when a later fails     40 (30 all or none)
//	E4 a share's validity dated from the reply, not the sending             18 (validity)
//	E5 a share released by Release, not ReleaseShare                        40 (progress)
//	E6 TryAcquireHeld's "shared" ignored: the writer never records itself  40 (starvation)
//
// E7, the Acquire's flag ignored (TryAcquireHeld again after shares were
// seen, so that a native success leaves the writer's own record), is not
// caught here: the record expires within its patience, which these checks
// allow; TestWriterIsNotStarved/HeldAcquirer catches it.
//
// It found a defect of AcquireAll, since fixed: taking names one by one,
// it returned a lease whose first names had expired while it waited for a
// later one (TestSimAcquireAllEarlierNamesOutliveTheWait).
//
// Replay: go test ./core -run 'TestSimModes$/seed=5$' -v (REQLOCK_SIM_SEED
// and REQLOCK_SIM_SEEDS as for TestSimulation, REQLOCK_SIM_TRACE=1 for the
// full trace).
func TestSimModes(t *testing.T) {
	seeds := simSeeds(t, simModesCISeeds, nil)
	var total simTotals
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			beat := new(atomic.Int64)
			defer watchClock(t.Name(), beat)()
			synctest.Test(t, func(t *testing.T) {
				res, report := runSimulation(t, seed, beat, simConfig{modes: true})
				total.add(res)
				if report != "" {
					t.Error(report)
				}
			})
		})
	}
	t.Cleanup(func() {
		t.Logf("simulation of the lock family: %d seeds, %d lock operations (%s), %d acquires, %d leases (%s), %d tail acquires; faults: %s",
			total.seeds, total.ops, total.opsDetail(), total.acquires, total.leases, total.modesDetail(), total.tail, total.faults())
	})
}

// simModesCISeeds is how many seeds of TestSimModes a plain `go test` runs.
const simModesCISeeds = 40

// TestSimModesCatchesBrokenStores shows that TestSimModes catches a store
// that breaks the contract of the lock family: for each defect, seeds from
// 1 on run on a store broken so, until one fails by the check that the
// defect breaks; one must within simMutantSeeds. Each subtest logs the
// seed and the violation that caught it. (Seeds 1..simMutantSeeds pass
// TestSimModes on the store unbroken: the failure is the defect's.)
func TestSimModesCatchesBrokenStores(t *testing.T) {
	// Each defect, and the checks that must report it (the start of the
	// violation, after its instant).
	mutants := []struct {
		m    simMutant
		want []string
	}{
		{simMutPermitsOverflow, []string{"permits:"}},
		{simMutSlotsCollide, []string{"permits:"}},
		{simMutReleaseOther, []string{"the store holds no share for its token"}},
		{simMutPartialAll, []string{"answered false, but the store holds", "all or none:"}},
		{simMutShareIgnoresExclusive, []string{"mutual exclusion:"}},
		{simMutExclusiveIgnoresShares, []string{"mutual exclusion:"}},
		{simMutModesMix, []string{"modes:"}},
		{simMutShareIgnoresWaiter, []string{"starvation:"}},
		{simMutShareFenceStale, []string{"fences went back:"}},
		{simMutHeldIgnoresShares, []string{"mutual exclusion:"}},
		{simMutHeldHidesShares, []string{"starvation:"}},
	}
	for _, mt := range mutants {
		t.Run(strings.ReplaceAll(string(mt.m), " ", "_"), func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= simMutantSeeds; seed++ {
				beat := new(atomic.Int64)
				stop := watchClock(fmt.Sprintf("%s/seed=%d", t.Name(), seed), beat)
				var report string
				synctest.Test(t, func(t *testing.T) {
					_, report = runSimulation(t, seed, beat, simConfig{modes: true, mutant: mt.m})
				})
				stop()
				first, _, _ := strings.Cut(report, "\n")
				for _, w := range mt.want {
					if strings.Contains(first, w) {
						t.Logf("caught: %s", first)
						return
					}
				}
				if report != "" {
					t.Logf("not by the check expected: %s", first)
				}
			}
			t.Errorf("a store broken so (%s) passed seeds 1..%d, or failed other checks only", mt.m, simMutantSeeds)
		})
	}
}

// simMutantSeeds bounds the seeds a broken store runs before one fails.
const simMutantSeeds = 20

// simKind is the mode a seed gives a name: taken Shared or exclusively
// (rw), with Permits(permits) or exclusively, or exclusively only.
type simKind struct {
	rw      bool
	permits int
}

func (k simKind) String() string {
	switch {
	case k.rw:
		return "shared"
	case k.permits > 0:
		return fmt.Sprintf("permits(%d)", k.permits)
	}
	return "exclusive"
}

// simModes is a seed's names' modes.
type simModes struct {
	kinds map[string]simKind
}

// Kinds of lease, for the counts.
const (
	simLeaseExclusive = iota
	simLeaseShared
	simLeasePermits
	simLeaseAll
	simLeaseKinds
)

// drawModes draws the names and their modes, from a stream of their own,
// whether the store has slots, and which processes queue fairly (the
// fairMode of newSimulation: 0 none, 9 some, 5 all).
func (sim *simulation) drawModes(seed uint64) (fairMode int) {
	r := rand.New(rand.NewPCG(seed, 0x30de5))
	m := &simModes{kinds: make(map[string]simKind)}
	sim.names = nil
	for i := range 2 + r.IntN(3) {
		name := fmt.Sprintf("k%d", i)
		sim.names = append(sim.names, name)
		var k simKind
		switch x := r.IntN(3); {
		case i == 0 || x == 0: // one name at least is shared: the writer's check takes it
			k.rw = true
		case x == 1:
			k.permits = 1 + r.IntN(4)
		}
		m.kinds[name] = k
	}
	if r.IntN(10) < 3 {
		sim.store.slots = 2
	}
	sim.modes = m
	switch x := r.IntN(10); {
	case x < 5:
		return 0
	case x < 9:
		return 9
	}
	return 5
}

// describe says what the seed's modes are, for its setup.
func (m *simModes) describe(sim *simulation) string {
	parts := make([]string, len(sim.names))
	for i, n := range sim.names {
		parts[i] = n + " " + m.kinds[n].String()
	}
	s := "modes: " + strings.Join(parts, ", ")
	if sim.store.slots > 0 {
		s += fmt.Sprintf("; TryAcquireAll within one of %d slots", sim.store.slots)
	}
	if sim.store.mutant != "" {
		s += "; the store broken: " + string(sim.store.mutant)
	}
	return s
}

// simCallPlan is what a worker's acquire asks for.
type simCallPlan struct {
	names    []string
	all      bool // AcquireAll
	opts     []core.CallOption
	label    string // for the trace and reports
	kind     int    // simLease*
	mismatch bool   // a share of a name with permits: ErrModeMismatch may come
	refused  bool   // Shared on a Locker WithFair: ErrInvalidOption at once
}

// plan draws the modes of an acquire of name (and of the names beside it,
// for AcquireAll).
func (w *simWorker) plan(name string, tail bool) simCallPlan {
	sim, r := w.sim, w.r
	m := sim.modes
	fair := w.p.patience > 0
	p := simCallPlan{names: []string{name}, kind: simLeaseExclusive}
	mode := "exclusive"
	if r.IntN(5) == 0 {
		n := min(2+r.IntN(2), len(sim.names))
		p.names = p.names[:0]
		for _, i := range r.Perm(len(sim.names))[:n] {
			p.names = append(p.names, sim.names[i])
		}
		p.all, p.kind = true, simLeaseAll
		allRW := true
		for _, n := range p.names {
			allRW = allRW && m.kinds[n].rw
		}
		if !fair && allRW && r.IntN(2) == 0 {
			p.opts, mode = append(p.opts, core.Shared()), "shared"
		}
		p.label = fmt.Sprintf("AcquireAll %v %s", p.names, mode)
		return p
	}
	k := m.kinds[name]
	switch {
	case fair:
		if k.rw && !tail && r.IntN(20) == 0 {
			p.refused = true
			p.opts, mode = append(p.opts, core.Shared()), "shared (on a Locker WithFair)"
		}
	case k.rw && r.IntN(5) < 3:
		p.opts, mode, p.kind = append(p.opts, core.Shared()), "shared", simLeaseShared
	case k.permits > 0 && r.IntN(5) < 4:
		p.mismatch, p.kind = true, simLeasePermits
		n := k.permits
		switch x := r.IntN(25); {
		case tail || x > 1:
		case x == 0:
			n++ // disagrees on n
		default:
			p.opts, mode, p.kind = append(p.opts, core.Shared()), "shared (of a name with permits)", simLeaseShared
		}
		if p.kind == simLeasePermits {
			p.opts, mode = append(p.opts, core.Permits(n)), fmt.Sprintf("permits(%d)", n)
		}
	}
	p.label = fmt.Sprintf("Acquire %s %s", name, mode)
	return p
}

// acquireModes is the acquire of cycle under TestSimModes: it draws the
// call's modes, acquires, checks the answer, and returns the lease, or
// false when there is none.
func (w *simWorker) acquireModes(ctx context.Context, name string, ttl time.Duration, tail bool, opts []core.CallOption) (*core.Lease, bool) {
	sim := w.sim
	plan := w.plan(name, tail)
	opts = append(opts[:len(opts):len(opts)], plan.opts...)
	keys := make([]string, len(plan.names))
	for i, n := range plan.names {
		keys[i], _ = w.p.locker.Key(n)
	}
	// The tokens of the attempts can be checked where no fair queue keeps
	// a waiter's place beyond its call (a poll in flight may queue it
	// again, and the store grant it the name); a lock handed off to a
	// local waiter is the waiter's (simHandOffs).
	checkCall := w.p.patience == 0
	start := time.Now()
	for {
		call := &simCall{}
		cctx := withSimCall(ctx, call)
		sim.trace.add("%s %s ttl=%v", w.name, plan.label, ttl)
		var lease *core.Lease
		var err error
		if plan.all {
			lease, err = w.p.locker.AcquireAll(cctx, plan.names, opts...)
		} else {
			lease, err = w.p.locker.Acquire(cctx, name, opts...)
		}
		if checkCall {
			sim.check.call(w.name, plan.label, keys, call, lease)
		}
		if err == nil {
			if plan.refused {
				sim.fail("%s: %s: got a lease, want ErrInvalidOption", w.name, plan.label)
			}
			sim.leases.Add(1)
			sim.byMode[plan.kind].Add(1)
			var got []string
			for _, l := range simParts(lease) {
				got = append(got, fmt.Sprintf("%s %s slot %d fence %d", l.Name(), sim.trace.tok(l.Token()), l.Slot(), l.Fence()))
			}
			sim.trace.add("%s got %s valid until %s", w.name, strings.Join(got, ", "), sim.trace.since(lease.ValidUntil()))
			sim.check.obtained(w.name, lease, tail)
			return lease, true
		}
		sim.trace.add("%s %s: %v", w.name, plan.label, err)
		dead := w.p.view.dead(time.Now())
		switch {
		case plan.refused:
			if !errors.Is(err, core.ErrInvalidOption) {
				sim.fail("%s: %s: %v, want ErrInvalidOption", w.name, plan.label, err)
			}
			return nil, false
		case plan.mismatch && errors.Is(err, core.ErrModeMismatch):
			if !errors.Is(err, core.ErrInvalidOption) {
				sim.fail("%s: %s: %v: ErrModeMismatch not wrapped with ErrInvalidOption", w.name, plan.label, err)
			}
			// In the tail, the names' holders of another mode leave: try
			// again until the wait has passed.
			if tail && !dead && time.Since(start) < 30*time.Second {
				time.Sleep(time.Millisecond)
				continue
			}
		case !errors.Is(err, core.ErrTimeout) && !errors.Is(err, core.ErrStorage) && !errors.Is(err, context.DeadlineExceeded):
			sim.fail("%s: %s failed with an error of no expected kind: %v", w.name, plan.label, err)
		}
		if tail && !dead {
			sim.fail("progress: %s: %s with a wait of 30s after the faults stopped: %v", w.name, plan.label, err)
		}
		return nil, false
	}
}

// call checks, as an Acquire or AcquireAll of who (label) over keys
// returns lease (nil if it failed), that the store holds none of keys for
// the tokens of its attempts that did not make lease, among those whose
// every command was answered (see simCall).
func (c *simChecker) call(who, label string, keys []string, call *simCall, lease *core.Lease) {
	won := make(map[string]bool)
	if lease != nil {
		for _, l := range simParts(lease) {
			won[l.Token()] = true
		}
	}
	now := time.Now()
	for _, t := range call.known() {
		if won[t] {
			continue
		}
		for _, k := range keys {
			if c.sim.store.holds(k, t, now) {
				outcome := "failed"
				if lease != nil {
					outcome = "succeeded"
				}
				c.sim.fail("all or none: %s: %s %s, but the store holds %s for %s, an attempt of it that did not make its lease, every command of which was answered",
					who, label, outcome, k, c.sim.trace.tok(t))
			}
		}
	}
}

// simStarveWait is how long the writer of the starvation check waits.
const simStarveWait = 5 * time.Second

// starvation checks that a waiting writer is not starved by readers (see
// TestSimModes): after the faults, on the first shared name, four readers
// of a process of their own hold it in turns that overlap, and a writer of
// another process must take it within simStarveWait.
func (sim *simulation) starvation() {
	var name string
	for _, n := range sim.names {
		if sim.modes.kinds[n].rw {
			name = n
			break
		}
	}
	if name == "" {
		return
	}
	st := newSimStream(sim.seed, "starvation")
	r := st.r
	const io = 50 * time.Millisecond
	newProc := func(name string, spin time.Duration) (*simView, *core.Locker) {
		v := sim.store.newView(name, io, nil, time.Time{})
		return v, core.NewWithStore(v, core.WithPrefix("sim:"), core.WithFencing(), core.WithTTL(300*time.Millisecond),
			core.WithIOTimeout(io), core.WithSpin(spin, 0))
	}
	rv, rl := newProc("rd", simLogUniform(r, time.Millisecond, 10*time.Millisecond))
	wv, wl := newProc("wr", simLogUniform(r, time.Millisecond, 20*time.Millisecond))
	defer func() {
		for _, l := range []*core.Locker{rl, wl} {
			_ = l.Close()
		}
		_ = rv.Close()
		_ = wv.Close()
	}()
	sim.trace.add("starvation check on %s: four readers, then a writer", name)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		who := fmt.Sprintf("rd/w%d", i)
		rs := newSimStream(sim.seed, "reader "+who)
		wg.Go(func() { sim.reader(who, rl, rs, name, stop) })
	}
	ws := newSimStream(sim.seed, "writer")
	ctx := withSimStream(context.Background(), ws)
	time.Sleep(30 * time.Millisecond) // the readers hold it
	start := time.Now()
	sim.trace.add("wr/w0 Acquire %s exclusive, readers coming and going", name)
	lease, err := wl.Acquire(ctx, name, core.Wait(simStarveWait))
	if err != nil {
		sim.fail("starvation: a writer waited %v for %s while readers took it in turns, and never got it: %v",
			time.Since(start).Round(time.Millisecond), name, err)
	} else {
		sim.trace.add("wr/w0 got %s: %s fence %d after %v", name, sim.trace.tok(lease.Token()), lease.Fence(), time.Since(start))
		sim.check.obtained("wr/w0", lease, true)
		time.Sleep(time.Millisecond)
		sim.check.releasing(lease)
		if err := lease.Release(ctx); err != nil {
			sim.fail("starvation check: the writer's Release(%s): %v", name, err)
		}
	}
	close(stop)
	wg.Wait()
	sim.allOrNone(wl)
}

// allOrNone checks that a failed AcquireAll leaves none of its names held,
// without faults: h holds the second name; an AcquireAll of the first two
// names, by a process whose local queue (WithLocalQueue) makes it take
// them one by one, takes the first, waits 20 ms for the second and fails;
// the store must then hold the first for none of its tokens (simChecker.call).
func (sim *simulation) allOrNone(h *core.Locker) {
	ctx := withSimStream(context.Background(), newSimStream(sim.seed, "all or none"))
	names := sim.names[:2]
	held, err := h.Acquire(ctx, names[1], core.TTL(time.Second))
	if err != nil {
		sim.fail("all-or-none check: Acquire(%s): %v", names[1], err)
		return
	}
	sim.check.obtained("wr/w0", held, true)
	v := sim.store.newView("aa", 50*time.Millisecond, nil, time.Time{})
	defer v.Close()
	g := hotspot.New(hotspot.WithKeys(sim.names...), hotspot.WithHotPeriod(0))
	l := core.NewWithStore(v, core.WithPrefix("sim:"), core.WithFencing(), core.WithTTL(time.Second),
		core.WithIOTimeout(50*time.Millisecond), core.WithSpin(5*time.Millisecond, 0), core.WithLocalQueue(g),
		core.WithObservers(simHandOffs{}))
	defer l.Close()
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i], _ = l.Key(n)
	}
	call := &simCall{}
	label := fmt.Sprintf("AcquireAll %v exclusive, while %s is held", names, names[1])
	sim.trace.add("aa/w0 %s", label)
	lease, err := l.AcquireAll(withSimCall(ctx, call), names, core.Wait(20*time.Millisecond))
	sim.trace.add("aa/w0 %s: %v", label, err)
	sim.check.call("aa/w0", label, keys, call, lease)
	if err == nil {
		sim.fail("all-or-none check: %s: got a lease", label)
		_ = lease.Release(ctx)
	} else if !errors.Is(err, core.ErrTimeout) {
		sim.fail("all-or-none check: %s: %v, want ErrTimeout", label, err)
	}
	sim.check.releasing(held)
	if err := held.Release(ctx); err != nil {
		sim.fail("all-or-none check: Release(%s): %v", names[1], err)
	}
}

// reader takes name Shared in turns until stop closes.
func (sim *simulation) reader(who string, l *core.Locker, st *simStream, name string, stop <-chan struct{}) {
	ctx := withSimStream(context.Background(), st)
	r := st.r
	for !sim.failed.Load() {
		select {
		case <-stop:
			return
		default:
		}
		lease, err := l.Acquire(ctx, name, core.Shared(), core.Wait(30*time.Second))
		if err != nil {
			sim.fail("starvation check: %s: Acquire(%s, Shared) with a wait of 30s: %v", who, name, err)
			return
		}
		sim.trace.add("%s got %s shared: %s fence %d", who, name, sim.trace.tok(lease.Token()), lease.Fence())
		sim.check.obtained(who, lease, true)
		time.Sleep(simLogUniform(r, 10*time.Millisecond, 50*time.Millisecond))
		sim.check.releasing(lease)
		if err := lease.Release(ctx); err != nil {
			sim.fail("starvation check: %s: Release(%s): %v", who, name, err)
			return
		}
		time.Sleep(simLogUniform(r, 100*time.Microsecond, time.Millisecond))
	}
}

// modesDetail says how many leases of each kind the seeds obtained.
func (t *simTotals) modesDetail() string {
	b := t.byMode
	return fmt.Sprintf("%d exclusive, %d shared, %d permits, %d of AcquireAll", b[simLeaseExclusive], b[simLeaseShared], b[simLeasePermits], b[simLeaseAll])
}
