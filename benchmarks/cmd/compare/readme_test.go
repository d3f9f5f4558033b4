package main

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/benchmarks/lockbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README template renders a report: every table, the chart link and the
// verdict of each comparison, a loss named as such.
func TestReadme(t *testing.T) {
	rep := &lockbench.Report{Params: lockbench.DefaultParams(), Machine: lockbench.ThisMachine(), Redis: "7.0.0", Date: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), MeasuredRTT: 2 * time.Millisecond}
	for _, impl := range lockbench.Impls {
		r := lockbench.Result{Impl: impl.Name, Succeeded: 1200, RoundTrips: 6000, Wall: 10 * time.Second, WaitP50: 40 * time.Millisecond, WaitP99: 200 * time.Millisecond}
		if impl.Name == lockbench.Best {
			r.RoundTrips, r.Wall, r.WaitP99 = 2000, 5*time.Second, 220*time.Millisecond
		}
		rep.Results = append(rep.Results, r)
		rep.Hot = append(rep.Hot, lockbench.HotResult{Impl: impl.Name, For: 5 * time.Second, Acquires: 500})
		rep.Solo = append(rep.Solo, lockbench.SoloResult{Impl: impl.Name, Ops: 500, RoundTrips: 1000})
	}
	var b strings.Builder
	if err := writeReadme(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"go run ./cmd/compare -write",
		"](" + chartFile + ")",
		"## The contention experiment", "## A continuous hot key", "## Uncontended", "## Implementations",
		"2026-01-02", "redis-server 7.0.0",
		"- **bsm/redislock**: wait p99 200.0 ms → 220.0 ms, 1.10× higher: loses by 10%; round trips / success 5.00 → 1.67, 3.00× lower; wall time 10.00 s → 5.00 s, 2.00× lower.",
		"Lost: 4 of 12 comparisons",
		"loses on wait p99 in this run",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the README lacks %q", want)
		}
	}
	if strings.Contains(out, "<no value>") {
		t.Error("the README has an empty template field")
	}
}
