package scale

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/internal/redistest"
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

// smallParams is a run of seconds: every section, a few contenders, short
// runs, a wait budget long enough that no acquire runs out of it.
func smallParams(t *testing.T) Params {
	p := DefaultParams()
	p.MiddlewareRounds = 1
	p.Load = Load{Lockers: 2, Goroutines: 3, Names: 100, For: 300 * time.Millisecond}
	p.Shape.Wait = 10 * time.Second
	p.MemoryLocks = 10
	p.ConsensusLoad = Load{Lockers: 2, Goroutines: 2, Names: 100, For: 300 * time.Millisecond}
	p.Contention = Contention{Lockers: 2, Goroutines: 3, For: 300 * time.Millisecond}
	// A floor, a reqlock with a Guard and a peer: every kind of contender
	// in worker processes (TestSmallRunInProcess runs them all).
	p.Variants = []string{Floor, "reqlock+hotspot+handoff3", "bsm/redislock"}
	if testing.Short() {
		p.Sections = []string{"middleware", "names", "memory", "cluster", "handover"}
	}
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "20x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("test.benchtime", old) })
	return p
}

// A small run of every section (etcd and ZooKeeper left out with -short):
// every figure is there and finite, no lock overlapped, and the counts add
// up: attempts are successes plus failures, the Lockers' cycles sum to the
// total, the floor's commands match its cycles one for one on every
// primary taken together, the hand-over gaps number one less than the
// critical sections, the name is held at most the wall time.
func TestSmallRun(t *testing.T) {
	p := smallParams(t)
	var log strings.Builder
	rep, err := Run(context.Background(), p, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	if len(rep.Middleware) != 12 {
		t.Errorf("%d middleware results, want 3 servers × 3 modes and 3 bare commands", len(rep.Middleware))
	}
	for _, m := range rep.Middleware {
		if m.N != 20 || !(m.NsOp > 0) || m.Allocs < 0 || m.Bytes < 0 || m.Impl != string(Bare) && m.Allocs == 0 {
			t.Errorf("middleware %s %s: %+v", m.Server, m.Impl, m)
		}
	}
	for _, s := range []string{"gin", "net/http", "gRPC unary"} {
		if q, ok := rep.MiddlewareRatio(s); !ok || !finite(q) || q <= 0 {
			t.Errorf("middleware %s: ratio %v, %v", s, q, ok)
		}
	}

	cluster := fmt.Sprintf("cluster of %d", p.Primaries)
	if want := 2 * 2 * len(p.Variants); len(rep.Names) != want {
		t.Fatalf("%d many-names results, want %d", len(rep.Names), want)
	}
	for _, n := range rep.Names {
		primaries := 1
		if n.Target == cluster {
			primaries = p.Primaries
		}
		checkNames(t, rep, n, primaries)
	}

	if len(rep.Memory) != 5 {
		t.Errorf("%d memory results, want 5", len(rep.Memory))
	}
	for _, m := range rep.Memory {
		if !(m.Bytes > 0) || m.Keys < 1 {
			t.Errorf("memory %s %s: %+v", m.Impl, m.What, m)
		}
	}

	if !testing.Short() {
		if len(rep.Consensus) != 4 {
			t.Errorf("%d etcd and ZooKeeper results, want 4", len(rep.Consensus))
		}
		for _, c := range rep.Consensus {
			if c.Cycles.Total == 0 || c.Cycles.Total+c.Cycles.Failed != c.Cycles.Attempts || c.Cycles.Overlaps != 0 {
				t.Errorf("%s × %d: %+v", c.Store, c.Members, c.Cycles)
			}
		}
	}

	if len(rep.Handover) != len(HandoverVariants) {
		t.Fatalf("%d hand-over results, want %d", len(rep.Handover), len(HandoverVariants))
	}
	for _, h := range rep.Handover {
		checkHandover(t, h)
	}

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{"## Middleware at the cost of its commands", "## Many names", "## Memory", "## Redis Cluster", "**Model.**", "## The hand-over gap", "| gin |", "| net/http |", "| gRPC unary |", "| bsm/redislock |", "| go-redsync/redsync |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "%!"} {
		if strings.Contains(out, bad) {
			t.Errorf("the report has %q:\n%s", bad, out)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// The many-names and hand-over runs with every Locker in this process:
// the same accounting.
func TestSmallRunInProcess(t *testing.T) {
	p := smallParams(t)
	p.Processes = false
	p.Variants = NamesVariants
	p.Sections = []string{"names", "handover"}
	rep, err := Run(context.Background(), p, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(NamesVariants); len(rep.Names) != want || len(rep.Handover) != len(HandoverVariants) {
		t.Fatalf("%d many-names and %d hand-over results", len(rep.Names), len(rep.Handover))
	}
	for _, n := range rep.Names {
		checkNames(t, rep, n, 1)
	}
	for _, h := range rep.Handover {
		checkHandover(t, h)
	}
}

// checkNames checks one many-names result: its cycles add up over the
// Lockers and attempts, nothing failed or overlapped, the primaries'
// commands add up, the floor's match its cycles, every figure is finite.
func checkNames(t *testing.T, rep *Report, n NamesResult, primaries int) {
	t.Helper()
	what := n.Target + ", " + n.Dist + ", " + n.Variant
	c := n.Cycles
	var sum int64
	for _, k := range c.PerLocker {
		sum += k
	}
	if len(c.PerLocker) != rep.Params.Load.Lockers || sum != c.Total || c.Total+c.Failed != c.Attempts || c.Total == 0 {
		t.Errorf("%s: the cycles do not add up: %+v", what, c)
	}
	if c.Failed != 0 || c.Overlaps != 0 || c.ReleaseErrors != 0 {
		t.Errorf("%s: %d failed, %d overlaps, %d release errors: %v", what, c.Failed, c.Overlaps, c.ReleaseErrors, c.Errors)
	}
	if processCPU() > 0 && (c.ClientCPU <= 0 || c.ClientCPU > time.Duration(len(c.PerLocker)+1)*c.Wall*time.Duration(max(runtime.NumCPU(), 1))) {
		t.Errorf("%s: client CPU %v over %v on %d cores", what, c.ClientCPU, c.Wall, runtime.NumCPU())
	}
	if len(n.Primaries) != primaries || len(n.IdleCPU) != primaries {
		t.Errorf("%s: %d primaries' statistics and %d idle CPUs, want %d", what, len(n.Primaries), len(n.IdleCPU), primaries)
	}
	s := n.Server()
	var calls int64
	for _, pr := range n.Primaries {
		calls += pr.totalCalls()
	}
	if calls != s.totalCalls() || s.totalCalls() < 2*c.Total || s.CPU < 0 {
		t.Errorf("%s: %d lock commands over the primaries, %d in sum, for %d cycles; CPU %v", what, calls, s.totalCalls(), c.Total, s.CPU)
	}
	if n.Variant == Floor {
		// One SET per try, one compare-and-delete (EVALSHA, whose GET and
		// DEL Redis counts too) per cycle, nothing else.
		if s.Calls["evalsha"] != c.Total || s.Calls["get"] != c.Total || s.Calls["del"] != c.Total || s.Calls["set"] < c.Total || len(s.Calls) != 4 {
			t.Errorf("%s: the floor's commands do not match its %d cycles: %v", what, c.Total, s.Calls)
		}
	}
	if q, ok := rep.FloorRatio(n); !ok || !finite(q) || q <= 0 {
		t.Errorf("%s: ratio to the floor %v, %v", what, q, ok)
	}
	calls1, cpu1 := n.Spread()
	if per, total := n.Model(primaries); !finite(calls1) || !finite(cpu1) || !finite(per) || !finite(total) {
		t.Errorf("%s: spread %v %v, model %v %v", what, calls1, cpu1, per, total)
	}
	if strings.Contains(n.Variant, "hotspot") != (n.Guard != nil) {
		t.Errorf("%s: guard counters %v", what, n.Guard)
	}
}

// checkHandover checks one hand-over result: attempts are cycles and
// failures, the gaps number one less than the critical sections, nothing
// overlapped, the name was held at most the wall time.
func checkHandover(t *testing.T, h HandoverResult) {
	t.Helper()
	if h.Cycles == 0 || int64(len(h.Cross)+len(h.Local)) != h.Cycles-1 || h.Cycles+h.Failed != h.Attempts || h.Overlaps != 0 {
		t.Errorf("hand-over %s: %d cycles, %d + %d gaps, %d failed of %d, %d overlaps", h.Variant, h.Cycles, len(h.Cross), len(h.Local), h.Failed, h.Attempts, h.Overlaps)
	}
	if s := h.HeldShare(); !(s > 0 && s <= 1) || h.RTT <= 0 {
		t.Errorf("hand-over %s: held %.3f of the wall time, round trip %v", h.Variant, s, h.RTT)
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// The gaps between consecutive holds are split by Locker, in start order
// whatever the order recorded, and the holds are summed.
func TestGaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	holds := []hold{
		{locker: 1, start: at(20), finish: at(25)},
		{locker: 0, start: at(0), finish: at(10)},
		{locker: 0, start: at(12), finish: at(15)},
	}
	cross, local, held := gaps(holds)
	if len(cross) != 1 || cross[0] != 5*time.Millisecond || len(local) != 1 || local[0] != 2*time.Millisecond || held != 18*time.Millisecond {
		t.Fatalf("cross %v, local %v, held %v", cross, local, held)
	}
}

// The redis-server's statistics are read and differenced, the harness's
// own commands left out.
func TestServerStats(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	before, err := readStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Do(ctx, "NOSUCHCOMMAND").Err()
	after, err := readStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	d := after.sub(before)
	if d.Calls["set"] != 3 || d.totalCalls() != 3 || d.Errors["ERR"] != 1 || d.CPU < 0 {
		t.Fatalf("%+v", d)
	}
}

// The middleware ratio is the median of the ratios within each round, in
// which locked and by hand ran side by side: a round on a slower machine
// moves both.
func TestMiddlewareRatioPairsRounds(t *testing.T) {
	r := &Report{Middleware: []MiddlewareResult{
		{Server: "gin", Impl: string(Locked), NsOp: 200, Rounds: []float64{110, 200, 330}},
		{Server: "gin", Impl: string(ByHand), NsOp: 200, Rounds: []float64{100, 200, 300}},
	}}
	if q, ok := r.MiddlewareRatio("gin"); !ok || math.Abs(q-1.1) > 1e-9 {
		t.Errorf("paired ratio %v, %v; want 1.1 (the medians alone give 1.0)", q, ok)
	}
	r.Middleware[0].Rounds = nil
	if q, ok := r.MiddlewareRatio("gin"); !ok || q != 1 {
		t.Errorf("ratio without rounds %v, %v; want the medians' 1", q, ok)
	}
}
