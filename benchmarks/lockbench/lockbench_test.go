package lockbench

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
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

// A small run of every implementation in every scenario, without delay:
// the workers start, every acquire succeeds without overlap, the counts add
// up, and the tables and the chart have a row for each implementation.
func TestSmallRun(t *testing.T) {
	p := DefaultParams()
	p.Procs, p.Goroutines, p.Attempts = 2, 3, 6
	p.HotProcs, p.HotGoroutines, p.HotFor = 2, 2, 300*time.Millisecond
	p.SoloOps = 10
	p.ScaleProcs, p.ScaleGoroutines, p.ScaleAttempts = 2, []int{1, 3}, 4
	p.ScaleFor = time.Minute // a limit only: the quota ends each level, however slow the machine
	p.RTT = 0
	var log strings.Builder
	all := AllScenarios
	all.Stores = false // TestStoresRun
	rep, err := Run(context.Background(), p, Impls, all, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(Impls) || len(rep.Hot) != len(Impls) || len(rep.Solo) != len(Impls) || len(rep.Scale) != 2*len(Impls) {
		t.Fatalf("%d, %d, %d and %d results for %d implementations", len(rep.Results), len(rep.Hot), len(rep.Solo), len(rep.Scale), len(Impls))
	}
	// Every reqlock variant takes every lock. A peer may time out now and
	// then: rueidislock's waiters can miss a wake-up (they have no timer to
	// fall back on) and sleep through the whole wait budget.
	failedOK := func(name string, failed, attempts int) bool {
		impl, _ := find(name)
		return failed == 0 || impl.Peer && failed*4 <= attempts
	}
	for _, r := range rep.Results {
		if r.Attempts != 12 || r.Succeeded+r.Failed != 12 || !failedOK(r.Impl, r.Failed, 12) || r.Overlaps != 0 || r.ReleaseErrors != 0 {
			t.Errorf("contention: %s: %+v", r.Impl, r)
		}
		if r.SETs < 1 || r.RoundTrips < 1 || r.WaitP99 < r.WaitP50 || r.Commands["set"] != r.SETs {
			t.Errorf("contention: %s: implausible counts %+v", r.Impl, r)
		}
	}
	// The round trips the clients counted are the commands Redis executed:
	// top-level SETs and scripts, and the subscription commands; the peers
	// that SET inside a script, and the fair queue, send nothing but
	// scripts. reqlock sends both: its attempts are native SETs (SET NX
	// PX, then SET NX PX GET; a script with a SET inside, acquire.lua or
	// acquire_waiting.lua, only on a server before Redis 7.0 or where
	// shared holders hold the name, never here), and a release is a script
	// that DELs the key it held; so its top-level SETs are its SETs less
	// its scripts that were not releases. (rueidislock extends a lock held
	// long, on a slow machine, with a script too: its PEXPIREAT runs inside
	// that script.)
	scripted := map[string]bool{"bsm/redislock": true, "rueidislock": true}
	for _, r := range rep.Results {
		server := r.Scripts + pubsubCalls(r.Commands)
		switch {
		case scripted[r.Impl] || strings.Contains(r.Impl, "fair"):
		case strings.HasPrefix(r.Impl, "reqlock"):
			server += r.SETs - (r.Scripts - r.Commands["del"])
		default:
			server += r.SETs
		}
		// A client counts a command that its context cut before it was
		// written, which Redis never ran: only an acquire whose wait budget
		// ran out has any (bsm/redislock's last script; go-redis/redsync's
		// last SET and the release it sends after a failed try), and
		// rueidislock's also an extension its holder's release cut (its
		// monitor picks a pending invalidation over the cancelled
		// context). So the clients count what Redis ran, never fewer, and
		// at most that many more.
		cut := 2 * int64(r.Failed)
		if r.Impl == "rueidislock" {
			cut += int64(r.Succeeded)
		}
		if r.RoundTrips < server || r.RoundTrips > server+cut {
			t.Errorf("contention: %s: the clients counted %d round trips, Redis %d commands (%d failed acquires): %v", r.Impl, r.RoundTrips, server, r.Failed, r.Commands)
		}
	}
	if plain := rep.Results[0]; plain.SETs < int64(plain.Succeeded) || plain.Scripts != int64(plain.Succeeded) || plain.Counters != nil {
		t.Errorf("plain-spin: %d SETs and %d scripts for %d acquires, counters %v", plain.SETs, plain.Scripts, plain.Succeeded, plain.Counters)
	}
	for _, r := range rep.Hot {
		// Every goroutine makes an attempt, but on a busy machine none may
		// take the lock within HotFor (Acquires counts those that did).
		if r.SuccessesAll < 1 || r.SuccessesAll < r.Acquires || !failedOK(r.Impl, r.Failed, r.SuccessesAll) || r.Overlaps != 0 || r.ReleaseErrors != 0 || r.RoundTrips < 1 {
			t.Errorf("hot: %s: %+v", r.Impl, r)
		}
		if r.Handovers > max(r.Acquires-1, 0) || (r.LocalHandoffs > 0 && !strings.Contains(r.Impl, "handoff")) {
			t.Errorf("hot: %s: %d hand-offs between processes and %d local hand-offs for %d acquires", r.Impl, r.Handovers, r.LocalHandoffs, r.Acquires)
		}
	}
	for _, r := range rep.Solo {
		// Every implementation takes an uncontended lock in one round trip
		// and gives it back in another.
		if r.Ops != 10 || r.Failed != 0 || r.RoundTrips != 20 || r.Mallocs == 0 || r.P99 < r.P50 {
			t.Errorf("uncontended: %s: %+v", r.Impl, r)
		}
	}

	for _, r := range rep.Scale {
		if r.Contenders != 2*r.Goroutines || r.Attempts != 2*p.ScaleQuota(r.Goroutines) || !failedOK(r.Impl, r.Failed, r.Attempts) || r.Overlaps != 0 || r.ReleaseErrors != 0 || r.RoundTrips < 1 {
			t.Errorf("scaling: %s: %+v", r.Impl, r)
		}
		if r.WaitP50 > r.WaitP99 || r.WaitP99 > r.WaitMax || r.Wall <= 0 {
			t.Errorf("scaling: %s: implausible waits %+v", r.Impl, r)
		}
	}

	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, impl := range Impls {
		want := 5 // a row per scenario (two for scaling), and one in the comparison for peers
		if impl.Peer {
			want++
		}
		if n := strings.Count(md.String(), "| "+impl.Name+" |"); n != want {
			t.Errorf("%s has %d rows in the tables, want %d:\n%s", impl.Name, n, want, md.String())
		}
	}
	var chart bytes.Buffer
	if err := rep.WriteChart(&chart); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&chart)
	if err != nil {
		t.Fatal(err)
	}
	if h := img.Bounds().Dy(); h != chartTop+len(Impls)*rowHeight+chartBottom {
		t.Errorf("the chart is %d pixels high for %d rows", h, len(Impls))
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

// Handovers count the changes of process in the order the lock was taken,
// whatever order the reports list the takes in.
func TestMergeHotHandovers(t *testing.T) {
	p := DefaultParams()
	p.HotFor = 2 * time.Second
	run := workerRun{
		reports: []*report{
			{Succeeded: 4, Acquired: []int64{10, 20, 50, 60}, Waits: []time.Duration{1, 2, 3, 4}, Counters: map[string]int64{"handoffs": 2}},
			{Succeeded: 2, Acquired: []int64{40, 30}, Waits: []time.Duration{5, 6}, RoundTrips: 3},
		},
		commands: map[string]int64{"subscribe": 1, "unsubscribe": 1},
	}
	// Taken in the order 0 0 1 1 0 0: two hand-offs.
	r := mergeHot("x", p, run)
	if r.Acquires != 6 || r.SuccessesAll != 6 || r.Handovers != 2 || r.LocalHandoffs != 2 || r.RoundTrips != 5 {
		t.Fatalf("%+v", r)
	}
	if got := r.PerSecond(int64(r.Acquires)); got != 3 {
		t.Fatalf("%v acquires per second, want 3", got)
	}
	if r.WaitP50 != 3 || r.WaitP99 != 6 {
		t.Fatalf("waits p50 %v p99 %v", r.WaitP50, r.WaitP99)
	}
}

// The comparison takes the peers only, and tells a win from a loss.
func TestVerdicts(t *testing.T) {
	rep := &Report{Results: []Result{
		{Impl: Impls[0].Name, Succeeded: 10, RoundTrips: 30, WaitP99: 40 * time.Millisecond, Wall: 2 * time.Second},
		{Impl: "reqlock", Succeeded: 10, RoundTrips: 1, WaitP99: time.Millisecond, Wall: time.Second},
		{Impl: Best, Succeeded: 10, RoundTrips: 5, WaitP99: 80 * time.Millisecond, Wall: time.Second},
	}}
	vs := rep.Verdicts(Best)
	if len(vs) != 3 {
		t.Fatalf("%d verdicts, want 3 (one peer × 3 metrics): %+v", len(vs), vs)
	}
	if vs[0].Metric != "wait p99" || vs[0].Beats() || vs[0].Factor() != 2 {
		t.Errorf("wait p99: %+v beats %v factor %v", vs[0], vs[0].Beats(), vs[0].Factor())
	}
	if !vs[1].Beats() || vs[1].Factor() != 0.5/3 || !vs[2].Beats() {
		t.Errorf("round trips and wall time: %+v", vs[1:])
	}
	if rep.Verdicts("nope") != nil || (&Report{}).Comparison(Best) != "" {
		t.Error("a comparison without the best variant")
	}
	if !strings.Contains(rep.Comparison(Best), "| "+Impls[0].Name+" | 40.0 ms → 80.0 ms (0.50×) |") {
		t.Errorf("comparison:\n%s", rep.Comparison(Best))
	}
	if got := vs[0].String(); got != "wait p99 40.0 ms → 80.0 ms, 2.00× higher: loses by 100%" {
		t.Errorf("a loss reads %q", got)
	}
	if got := vs[2].String(); got != "wall time 2.00 s → 1.00 s, 2.00× lower" {
		t.Errorf("a win reads %q", got)
	}
}

// The scaling chart has a legend row per three implementations and draws
// the best setting's line.
func TestScaleChart(t *testing.T) {
	rep := &Report{Params: DefaultParams(), Redis: "7.0.0", MeasuredRTT: 2 * time.Millisecond}
	for i, impl := range Impls {
		for _, g := range rep.Params.ScaleGoroutines {
			n := rep.Params.ScaleProcs * g
			rep.Scale = append(rep.Scale, ScaleResult{Impl: impl.Name, Goroutines: g, Contenders: n, Succeeded: 300,
				RoundTrips: int64(300 * (i + 1) * n / 10), WaitP99: time.Duration(n*(i+1)) * time.Millisecond})
		}
	}
	var b bytes.Buffer
	if err := rep.WriteScaleChart(&b); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("LOCKBENCH_CHART"); path != "" {
		_ = os.WriteFile(path, b.Bytes(), 0o644)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h := img.Bounds().Dy(); h != scaleChartHeight(len(Impls)) {
		t.Errorf("the chart is %d pixels high for %d implementations", h, len(Impls))
	}
	best := 0
	for y := range img.Bounds().Dy() {
		for x := range img.Bounds().Dx() {
			if r, g, bl, _ := img.At(x, y).RGBA(); r>>8 == uint32(colBest.R) && g>>8 == uint32(colBest.G) && bl>>8 == uint32(colBest.B) {
				best++
			}
		}
	}
	if best < 500 {
		t.Errorf("%d pixels of the best setting's colour", best)
	}
	if err := (&Report{}).WriteScaleChart(&b); err == nil {
		t.Error("a chart without results")
	}
}

// The targets compare the best setting with the best peer on each metric
// and check the scaling rows' growth.
func TestTargets(t *testing.T) {
	rep := &Report{Params: DefaultParams(), Results: []Result{
		{Impl: "plain-spin", Succeeded: 100, RoundTrips: 500, WaitP99: 300 * time.Millisecond, Wall: 10 * time.Second},
		{Impl: "rueidislock", Succeeded: 100, RoundTrips: 400, WaitP99: 200 * time.Millisecond, Wall: 12 * time.Second},
		{Impl: Fair, Succeeded: 100, RoundTrips: 230},
		{Impl: Best, Succeeded: 100, RoundTrips: 80, WaitP99: 80 * time.Millisecond, Wall: 5 * time.Second},
	}}
	for i, g := range rep.Params.ScaleGoroutines {
		n := rep.Params.ScaleProcs * g
		rep.Scale = append(rep.Scale,
			ScaleResult{Impl: Fair, Contenders: n, Succeeded: 100, RoundTrips: int64(200 + 100*i), WaitP99: time.Duration(n) * time.Millisecond},
			ScaleResult{Impl: Best, Contenders: n, Succeeded: 100, RoundTrips: 80, WaitP99: time.Duration(n*n) * time.Millisecond})
	}
	want := map[string]bool{
		"p99":            false, // 80 ms over rueidislock's 200 ms: 0.40×
		"wall":           true,  // 5 s over plain-spin's 10 s: 0.5×
		"rt":             true,
		"fairrt":         false, // 2.3
		"linear:" + Fair: true,
		"flat:" + Fair:   false, // 5.0 over 2.0
		"linear:" + Best: false, // quadratic
		"flat:" + Best:   true,
	}
	got := rep.Targets()
	if len(got) != len(want) {
		t.Fatalf("%d targets: %+v", len(got), got)
	}
	for _, tg := range got {
		if met, ok := want[tg.ID]; !ok || tg.Met() != met || tg.Missing {
			t.Errorf("%s: met %v, want %v: %+v", tg.ID, tg.Met(), met, tg)
		}
	}
	if p99, _ := rep.Target("p99"); p99.Bound != 70*time.Millisecond || !strings.Contains(p99.Measured, "rueidislock") || p99.Verdict() != "missed by 14% (1.14× the limit)" {
		t.Errorf("p99: %+v, %s", p99, p99.Verdict())
	}
	if !rep.Missed("p99") || rep.Missed("wall") || rep.Missed("nope") {
		t.Error("Missed")
	}
	if rep.RoundFloor() != 24 || rep.WallFloor() != 2700 || rep.Rounds() != 300 {
		t.Errorf("floors %d %d, rounds %d", rep.RoundFloor(), rep.WallFloor(), rep.Rounds())
	}
}
