package family

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
)

// TestExperimentsHoldTheirModes runs each experiment small, on a
// redis-server without a delay: shared holders run together, permit
// holders stay in distinct slots, and AcquireAll never fails nor lets two
// holders of one name in. (Throughput is the benchmark's, never asserted.)
func TestExperimentsHoldTheirModes(t *testing.T) {
	srv := redistest.Start(t)
	p := DefaultParams()
	p.Cycles, p.Critical, p.Wait = 3, time.Millisecond, 20*time.Second
	e := &env{p: p, addr: srv.Addr()}
	ctx := context.Background()
	check := func(r Row, err error) Row {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if r.Overlaps != 0 || r.Failed != 0 {
			t.Fatalf("%s %s: %d overlaps, %d failed", r.Experiment, r.Config, r.Overlaps, r.Failed)
		}
		return r
	}
	check(e.readers(ctx, 4, true))
	if r := check(e.readers(ctx, 4, false)); r.MaxInside != 1 {
		t.Fatalf("exclusive readers: %d inside at once", r.MaxInside)
	}
	if r := check(e.stock(ctx, 5)); r.MaxInside > 5 {
		t.Fatalf("Permits(5): %d inside at once", r.MaxInside)
	}
	check(e.multi(ctx, 2, allAtomic))
	check(e.multi(ctx, 3, allOneByOne))
}
