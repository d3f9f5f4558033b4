package lockotel_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// The hotspot Guard is reported without lockotel importing hotspot.
var _ lockotel.Guard = (*hotspot.Guard)(nil)

// TestHotspotGuard puts the real hotspot Guard after the Handler, with local
// handoff: a second request for a hot name waits on the local lock and takes
// the lock over without Redis. The Handler reports the local wait, counts one
// hold per lease (the handed-off one included) and observes the Guard.
func TestHotspotGuard(t *testing.T) {
	adaptertest.LeakCheck(t)
	name := uniq(t)
	guard := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(3))
	e := newEnv(t, nil, []core.Handler{guard})
	h := lockotel.New(lockotel.WithMeterProvider(e.mp), lockotel.WithGuard(guard))
	defer h.Close()

	ctx, req := e.request(context.Background())
	first, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *core.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() { // waits locally, then gets the lock handed over
		lease, err := e.locker.Acquire(ctx, name)
		got <- result{lease, err}
	}()
	// Once the waiter is parked on the local lock, the release hands the
	// lease to it for sure, and its local wait includes the sleep.
	deadline := time.Now().Add(5 * time.Second)
	for parkedInGuardWait() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second acquire did not park on the local lock")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(30 * time.Millisecond)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	spans := e.ended(lockotel.SpanAcquire)
	if len(spans) != 2 {
		t.Fatalf("%d acquire spans, want 2", len(spans))
	}
	if lw, ok := attr(spans[0], lockotel.LocalWaitKey); ok {
		t.Errorf("local wait of the uncontended first acquire = %vs, want none", lw.AsFloat64())
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
	if n := len(e.ended(lockotel.SpanRelease)); n != 2 {
		t.Errorf("%d release spans, want 2", n)
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
