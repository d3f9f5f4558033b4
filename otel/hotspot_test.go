package lockotel_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// The hotspot Guard is reported with its typed Stats.
var _ lockotel.Guard = (*hotspot.Guard)(nil)

// orders are the two places of the otel Handler relative to the hotspot
// Guard in core.WithHandlers; what the Handler records must not depend on
// them.
var orders = []struct {
	name    string
	guardIn func(*hotspot.Guard) (before, after []core.Handler)
}{
	{"otel-first", func(g *hotspot.Guard) (before, after []core.Handler) { return nil, []core.Handler{g} }},
	{"guard-first", func(g *hotspot.Guard) (before, after []core.Handler) { return []core.Handler{g}, nil }},
}

// newGuardEnv is newEnv with guard among the handlers, before or after the
// otel Handler as order says.
func newGuardEnv(t *testing.T, order int, guard *hotspot.Guard, opts ...core.Option) *env {
	t.Helper()
	return newSlowGuardEnv(t, order, guard, 0, opts...)
}

// newSlowGuardEnv is newGuardEnv with every store call of the Locker made
// delay longer (none when 0).
func newSlowGuardEnv(t *testing.T, order int, guard *hotspot.Guard, delay time.Duration, opts ...core.Option) *env {
	t.Helper()
	before, after := orders[order].guardIn(guard)
	e := newEnv(t, nil, after, opts...)
	if len(before) > 0 || delay > 0 {
		plugins := append(append(before, e.handler), after...)
		opts := append([]core.Option{core.WithHandlers(plugins...)}, opts...)
		if delay > 0 {
			e.locker = core.NewWithStore(&adaptertest.SlowStore{Store: core.NewRedisStore(e.client), Delay: delay}, opts...)
		} else {
			e.locker = core.New(e.client, opts...)
		}
		if err := e.locker.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// handOnce acquires name in e, parks a second acquire of it on the local
// lock of the Guard in e's Locker (with hand-off on), and releases: the
// second acquire takes the lock over. It returns how long the first acquire
// took.
func handOnce(t *testing.T, e *env, ctx context.Context, name string, hold time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	first, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	type result struct {
		lease *core.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() { // waits locally, then gets the lock handed off
		lease, err := e.locker.Acquire(ctx, name)
		got <- result{lease, err}
	}()
	// Once the waiter is parked on the local lock, the release hands the
	// lease to it for sure, and its local wait includes the sleep.
	deadline := time.Now().Add(10 * time.Second)
	for parkedInGuardWait() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second acquire did not park on the local lock")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(hold)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.lease.Token() != first.Token() {
		t.Fatal("the second acquire did not take the first's lock over")
	}
	if err := r.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return took
}

// TestHotspotGuard puts the real hotspot Guard with local hand-off before or
// after the Handler: a second request for a hot name waits on the local lock
// and takes the lock over without Redis. Either way, the Handler reports the
// local wait and the hand-off, counts one hold per lease (the handed-off one
// included) and observes the Guard.
func TestHotspotGuard(t *testing.T) {
	for i, order := range orders {
		t.Run(order.name, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			name := uniq(t)
			guard := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(3))
			// Every store call takes the delay more: time the first acquire
			// spends past its local turn, which its local wait must not
			// count. The TTL is long enough that the hand-off keeps the first
			// lease's expiry (no compare-and-extend) however long the waiter
			// takes to park.
			const delay = 100 * time.Millisecond
			e := newSlowGuardEnv(t, i, guard, delay, core.WithTTL(time.Minute))
			h := lockotel.New(lockotel.WithMeterProvider(e.mp), lockotel.WithGuard(guard))
			defer h.Close()

			ctx, req := e.request(context.Background())
			took := handOnce(t, e, ctx, name, 30*time.Millisecond)
			req.End()

			spans := e.ended(lockotel.SpanAcquire)
			if len(spans) != 2 {
				t.Fatalf("%d acquire spans, want 2", len(spans))
			}
			// The Locker times the local queue even when its lock is free:
			// the first acquire's local wait is the time of its local turn,
			// which its Acquire took, with the store's delay, and more. One
			// that counted the store's time too would be over took-delay.
			if lw, ok := attr(spans[0], lockotel.LocalWaitKey); ok && lw.AsFloat64() > (took-delay).Seconds() {
				t.Errorf("local wait of the uncontended first acquire = %vs, want at most %v (its Acquire less the store's delay: about none)", lw.AsFloat64(), took-delay)
			}
			if _, ok := attr(spans[0], lockotel.HandedOffKey); ok {
				t.Error("the first acquire, from Redis, is marked handed off")
			}
			w, _ := attr(spans[1], lockotel.WaitKey)
			if lw, _ := attr(spans[1], lockotel.LocalWaitKey); w.AsFloat64() < lw.AsFloat64() {
				t.Errorf("wait %vs < local wait %vs: the wait must include it", w.AsFloat64(), lw.AsFloat64())
			}
			if lw, ok := attr(spans[1], lockotel.LocalWaitKey); !ok || lw.AsFloat64() < 0.03 {
				t.Errorf("local wait = %vs (set %v), want at least the 30ms the first holder kept the name", lw.AsFloat64(), ok)
			}
			if a, _ := attr(spans[1], lockotel.AttemptsKey); a.AsInt64() != 0 {
				t.Errorf("attempts of the handed-off acquire = %d, want 0 (no Redis call)", a.AsInt64())
			}
			if v, ok := attr(spans[1], lockotel.HandedOffKey); !ok || !v.AsBool() {
				t.Error("the acquire that took the lock over is not marked handed off")
			}
			rels := e.ended(lockotel.SpanRelease)
			if len(rels) != 2 {
				t.Fatalf("%d release spans, want 2", len(rels))
			}
			for i, rel := range rels {
				v, _ := attr(rel, lockotel.OutcomeKey)
				_, handed := attr(rel, lockotel.HandedOffKey)
				if v.AsString() != lockotel.OutcomeReleased || handed != (i == 0) {
					t.Errorf("release %d: outcome %q, handed off %v; want released, handed off for the first only", i, v.AsString(), handed)
				}
			}
			rm := e.collect(t)
			if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.OutcomeKey.String(lockotel.OutcomeReleased)); n != 2 {
				t.Errorf("released holds = %d, want 2", n)
			}
			if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
				t.Errorf("leases held = %d at the end, want 0", n)
			}
			stats := guard.Stats()
			if stats.Hits < 2 || stats.Handoffs != 1 {
				t.Fatalf("guard stats %+v: want two local hits and one handoff", stats)
			}
			if n := sum(t, rm, lockotel.MetricHotspotHits); n != stats.Hits {
				t.Errorf("hotspot hits = %d, the Guard says %d", n, stats.Hits)
			}
			if n := sum(t, rm, lockotel.MetricHotspotHandoffs); n != 1 {
				t.Errorf("hotspot handoffs = %d, want 1", n)
			}
			if n := sum(t, rm, lockotel.MetricHotspotSize); n != int64(stats.Size) {
				t.Errorf("hotspot size = %d, the Guard says %d", n, stats.Size)
			}
			e.noName(t, name)
		})
	}
}

// TestLeasesHeldBalancedInAnyOrder runs contending goroutines through a
// Locker with the hotspot Guard (hand-off on) before and after the Handler:
// every acquire, a local hand-off included, has its span and is counted, every
// lease's end too, and reqlock.leases.held is back to 0 at the end, with
// mutual exclusion intact.
func TestLeasesHeldBalancedInAnyOrder(t *testing.T) {
	for i, order := range orders {
		t.Run(order.name, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			name := uniq(t)
			guard := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(2))
			e := newGuardEnv(t, i, guard, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, 2*time.Millisecond), core.WithTTL(time.Minute))
			const goroutines, rounds = 6, 15
			// One hand-off for sure, whatever the scheduler makes of the
			// goroutines below: two acquires and two releases more.
			handOnce(t, e, context.Background(), name, 0)
			var o redistest.Overlap
			var wg sync.WaitGroup
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						ctx, req := e.request(context.Background())
						lease, err := e.locker.Acquire(ctx, name)
						if err != nil {
							t.Error(err)
							req.End()
							return
						}
						exit := o.Enter()
						time.Sleep(200 * time.Microsecond)
						exit()
						if err := lease.Release(ctx); err != nil {
							t.Error(err)
						}
						req.End()
					}
				}()
			}
			wg.Wait()
			if o.Overlaps() != 0 || o.Entries() != goroutines*rounds {
				t.Fatalf("%d overlaps in %d critical sections", o.Overlaps(), o.Entries())
			}
			const n = goroutines*rounds + 2 // handOnce's included
			handoffs := guard.Stats().Handoffs
			if handoffs == 0 {
				t.Fatal("no local handoff: the test did not exercise them")
			}
			count := func(span string) (all, handed int64) {
				for _, s := range e.ended(span) {
					all++
					if v, ok := attr(s, lockotel.HandedOffKey); ok && v.AsBool() {
						handed++
					}
				}
				return all, handed
			}
			acquires, handedIn := count(lockotel.SpanAcquire)
			releases, handedOut := count(lockotel.SpanRelease)
			t.Logf("%d acquires, %d handed over; %d releases, %d handed off; guard %+v", acquires, handedIn, releases, handedOut, guard.Stats())
			if acquires != n || releases != n {
				t.Errorf("%d acquire spans and %d release spans for %d acquires and releases", acquires, releases, n)
			}
			if handedIn != handoffs || handedOut != handoffs {
				t.Errorf("spans marked handed off: %d acquires, %d releases; the Guard counted %d handoffs", handedIn, handedOut, handoffs)
			}
			rm := e.collect(t)
			acquired := lockotel.OutcomeKey.String(lockotel.OutcomeAcquired)
			if got := histCount(t, rm, lockotel.MetricAcquireDuration, acquired); got != n {
				t.Errorf("acquire durations = %d, want %d", got, n)
			}
			if got := sum(t, rm, lockotel.MetricAcquires, acquired); got != n {
				t.Errorf("acquires = %d, want %d", got, n)
			}
			if got := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.OutcomeKey.String(lockotel.OutcomeReleased)); got != n {
				t.Errorf("hold durations = %d, want %d", got, n)
			}
			if got := sum(t, rm, lockotel.MetricLeasesHeld); got != 0 {
				t.Errorf("leases held = %d at the end, want 0", got)
			}
			e.noName(t, name)
		})
	}
}

// parkedInGuardWait counts the goroutines of the process blocked in the
// select of the hotspot Guard's wait for a local lock, from a dump of their
// stacks: the Guard exports no hook for tests.
func parkedInGuardWait() int {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	parked := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "hotspot.(*Guard).wait(") {
			parked++
		}
	}
	return parked
}
