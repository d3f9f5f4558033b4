package seed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	RunWorkerIfChild() // the runner starts this test binary again as its workers
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// A small run of every implementation: the workers start, every acquire
// succeeds without overlap, and the counts add up.
func TestSmallRun(t *testing.T) {
	p := SeedParams()
	p.Procs, p.Goroutines, p.Attempts = 2, 3, 6
	var log strings.Builder
	rep, err := Run(context.Background(), p, Impls, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(Impls) {
		t.Fatalf("%d results for %d implementations", len(rep.Results), len(Impls))
	}
	for _, r := range rep.Results {
		if r.Attempts != 12 || r.Succeeded != 12 || r.Failed != 0 || r.Overlaps != 0 || r.ReleaseErrors != 0 {
			t.Errorf("%s: %+v", r.Impl, r)
		}
		if r.SETs < 1 || r.RoundTrips < 1 || r.WaitP99 < r.WaitP50 {
			t.Errorf("%s: implausible counts %+v", r.Impl, r)
		}
	}
	if plain := rep.Results[0]; plain.SETs < int64(plain.Succeeded) || plain.Counters != nil {
		t.Errorf("the plain Locker: %d SETs for %d acquires, counters %v", plain.SETs, plain.Succeeded, plain.Counters)
	}
	var table strings.Builder
	if err := rep.WriteMarkdown(&table); err != nil {
		t.Fatal(err)
	}
	for _, impl := range Impls {
		if !strings.Contains(table.String(), "| "+impl.Name+" |") {
			t.Errorf("the table has no row for %s:\n%s", impl.Name, table.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 50), percentile(d, 99); p50 != 100 || p99 != 198 {
		t.Fatalf("p50 %v p99 %v, want 100 and 198", p50, p99)
	}
	if percentile(nil, 50) != 0 || percentile(d[:1], 99) != 1 {
		t.Fatal("edge cases")
	}
}

func TestLookup(t *testing.T) {
	if got, err := Lookup(""); err != nil || len(got) != len(Impls) {
		t.Fatalf("Lookup(\"\") = %d, %v", len(got), err)
	}
	if got, err := Lookup(Impls[1].Name); err != nil || len(got) != 1 || got[0].Name != Impls[1].Name {
		t.Fatalf("Lookup one = %v, %v", got, err)
	}
	if _, err := Lookup("nope"); err == nil {
		t.Fatal("an unknown implementation was accepted")
	}
}
