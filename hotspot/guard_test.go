package hotspot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// contend runs goroutines × rounds acquires of name on each instance, with a
// critical section checked for overlaps, and returns the overlap detector.
func contend(t *testing.T, instances []*instance, name string, goroutines, rounds int) *redistest.Overlap {
	t.Helper()
	var o redistest.Overlap
	var wg sync.WaitGroup
	errs := make(chan error, len(instances)*goroutines)
	for _, in := range instances {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for range rounds {
					lease, err := in.locker.Acquire(ctx, name)
					if err != nil {
						errs <- err
						return
					}
					exit := o.Enter()
					time.Sleep(100 * time.Microsecond)
					exit()
					if err := lease.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return &o
}

func TestMutualExclusionAcrossInstances(t *testing.T) {
	for _, k := range []int{0, 3} {
		t.Run(fmt.Sprintf("handoff=%d", k), func(t *testing.T) {
			leakCheck(t)
			const instances, goroutines, rounds = 3, 4, 25
			var ins []*instance
			for range instances {
				ins = append(ins, newInstance(t, []hotspot.Option{hotspot.WithHandoff(k)}, fastSpin))
			}
			name := uniq(t)
			o := contend(t, ins, name, goroutines, rounds)
			if o.Overlaps() != 0 {
				t.Fatalf("%d overlapping critical sections", o.Overlaps())
			}
			if want := int64(instances * goroutines * rounds); o.Entries() != want {
				t.Fatalf("%d critical sections, want %d", o.Entries(), want)
			}
			// Whether the storm above made contention within an instance
			// (and hand-offs) is up to the scheduler: one goroutine may run
			// its rounds alone. Contention made on purpose in every
			// instance, after it, must be detected, and handed off with
			// hand-off on.
			var hits, handoffs int64
			for _, in := range ins {
				contendOnce(t, in, name)
				s := in.guard.Stats()
				t.Logf("stats %+v", s)
				hits += s.Hits
				handoffs += s.Handoffs
				in.settled(t, name)
			}
			if hits == 0 {
				t.Error("no acquire went through a local lock: contention was not detected")
			}
			if (k == 0) != (handoffs == 0) {
				t.Errorf("WithHandoff(%d): %d handoffs", k, handoffs)
			}
		})
	}
}

// One Guard serves two Lockers whose prefixes differ: the same name is two
// different locks, and the Guard must not serialise them.
func TestSharedGuardKeysByRedisKey(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	g := hotspot.New(hotspot.WithKeys(name))
	c := shared.Client(t)
	a := core.New(c, core.WithHandlers(g), core.WithPrefix("a:"))
	b := core.New(c, core.WithHandlers(g), core.WithPrefix("b:"), core.WithWait(0))
	ctx := context.Background()
	la, err := a.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	lb, err := b.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("the second Locker's lock was blocked by the first's: %v", err)
	}
	defer lb.Release(ctx)
	if s := g.Stats(); s.Size != 2 || s.Hits != 2 {
		t.Fatalf("stats %+v, want two local locks, two hits", s)
	}
}

// One Guard serves two Lockers with the same prefix, on clients of their own
// (two parts of one service, say): they share its local locks, and a release
// may pass one Locker's lease to the other's waiter. The Locker that gets
// another's lease releases it in that Locker's Redis and acquires on its
// own, so mutual exclusion holds and no lease crosses from one Locker to the
// other: the tokens each Locker hands out are its own.
func TestGuardSharedByTwoLockers(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	g := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(1000))
	lockers := []*core.Locker{
		core.New(shared.Client(t), core.WithHandlers(g), fastSpin, core.WithWait(30*time.Second)),
		core.New(shared.Client(t), core.WithHandlers(g), fastSpin, core.WithWait(30*time.Second)),
	}
	const goroutines, rounds = 4, 50
	var o redistest.Overlap
	tokens := []map[string]bool{{}, {}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, l := range lockers {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for range rounds {
					lease, err := l.Acquire(ctx, name)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					tokens[i][lease.Token()] = true
					mu.Unlock()
					exit := o.Enter()
					time.Sleep(100 * time.Microsecond)
					exit()
					if err := lease.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if o.Overlaps() != 0 || o.Entries() != 2*goroutines*rounds {
		t.Fatalf("%d overlaps in %d critical sections, want none in %d", o.Overlaps(), o.Entries(), 2*goroutines*rounds)
	}
	for tok := range tokens[0] {
		if tokens[1][tok] {
			t.Fatalf("a lease of one Locker was taken over by the other (token %s)", tok)
		}
	}
	s := g.Stats()
	t.Logf("stats %+v; %d leases passed to the other Locker's waiters; tokens %d and %d", s, g.Refused(), len(tokens[0]), len(tokens[1]))
	// Which waiter a release found parked above is up to the scheduler. Made
	// on purpose now: a pass within a Locker is taken over, a pass across
	// is refused, and the lock taken in Redis.
	ins := []*instance{
		{client: shared.Client(t), guard: g, locker: lockers[0]},
		{client: shared.Client(t), guard: g, locker: lockers[1]},
	}
	for _, c := range []struct {
		holder, waiter    *instance
		takenOver         bool
		handoffs, refused int64
	}{
		{ins[0], ins[0], true, 1, 0},
		{ins[0], ins[1], false, 0, 1},
	} {
		before, refused := g.Stats().Handoffs, g.Refused()
		holder, waiter := c.holder.queueBehind(t, c.waiter, name)
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		lease := waiter()
		if (lease.Token() == holder.Token()) != c.takenOver {
			t.Errorf("the waiter of the same Locker: %v; took the holder's lease over: %v", c.holder == c.waiter, !c.takenOver)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if h, r := g.Stats().Handoffs-before, g.Refused()-refused; h != c.handoffs || r != c.refused {
			t.Errorf("the waiter of the same Locker: %v; %d handoffs and %d passes refused, want %d and %d", c.holder == c.waiter, h, r, c.handoffs, c.refused)
		}
	}
	ins[0].settled(t, name)
}

// Names never contended go straight to Redis and leave nothing in the Guard;
// a name contended in this process gets a local lock that stays while hot.
func TestAutomaticDetection(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithHotPeriod(time.Second)}, fastSpin)
	// The Guard's clock moves only when the test moves it: the hot period
	// neither ends early on a machine slow to run the steps below nor needs a
	// sleep to end.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	in.guard.SetClock(func() time.Time { return time.Unix(0, clock.Load()) })
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		lease, err := in.locker.Acquire(ctx, uniq(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := in.guard.Stats(); s.Size != 0 || s.Hits != 0 {
		t.Fatalf("uncontended names left stats %+v, want none", s)
	}

	name := uniq(t)
	contendOnce(t, in, name) // the holder comes first and takes no local lock
	if s := in.guard.Stats(); s.Size != 1 || s.Hits != 2 {
		t.Fatalf("after contention: stats %+v, want one local lock kept, two hits", s)
	}
	// While hot, even a lone acquire takes the local lock.
	lease, err := in.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(ctx)
	if s := in.guard.Stats(); s.Hits != 3 {
		t.Fatalf("a lone acquire of a hot name: %d hits, want 3", s.Hits)
	}
	clock.Add(int64(1100 * time.Millisecond)) // the hot period passes
	lease, err = in.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(ctx)
	if s := in.guard.Stats(); s.Hits != 3 || s.Size != 0 {
		t.Fatalf("after the hot period: stats %+v, want the name cold again", s)
	}
	in.settled(t, name)
}

// contendOnce has two goroutines acquire name in in while the test holds it,
// and waits until both are done: the name is then hot.
func contendOnce(t *testing.T, in *instance, name string) {
	t.Helper()
	lease, err := in.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	key := lease.Key()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.once(t, name, nil)
		}()
	}
	// Both have joined a local lock (the holder's, if it took one), and
	// one of them waits on it.
	waitFor(t, "two goroutines are on "+name, func() bool { return in.guard.Waiters(key) >= 2 && parkedInWait() >= 1 })
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// Thousands of distinct names held at once, none of them contended, collide
// in the in-flight sketch. That must not make them local locks of the Guard:
// they must not fill it, evict the idle local locks of hot names, make names
// of WithKeys bypass it, count as hits or bypasses, or stop the detection of
// a name really contended meanwhile.
func TestManyUncontendedNamesHeldAtOnce(t *testing.T) {
	leakCheck(t)
	pinned, hot, fresh := uniq(t), uniq(t), uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(pinned)}, fastSpin) // default capacity
	// The hot name stays hot however long the thousands of acquires below
	// take on a loaded machine: the Guard's clock stands still.
	frozen := time.Now()
	in.guard.SetClock(func() time.Time { return frozen })
	ctx := context.Background()
	in.once(t, pinned, nil)
	contendOnce(t, in, hot)
	before := in.guard.Stats()
	if before.Size != 2 || before.Bypasses != 0 || before.Evictions != 0 {
		t.Fatalf("stats %+v, want the pinned and the hot name kept", before)
	}

	const held = 6000
	leases := make([]*core.Lease, 0, held)
	defer func() {
		for _, lease := range leases {
			_ = lease.Release(ctx)
		}
	}()
	for i := range held {
		lease, err := in.locker.Acquire(ctx, fmt.Sprintf("%s/order:%d", t.Name(), i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	t.Logf("%d uncontended names held: stats %+v, %d tentative local locks", held, in.guard.Stats(), in.guard.Tentative())
	if s := in.guard.Stats(); s != before {
		t.Fatalf("stats %+v with %d uncontended names held, want them unchanged: %+v", s, held, before)
	}
	if n := in.guard.Tentative(); n > hotspot.DefaultCapacity {
		t.Fatalf("%d tentative local locks, over the capacity %d", n, hotspot.DefaultCapacity)
	}

	// The names of WithKeys and the hot names still take their local locks,
	// and a name contended now is still detected.
	for _, name := range []string{pinned, hot} {
		lease, err := in.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := in.guard.Stats(); s.Hits != before.Hits+2 || s.Bypasses != 0 {
		t.Fatalf("stats %+v: want the pinned and the hot name through their local locks", s)
	}
	contendOnce(t, in, fresh)
	if s := in.guard.Stats(); s.Size != 3 || s.Bypasses != 0 || s.Evictions != 0 {
		t.Fatalf("stats %+v: want a name contended meanwhile detected and kept", s)
	}

	for _, lease := range leases {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	leases = nil
	if s := in.guard.Stats(); s.Size != 3 || s.Bypasses != 0 || s.Evictions != 0 || in.guard.Tentative() != 0 || in.guard.InFlight() != 0 {
		t.Fatalf("after the releases: stats %+v, %d tentative, %d in flight; want the three hot names only", s, in.guard.Tentative(), in.guard.InFlight())
	}
}

func TestHotPeriodZeroTurnsDetectionOff(t *testing.T) {
	leakCheck(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithHotPeriod(0)}, fastSpin)
	name := uniq(t)
	o := contend(t, []*instance{in}, name, 4, 5)
	if o.Overlaps() != 0 {
		t.Fatalf("%d overlaps", o.Overlaps())
	}
	if s := in.guard.Stats(); s.Hits != 0 || s.Size != 0 {
		t.Fatalf("stats %+v, want no local lock without detection or WithKeys", s)
	}
}

// probe is an Observer that records what telemetry sees of every acquire
// and release: the acquire events, in the order the acquires returned, and
// the outcome of each lease's end, by token.
type probe struct {
	mu       sync.Mutex
	acquires []core.AcquireEvent
	releases map[string][]core.Outcome
}

func (p *probe) ObserveAcquire(_ context.Context, e core.AcquireEvent) core.LeaseObserver {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acquires = append(p.acquires, e)
	if e.Lease == nil {
		return nil
	}
	return probeLease{p}
}

// probeLease records the end of one lease.
type probeLease struct{ p *probe }

func (l probeLease) ObserveRelease(_ context.Context, e core.ReleaseEvent) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.releases == nil {
		l.p.releases = make(map[string][]core.Outcome)
	}
	l.p.releases[e.Lease.Token()] = append(l.p.releases[e.Lease.Token()], e.Outcome)
}

// waits returns the local waits of the acquires, in the order they returned.
func (p *probe) waits() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, e := range p.acquires {
		out = append(out, e.LocalWait)
	}
	return out
}

// count returns the acquires recorded, those handed off among them, and
// the lease ends recorded with each outcome.
func (p *probe) count() (acquires, handedOver int, ends map[core.Outcome]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.acquires {
		if e.HandedOver {
			handedOver++
		}
	}
	ends = make(map[core.Outcome]int)
	for _, outcomes := range p.releases {
		for _, o := range outcomes {
			ends[o]++
		}
	}
	return len(p.acquires), handedOver, ends
}

// ended returns how the lease with token ended, in the order its ends were
// recorded (one, for a lease released once).
func (p *probe) ended(token string) []core.Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.releases[token])
}

// Waiters wait in the process: while a name is held locally, they send
// nothing to Redis, and the Locker reports the time waited to its Observers
// (AcquireEvent.LocalWait), wherever they stand among the options.
func TestLocalWaitSendsNothing(t *testing.T) {
	leakCheck(t)
	probe := &probe{}
	name := uniq(t)
	c := shared.Client(t)
	rt := &redistest.RoundTrips{}
	c.AddHook(rt)
	g := hotspot.New(hotspot.WithKeys(name))
	// Every store call takes SlowStore's delay more: time the holder spends
	// past its local turn, which its LocalWait must not count.
	store := &adaptertest.SlowStore{Store: core.NewRedisStore(c), Delay: 100 * time.Millisecond}
	l := core.NewWithStore(store, core.WithHandlers(g), core.WithObservers(probe)) // after the Guard: it sees the local wait all the same
	ctx := context.Background()
	start := time.Now()
	holder, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	rt.N.Store(0)
	done := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, name)
		if err == nil {
			err = lease.Release(ctx)
		}
		done <- err
	}()
	waitFor(t, "the waiter is parked on the local lock", func() bool { return g.Waiters(holder.Key()) == 2 && parkedInWait() == 1 })
	time.Sleep(50 * time.Millisecond) // the waiter's LocalWait, which began before it parked, includes this
	if n := rt.N.Load(); n != 0 {
		t.Fatalf("the waiter sent %d commands to Redis while the name was held locally", n)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The holder found the local lock free: its LocalWait is the time of its
	// local turn only, and its Acquire took that, and the store's delay, and
	// more. A LocalWait that counted the store's time too would be over
	// took-delay (unless the rest of the Acquire stalled for over the delay).
	if waits := probe.waits(); len(waits) != 2 || waits[0] > took-store.Delay || waits[1] < 50*time.Millisecond {
		t.Fatalf("LocalWait of holder and waiter = %v, want at most %v (the holder's Acquire less the store's delay: the local lock was free) and at least 50ms",
			waits, took-store.Delay)
	}
}

func TestTimeoutWhileWaitingLocally(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name)}, core.WithWait(50*time.Millisecond))
	holder, release := in.hold(t, name)
	in.rt.N.Store(0)
	start := time.Now()
	_, err := in.locker.Acquire(context.Background(), name)
	if !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("Acquire while held locally = %v, want ErrTimeout", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the wait budget", waited)
	}
	if n := in.rt.N.Load(); n != 0 {
		t.Fatalf("the waiter sent %d commands to Redis", n)
	}
	// The context's deadline cuts the budget and is reported as the context's.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := in.locker.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past the context's deadline = %v, want context.DeadlineExceeded", err)
	}
	// A try-lock (no wait budget) fails at once.
	try := core.New(in.client, core.WithHandlers(in.guard), core.WithWait(0))
	if _, err := try.Acquire(context.Background(), name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("try-lock while held locally = %v, want ErrTimeout", err)
	}
	if n := in.guard.Waiters(holder.Key()); n != 1 {
		t.Fatalf("%d on the local lock after the waiters gave up, want the holder only", n)
	}
	release()
	in.settled(t, name)
}

// Cancelling waiters leaves nothing held, locally or in Redis, with hand-off
// off and on.
func TestCancelWhileWaitingLocally(t *testing.T) {
	for _, k := range []int{0, 2} {
		t.Run(fmt.Sprintf("handoff=%d", k), func(t *testing.T) {
			leakCheck(t)
			name := uniq(t)
			in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(k)})
			_, release := in.hold(t, name)
			ctx, cancel := context.WithCancel(context.Background())
			errs := make(chan error, 3)
			for range 3 {
				go func() {
					lease, err := in.locker.Acquire(ctx, name)
					if err == nil {
						_ = lease.Release(ctx)
					}
					errs <- err
				}()
			}
			in.parked(t, name, 4)
			cancel()
			for range 3 {
				if err := <-errs; !errors.Is(err, context.Canceled) {
					t.Fatalf("a cancelled waiter got %v, want context.Canceled", err)
				}
			}
			release()
			in.settled(t, name)
			try := core.New(in.client, core.WithHandlers(in.guard), core.WithWait(0))
			lease, err := try.Acquire(context.Background(), name)
			if err != nil {
				t.Fatalf("the name is not free after the cancelled waiters left: %v", err)
			}
			_ = lease.Release(context.Background())
		})
	}
}

// Waiters that give up at random moments, some of them while a lease is
// handed to them, never strand the lock in Redis and never overlap.
func TestHandoffRacesWithGivingUp(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	ins := []*instance{
		newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(1000)}, fastSpin),
		newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(1000)}, fastSpin),
	}
	var o redistest.Overlap
	var wg sync.WaitGroup
	var acquired, gaveUp int64
	var mu sync.Mutex
	for _, in := range ins {
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					// Most attempts give up after up to 1.5 ms; every fourth
					// waits as long as it takes (the instance's 30 s), so
					// that some acquire however slow the machine, and the
					// first of all is cut before it starts, so that some
					// give up however fast.
					timeout := time.Duration(rand.IntN(1500)) * time.Microsecond
					switch {
					case i == 0:
						timeout = 0
					case i%4 == 0:
						timeout = time.Minute
					}
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					lease, err := in.locker.Acquire(ctx, name)
					cancel()
					mu.Lock()
					if err != nil {
						gaveUp++
					} else {
						acquired++
					}
					mu.Unlock()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, core.ErrTimeout) {
							t.Error(err)
						}
						continue
					}
					exit := o.Enter()
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					exit()
					_ = lease.Release(context.Background())
				}
			}()
		}
	}
	wg.Wait()
	if o.Overlaps() != 0 {
		t.Fatalf("%d overlaps", o.Overlaps())
	}
	if acquired == 0 || gaveUp == 0 {
		t.Fatalf("acquired %d, gave up %d: the test did not exercise both", acquired, gaveUp)
	}
	var handoffs int64
	for _, in := range ins {
		handoffs += in.guard.Stats().Handoffs
		in.settled(t, name)
	}
	// How many hand-offs the storm made, and how many met a waiter giving
	// up, is up to the scheduler. After it, a release with a waiter parked
	// must still hand off in every instance.
	t.Logf("acquired %d, gave up %d, handoffs %d", acquired, gaveUp, handoffs)
	for _, in := range ins {
		before := in.guard.Stats().Handoffs
		holder, waiter := in.queue(t, name)
		if err := holder.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		lease := waiter()
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if lease.Token() != holder.Token() || in.guard.Stats().Handoffs != before+1 {
			t.Fatalf("after the storm, a release with a waiter parked: handed off %v, %d handoffs, want 1", lease.Token() == holder.Token(), in.guard.Stats().Handoffs-before)
		}
		in.settled(t, name)
	}
}

// After k hand-offs in a row the lock goes back to Redis.
func TestHandoffStreak(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	probe := &probe{}
	const k = 2
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(k)})
	// A TTL long enough that the handed-off leases keep the holder's expiry
	// (no compare-and-extend, which a lease with less than two thirds of its
	// TTL left gets) however long the waiters take to park.
	l := core.New(in.client, core.WithObservers(probe), core.WithHandlers(in.guard), core.WithTTL(time.Minute), core.WithWait(30*time.Second))
	ctx := context.Background()
	holder, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make(chan string, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			tokens <- lease.Token()
			_ = lease.Release(ctx)
		}()
	}
	in.parked(t, name, 4)
	in.rt.N.Store(0)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(tokens)
	same := 0
	for tok := range tokens {
		if tok == holder.Token() {
			same++
		}
	}
	if same != k {
		t.Errorf("%d waiters took the holder's lock over, want %d", same, k)
	}
	if s := in.guard.Stats(); s.Handoffs != k {
		t.Errorf("Handoffs = %d, want %d", s.Handoffs, k)
	}
	// The k-th taker releases in Redis; the last waiter sets and releases.
	if n := in.rt.N.Load(); n != 3 {
		t.Errorf("%d round trips for four critical sections, want 3", n)
	}
	for _, w := range probe.waits()[1:] {
		if w <= 0 {
			t.Errorf("a waiter's LocalWait is %v", w)
		}
	}
	// The Observers saw the k acquires that took the lock over, and the k
	// releases that handed it on, however late they were given.
	if n, handed, ends := probe.count(); n != 4 || handed != k || ends[core.OutcomeHandedOff] != k || ends[core.OutcomeReleased] != 4-k {
		t.Errorf("observers saw %d acquires (%d handed over) and lease ends %v; want 4 (%d), %d handed off, %d released", n, handed, ends, k, k, 4-k)
	}
	in.settled(t, name)
}

// queue takes name in in and starts one local waiter behind the holder; the
// returned function waits for the waiter's lease.
func (in *instance) queue(t *testing.T, name string) (holder *core.Lease, waiter func() *core.Lease) {
	t.Helper()
	return in.queueBehind(t, in, name)
}

// queueBehind is queue with the waiter's acquire made by other's Locker,
// which shares in's Guard.
func (in *instance) queueBehind(t *testing.T, other *instance, name string) (holder *core.Lease, waiter func() *core.Lease) {
	t.Helper()
	holder, err := in.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		lease, err := other.locker.Acquire(context.Background(), name)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	in.parked(t, name, 2)
	return holder, func() *core.Lease {
		lease := <-got
		if lease == nil {
			t.FailNow()
		}
		return lease
	}
}

// A lease that is no longer held is not handed off as if it were: the waiter
// takes the lock in Redis.
func TestHandoffOfALostLease(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(3)}, fastSpin)
	ctx := context.Background()
	holder, waiter := in.queue(t, name)
	if err := in.client.Del(ctx, holder.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend of a deleted lock = %v, want ErrNotHeld", err)
	}
	_ = holder.Release(ctx)
	lease := waiter()
	if lease.Token() == holder.Token() {
		t.Fatal("the waiter took over a lost lease")
	}
	if v, _ := in.client.Get(ctx, lease.Key()).Result(); v != lease.Token() {
		t.Fatalf("the waiter's lock is not in Redis (value %q)", v)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s := in.guard.Stats(); s.Handoffs != 0 {
		t.Fatalf("Handoffs = %d, want 0", s.Handoffs)
	}
	in.settled(t, name)
}

// A lease whose watchdog gave up (Redis unreachable for most of its TTL) is
// lost although its ValidUntil has not passed, and its key may still be in
// Redis once Redis is back. It must not be handed to a local waiter: the
// Locker releases it in Redis, whose compare-and-delete removes the key
// before Release returns, and the waiter takes the lock in Redis.
func TestLeaseLostByItsWatchdogIsNotHandedOff(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	c, proxy := shared.ProxiedClient(t)
	admin := shared.Client(t)
	probe := &probe{}
	g := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(3))
	// The watchdog renews every 2 s and gives up 2 s before the lease
	// expires: the key outlives the lease's loss by about that long, which
	// leaves the checks below (the lease lost but still valid, its Release
	// while its key is in Redis) room on a loaded machine. The I/O timeout is
	// long enough for the calls that must succeed, however slow the reply; a
	// renewal into the black hole ends at the give-up time anyway.
	l := core.New(c, core.WithHandlers(g), core.WithObservers(probe), core.WithTTL(6*time.Second), core.WithWatchdog(),
		core.WithWatchdogInterval(2*time.Second), core.WithIOTimeout(3*time.Second), core.WithWait(30*time.Second), fastSpin)
	in := &instance{client: c, rt: &redistest.RoundTrips{}, guard: g, locker: l}
	ctx := context.Background()
	holder, waiter := in.queue(t, name)
	proxy.Blackhole()
	select {
	case <-holder.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not give the lease up with Redis unreachable")
	}
	proxy.Restore()
	if !holder.Lost() || !time.Now().Before(holder.ValidUntil()) {
		t.Fatalf("Lost() = %v with ValidUntil in %v: want a lease lost before its validity ended", holder.Lost(), time.Until(holder.ValidUntil()))
	}
	if err := holder.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Release of the lost lease = %v", err)
	}
	if got := probe.ended(holder.Token()); len(got) != 1 || got[0] != core.OutcomeGaveUp {
		t.Fatalf("the lost lease ended %v, want given up (not handed off)", got)
	}
	if v, _ := admin.Get(ctx, holder.Key()).Result(); v == holder.Token() {
		t.Fatal("the lost lease's key is still in Redis after its Release returned")
	}
	lease := waiter()
	if lease.Token() == holder.Token() {
		t.Fatal("the waiter took the lost lease over")
	}
	if v, _ := admin.Get(ctx, lease.Key()).Result(); v != lease.Token() {
		t.Fatalf("the waiter's lock is not in Redis (value %q)", v)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.Handoffs != 0 {
		t.Fatalf("Handoffs = %d, want 0", s.Handoffs)
	}
	in.settled(t, name)
}

// An expired lease is released to Redis (and reports it), not handed off.
func TestExpiredLeaseIsNotHandedOff(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name), hotspot.WithHandoff(3)}, fastSpin, core.WithTTL(60*time.Millisecond))
	ctx := context.Background()
	holder, waiter := in.queue(t, name)
	time.Sleep(80 * time.Millisecond)
	// On a loaded machine the SET may have reached Redis well after it was
	// sent: wait until the key expired there too.
	waitFor(t, "the lock expired in Redis", func() bool { return in.client.Exists(ctx, holder.Key()).Val() == 0 })
	if err := holder.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Release of an expired lease = %v, want ErrNotHeld", err)
	}
	lease := waiter()
	_ = lease.Release(ctx)
	if lease.Token() == holder.Token() || in.guard.Stats().Handoffs != 0 {
		t.Fatal("an expired lease was handed off")
	}
	in.settled(t, name)
}

// A local lock that is held and waited on stays in the Guard while other
// names churn through it: a new arrival for the held name still waits
// locally, behind the holder and the first waiter.
func TestHeldEntryIsNeverEvicted(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	others := make([]string, 200)
	for i := range others {
		others[i] = fmt.Sprintf("%s/other%d", name, i)
	}
	const capacity = 2
	in := newInstance(t, []hotspot.Option{hotspot.WithCapacity(capacity), hotspot.WithKeys(append(others, name)...)}, fastSpin)
	ctx := context.Background()
	_, release := in.hold(t, name)
	var o redistest.Overlap
	var wg sync.WaitGroup
	arrive := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.once(t, name, &o)
		}()
	}
	arrive()
	in.parked(t, name, 2)
	for _, other := range others {
		lease, err := in.locker.Acquire(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		_ = lease.Release(ctx)
		if s := in.guard.Stats(); s.Size > capacity {
			t.Fatalf("size %d over the capacity %d", s.Size, capacity)
		}
	}
	if s := in.guard.Stats(); s.Evictions != int64(len(others)-1) || s.Bypasses != 0 {
		t.Fatalf("stats %+v, want %d evictions and no bypass", s, len(others)-1)
	}
	in.rt.N.Store(0)
	arrive() // finds the held entry and waits behind the first waiter
	in.parked(t, name, 3)
	if n := in.rt.N.Load(); n != 0 {
		t.Fatalf("a new arrival sent %d commands to Redis while the name was held locally", n)
	}
	release()
	wg.Wait()
	if o.Overlaps() != 0 || o.Entries() != 2 {
		t.Fatalf("entries %d, overlaps %d", o.Entries(), o.Overlaps())
	}
	in.settled(t, name)
}

// When every local lock is in use, a further hot name goes straight to Redis
// rather than growing the Guard.
func TestBypassWhenFull(t *testing.T) {
	leakCheck(t)
	a, b := uniq(t), uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithCapacity(1), hotspot.WithKeys(a, b)})
	_, release := in.hold(t, a)
	lease, err := in.locker.Acquire(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if s := in.guard.Stats(); s.Bypasses != 1 || s.Size != 1 || s.Hits != 1 {
		t.Fatalf("stats %+v, want one hit, one bypass, size 1", s)
	}
	_ = lease.Release(context.Background())
	release()
	in.settled(t, a)
	in.settled(t, b)
}

// The lock is released in Redis before the local lock: a local waiter woken
// by the release finds the name free in Redis at its first attempt. A
// Handler that holds the release up holds both up, before or after the Guard
// among the options alike.
func TestReleaseOrderRedisFirst(t *testing.T) {
	for _, guardFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("guardFirst=%v", guardFirst), func(t *testing.T) {
			leakCheck(t)
			name := uniq(t)
			g := hotspot.New(hotspot.WithKeys(name))
			gate := make(chan struct{})
			slowRelease := core.HandlerFuncs{OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
				<-gate
				return next(ctx, lease)
			}}
			c := shared.Client(t)
			rt := &redistest.RoundTrips{}
			c.AddHook(rt)
			plugins := []core.Handler{g, slowRelease}
			if !guardFirst {
				plugins = []core.Handler{slowRelease, g}
			}
			l := core.New(c, core.WithHandlers(plugins...), fastSpin)
			ctx := context.Background()
			warm, err := core.New(c).Acquire(ctx, uniq(t)) // loads the release script
			if err != nil {
				t.Fatal(err)
			}
			_ = warm.Release(ctx)
			holder, err := l.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				lease, err := l.Acquire(ctx, name)
				if err == nil {
					close(gate) // lets the waiter's own release through
					err = lease.Release(ctx)
				}
				got <- err
			}()
			waitFor(t, "the waiter is on the local lock", func() bool { return g.Waiters(holder.Key()) == 2 })
			released := make(chan error, 1)
			rt.N.Store(0)
			go func() { released <- holder.Release(ctx) }()
			time.Sleep(30 * time.Millisecond) // the holder's release is stuck before Redis
			if n := rt.N.Load(); n != 0 {
				t.Fatalf("the waiter sent %d commands before the holder's lock left Redis", n)
			}
			gate <- struct{}{}
			if err := <-released; err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			// release, then the waiter's SET at its first attempt and its release
			if n := rt.N.Load(); n != 3 {
				t.Fatalf("%d round trips, want 3", n)
			}
		})
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

// A panic during an acquire, in the store below the local lock or in a
// Handler after the lock was taken, leaves the local lock free and nothing
// counted in flight.
func TestPanicReleasesLocalLock(t *testing.T) {
	leakCheck(t)
	var boom atomic.Bool
	afterNext := core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		_, err := next(ctx, req)
		if err == nil && boom.Load() {
			panic("boom")
		}
		return err
	}}
	store := &panickyStore{Store: core.NewRedisStore(shared.Client(t))}
	for _, c := range []struct {
		what    string
		arm     func(bool)
		plugins func(g *hotspot.Guard) []core.Handler
	}{
		{"store", store.boom.Store, func(g *hotspot.Guard) []core.Handler { return []core.Handler{g} }},
		{"handler before the Guard", boom.Store, func(g *hotspot.Guard) []core.Handler { return []core.Handler{afterNext, g} }},
		{"handler after the Guard", boom.Store, func(g *hotspot.Guard) []core.Handler { return []core.Handler{g, afterNext} }},
	} {
		t.Run(c.what, func(t *testing.T) {
			name := uniq(t)
			g := hotspot.New(hotspot.WithKeys(name))
			l := core.NewWithStore(store, core.WithHandlers(c.plugins(g)...), core.WithWait(0))
			c.arm(true)
			func() {
				defer func() {
					if recover() == nil {
						t.Error("no panic")
					}
				}()
				_, _ = l.Acquire(context.Background(), name)
			}()
			c.arm(false)
			lease, err := l.Acquire(context.Background(), name)
			if err != nil {
				t.Fatalf("the local lock stayed taken after a panic: %v", err)
			}
			_ = lease.Release(context.Background())
			if n := g.InFlight(); n != 0 {
				t.Fatalf("%d in flight", n)
			}
			if n := g.Waiters(lease.Key()); n != 0 {
				t.Fatalf("%d on the local lock", n)
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, opts := range [][]hotspot.Option{
		{hotspot.WithCapacity(0)},
		{hotspot.WithHandoff(-1)},
		{hotspot.WithHotPeriod(-time.Second)},
		{hotspot.WithKeys("a", "")},
		{nil},
	} {
		g := hotspot.New(opts...)
		if err := g.Err(); !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("Err = %v, want ErrInvalidOption", err)
		}
		rt := &redistest.RoundTrips{}
		c := shared.Client(t)
		c.AddHook(rt)
		// The Locker reports its Guard's error before any request (the
		// adapters check Locker.Err when they are built).
		for _, opt := range []core.Option{core.WithHandlers(g), core.WithLocalQueue(g)} {
			if err := core.New(c, opt).Err(); !errors.Is(err, core.ErrInvalidOption) {
				t.Fatalf("Err of a Locker with an invalid Guard = %v, want ErrInvalidOption", err)
			}
		}
		_, err := core.New(c, core.WithHandlers(g)).Acquire(context.Background(), uniq(t))
		if !errors.Is(err, core.ErrInvalidOption) || rt.N.Load() != 0 {
			t.Fatalf("Acquire through an invalid Guard = %v after %d commands, want ErrInvalidOption and none", err, rt.N.Load())
		}
		called := false
		next := func(context.Context, *core.AcquireCall) (*core.Lease, error) { called = true; return nil, nil }
		if err := g.Acquire(context.Background(), &core.AcquireCall{}, next); !errors.Is(err, core.ErrInvalidOption) || called {
			t.Fatalf("the Handler method of an invalid Guard = %v (next called: %v), want ErrInvalidOption", err, called)
		}
	}
	if err := hotspot.New().Err(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
}

// The Handler methods only pass through: core.WithHandlers puts a Guard in
// the local-queue slot.
func TestHandlerMethodsPassThrough(t *testing.T) {
	g := hotspot.New()
	errNext := errors.New("next")
	var acquired, released int
	err := g.Acquire(context.Background(), &core.AcquireCall{}, func(context.Context, *core.AcquireCall) (*core.Lease, error) {
		acquired++
		return nil, errNext
	})
	if !errors.Is(err, errNext) || acquired != 1 {
		t.Fatalf("Acquire = %v after %d calls of next, want next's error after one", err, acquired)
	}
	err = g.Release(context.Background(), nil, func(context.Context, *core.Lease) error {
		released++
		return errNext
	})
	if !errors.Is(err, errNext) || released != 1 {
		t.Fatalf("Release = %v after %d calls of next, want next's error after one", err, released)
	}
}

func TestStats(t *testing.T) {
	name := uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(name)})
	_, release := in.hold(t, name)
	release()
	if got, want := in.guard.Stats(), (hotspot.Stats{Hits: 1, Size: 1}); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

// A Locker has one local queue: a second Guard, through either option, is an
// invalid option.
func TestTwoGuardsAreRejected(t *testing.T) {
	a, b := hotspot.New(), hotspot.New()
	c := shared.Client(t)
	for _, opts := range [][]core.Option{
		{core.WithHandlers(a, b)},
		{core.WithHandlers(a), core.WithLocalQueue(b)},
		{core.WithLocalQueue(a), core.WithHandlers(b)},
	} {
		if err := core.New(c, opts...).Err(); !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("a Locker with two Guards: Err = %v, want ErrInvalidOption", err)
		}
	}
}
