package scale

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Targets of issue 24.
const (
	TargetMiddleware = 1.10 // locked request ÷ by hand, at most
	TargetNames      = 0.9  // cycles/s ÷ floor, at least (uniform; Zipf without the guard)
	TargetZipfGuard  = 1.5  // cycles/s ÷ floor on Zipf with the guard, at least
	TargetSpread     = 0.10 // per-primary commands and CPU within ±10 % of their mean
	TargetClusterCPU = 1.1  // Redis CPU per cycle, cluster ÷ single, at most
)

// MiddlewareRatio is the locked request's time over the by-hand one's for
// server, and whether both ran: the median over the rounds of the ratio
// within each round, in which the two ran side by side, so that a drift
// of the machine's load between rounds cancels out (the medians of each
// alone when the rounds are missing).
func (r *Report) MiddlewareRatio(server string) (float64, bool) {
	locked, hand := r.middleware(server, string(Locked)), r.middleware(server, string(ByHand))
	if locked == nil || hand == nil || hand.NsOp == 0 {
		return 0, false
	}
	if len(locked.Rounds) == 0 || len(locked.Rounds) != len(hand.Rounds) {
		return locked.NsOp / hand.NsOp, true
	}
	q := make([]float64, len(locked.Rounds))
	for i := range q {
		if hand.Rounds[i] == 0 {
			return 0, false
		}
		q[i] = locked.Rounds[i] / hand.Rounds[i]
	}
	sort.Float64s(q)
	if n := len(q); n%2 == 0 {
		return (q[n/2-1] + q[n/2]) / 2, true
	}
	return q[len(q)/2], true
}

func (r *Report) middleware(server, impl string) *MiddlewareResult {
	for i := range r.Middleware {
		if m := &r.Middleware[i]; m.Server == server && m.Impl == impl {
			return m
		}
	}
	return nil
}

// names finds the many-names run of target, dist and variant.
func (r *Report) names(target, dist, variant string) *NamesResult {
	for i := range r.Names {
		if n := &r.Names[i]; n.Target == target && n.Dist == dist && n.Variant == variant {
			return n
		}
	}
	return nil
}

// FloorRatio is a many-names run's cycles per second over the floor's in
// the same target and distribution.
func (r *Report) FloorRatio(n NamesResult) (float64, bool) {
	f := r.names(n.Target, n.Dist, Floor)
	if f == nil || f.Cycles.PerSecond() == 0 {
		return 0, false
	}
	return n.Cycles.PerSecond() / f.Cycles.PerSecond(), true
}

// CPUPerCycle is the Redis CPU (INFO cpu, every primary, net of its CPU
// at rest) per lock cycle.
func (n NamesResult) CPUPerCycle() time.Duration {
	if n.Cycles.Total == 0 {
		return 0
	}
	return time.Duration(sum(n.NetCPU()) / float64(n.Cycles.Total) * 1e9)
}

// ClientCPUPerCycle is the contenders' processes' CPU per lock cycle.
func (n NamesResult) ClientCPUPerCycle() time.Duration {
	if n.Cycles.Total == 0 {
		return 0
	}
	return n.Cycles.ClientCPU / time.Duration(n.Cycles.Total)
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// Spread is the largest deviation from their mean of the primaries' lock
// commands and CPU, as a share of the mean.
func (n NamesResult) Spread() (calls, cpu float64) {
	var cs []float64
	for _, p := range n.Primaries {
		cs = append(cs, float64(p.totalCalls()))
	}
	return maxDeviation(cs), maxDeviation(n.NetCPU())
}

func maxDeviation(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	if mean == 0 {
		return 0
	}
	var worst float64
	for _, x := range v {
		worst = max(worst, math.Abs(x/mean-1))
	}
	return worst
}

// Model is the cluster's model for one run: lock cycles per second one
// primary serves per core of Redis CPU (cycles over the CPU seconds the
// primaries spent), and what n primaries on n cores give: n times it,
// scaled by the mean over the busiest primary's share of the CPU (the
// busiest core saturates first).
func (n NamesResult) Model(primaries int) (perCore, total float64) {
	net := n.NetCPU()
	cpu := sum(net)
	if cpu <= 0 || n.Cycles.Total == 0 {
		return 0, 0
	}
	perCore = float64(n.Cycles.Total) / cpu
	var busiest float64
	for _, c := range net {
		busiest = max(busiest, c)
	}
	mean := cpu / float64(len(n.Primaries))
	return perCore, float64(primaries) * perCore * mean / busiest
}

// crossFromStore is the p-th percentile of the cross-Locker gaps less half
// a round trip: the release reaches the store about RTT/2 after it is sent.
func (h HandoverResult) crossFromStore(p float64) time.Duration {
	return max(percentile(h.Cross, p)-h.RTT/2, 0)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

// WriteMarkdown writes the report, each table under the question it
// answers.
func (r *Report) WriteMarkdown(w io.Writer) error {
	b := &strings.Builder{}
	p := r.Params
	fmt.Fprintf(b, "# reqlock at scale (issue 24)\n\n")
	fmt.Fprintf(b, "Every figure below comes from one run of\n\n```sh\ncd benchmarks && go run ./cmd/scale -write\n```\n\n")
	fmt.Fprintf(b, "which starts its own servers on 127.0.0.1 (redis-server, a Redis Cluster, etcd, ZooKeeper) and rewrites this file. ")
	fmt.Fprintf(b, "This run took %v. %s, %d cores, %s, redis-server %s; %s.\n\n", r.Took.Round(time.Second), r.CPU, r.Cores, r.GoVersion, r.Redis, r.Date.UTC().Format("2006-01-02 15:04 UTC"))
	if p.Processes {
		fmt.Fprintf(b, "In the many-names, cluster and hand-over runs every Locker (or floor, or peer) is a worker process of its own, this program started again, with its own client; the runner starts them together once all are warmed up. The hand-over gaps are read on the machine's wall clock, which the processes share; a process sees only its own critical sections overlap in the many-names runs (the hand-over run's INCR sees every process's). etcd and ZooKeeper run their Lockers in the runner's process. ")
	} else {
		fmt.Fprintf(b, "The contenders of each run are Lockers in one process, each with its own client and connection pool, not separate processes (-procs=false). ")
	}
	fmt.Fprintf(b, "Figures are ratios against a floor measured in the same run: absolute times drift with the machine's load.\n\n")

	fmt.Fprintf(b, "| question | figure |\n|---|---|\n")
	fmt.Fprintf(b, "| How much does a locked request cost beyond its two Redis commands? | [Middleware](#middleware-at-the-cost-of-its-commands): time per request, locked ÷ by hand (target ≤ %.2f×); allocations beside bsm/redislock's |\n", TargetMiddleware)
	fmt.Fprintf(b, "| Does reqlock keep up with hand-sent commands over many names? | [Many names](#many-names): lock cycles/s ÷ the floor (targets ≥ %.1f×; ≥ %.1f× on Zipf with the guard) |\n", TargetNames, TargetZipfGuard)
	fmt.Fprintf(b, "| What does a lock cost Redis? | [Many names](#many-names): Redis CPU per cycle (INFO cpu), commands per cycle; [Memory](#memory): MEMORY USAGE per held lock and fair waiter |\n")
	fmt.Fprintf(b, "| Does a Redis Cluster spread the work at no extra cost? | [Cluster](#redis-cluster): per-primary spread (target ±%.0f %%), redirects, CPU per cycle cluster ÷ single (target ≤ %.1f×), and the model |\n", TargetSpread*100, TargetClusterCPU)
	fmt.Fprintf(b, "| Do etcd and ZooKeeper clusters scale writes? | [etcd and ZooKeeper](#etcd-and-zookeeper): cycles/s, %d members ÷ 1 |\n", p.Members)
	fmt.Fprintf(b, "| How long is a hot name idle between two holders? | [Hand-over](#the-hand-over-gap): gap median and p99 ÷ one round trip; share of the wall time held |\n\n")

	if len(r.Middleware) > 0 {
		fmt.Fprintf(b, "## Middleware at the cost of its commands\n\n")
		fmt.Fprintf(b, "Go benchmarks (testing.Benchmark, allocations counted over the process), median of %d runs each (locked ÷ by hand: the median of the ratios within each run, in which the two ran side by side), on redis-server over loopback, %d distinct names in turn (never contended). ", p.MiddlewareRounds, benchNames)
		fmt.Fprintf(b, "\"by hand\": the same server whose handler sends SET NX PX, then the compare-and-delete script (EVALSHA), itself; \"bare\": the handler alone, no Redis. Every request goes over loopback from one keep-alive client to a server in this process (net/http/httptest for gin and net/http, grpc-go for gRPC): the allocations are both sides'.\n\n")
		fmt.Fprintf(b, "| server | locked ns/req | by hand ns/req | bare ns/req | locked ÷ by hand | target ≤ %.2f× | locked ÷ bare | by hand ÷ bare | locked allocs/req | by hand allocs/req | bare allocs/req | locked B/req | by hand B/req |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n", TargetMiddleware)
		for _, s := range []string{"gin", "net/http", "gRPC unary"} {
			l, h, n := r.middleware(s, string(Locked)), r.middleware(s, string(ByHand)), r.middleware(s, string(Bare))
			if l == nil || h == nil || n == nil {
				continue
			}
			q, _ := r.MiddlewareRatio(s)
			fmt.Fprintf(b, "| %s | %.0f | %.0f | %.0f | %.2f× | %s | %s | %s | %d | %d | %d | %d | %d |\n", s, l.NsOp, h.NsOp, n.NsOp, q, verdict(q <= TargetMiddleware), ratio(l.NsOp, n.NsOp), ratio(h.NsOp, n.NsOp), l.Allocs, h.Allocs, n.Allocs, l.Bytes, h.Bytes)
		}
		fmt.Fprintf(b, "\nlocked ÷ bare is what the lock costs a request; by hand ÷ bare is the part of it the two round trips take, whoever sends them; locked ÷ by hand is ours.\n")
		fmt.Fprintf(b, "\nThe two commands alone, without a server:\n\n| implementation | ns/cycle | ÷ by hand | allocs/cycle | B/cycle |\n|---|---:|---:|---:|---:|\n")
		hand := r.middleware("none", "hand")
		for _, impl := range []string{"hand", "reqlock", "bsm/redislock"} {
			m := r.middleware("none", impl)
			if m == nil || hand == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %.0f | %s | %d | %d |\n", impl, m.NsOp, ratio(m.NsOp, hand.NsOp), m.Allocs, m.Bytes)
		}
		b.WriteString("\n")
	}

	single := r.namesOf("single")
	if len(single) > 0 {
		l := p.Load
		fmt.Fprintf(b, "## Many names\n\n%d %s × %d goroutines over %d names, uniform and Zipf (s = %g, math/rand/v2), critical section %v, wait budget %v, TTL %v, sleep %v–%v while a name is held; %v per run, on one redis-server over loopback. ", l.Lockers, r.who(), l.Goroutines, l.Names, p.ZipfS, l.Hold, p.Shape.Wait, p.Shape.TTL, p.Shape.SpinMin, p.Shape.SpinMin+p.Shape.SpinRandom, l.For)
		fmt.Fprintf(b, "The floor sends SET NX PX and the compare-and-delete script by hand and retries after the same sleep while the name is held. Redis CPU: user + system seconds of INFO cpu over the run, less the server's CPU at rest (measured just before the run, over a fifth of its length, up to 1 s) over the same time. Client CPU: user + system time of the processes that ran the contenders over the run (getrusage), their clients' and the harness's work. commandstats µs counts a script's inner commands twice (they are counted under their own name too).\n\n")
		b.WriteString(r.namesTable(single))
		b.WriteString("\n")
	}
	if len(r.Memory) > 0 {
		fmt.Fprintf(b, "## Memory\n\nMEMORY USAGE (SAMPLES 0) summed over every key, %d locks held (TTL 1 min), per lock; the fair waiters: one per held name, queued by a second fair Locker, counted once the store lists every one of them (Locker.Inspect, or the size of the fair queue on a store that cannot inspect yet).\n\n| implementation | what | bytes | keys | ÷ bsm/redislock's held lock |\n|---|---|---:|---:|---:|\n", p.MemoryLocks)
		var base float64
		for _, m := range r.Memory {
			if m.Impl == "bsm/redislock" {
				base = m.Bytes
			}
		}
		for _, m := range r.Memory {
			fmt.Fprintf(b, "| %s | %s | %.0f | %.2f | %s |\n", m.Impl, m.What, m.Bytes, m.Keys, ratio(m.Bytes, base))
		}
		b.WriteString("\n")
	}
	cluster := r.namesOf(fmt.Sprintf("cluster of %d", p.Primaries))
	if len(cluster) > 0 {
		fmt.Fprintf(b, "## Redis Cluster\n\nThe many-names run on a cluster of %d primaries (no replicas) started by the harness, each Locker with its own cluster client; the servers and the clients share the machine's cores, so throughput cannot grow with the primaries here: the figures show whether the work spreads and costs no more per cycle. ", p.Primaries)
		fmt.Fprintf(b, "Every key of a lock is its name in a hash tag (\"reqlock:{order:42}\"), and its companion keys (fence counter, fair queue, waiter records) append to it, so a lock's commands and scripts touch one slot of one primary. MOVED, ASK and CROSSSLOT are the primaries' INFO errorstats over the run. With Zipf names a few names carry much of the load, each on one primary: the spread of those rows measures the names' skew as much as the layout. Redis reads and answers the commands that arrive together in one pass of its event loop, so its CPU per command falls as more arrive at once: below saturation, N primaries that each see a third of the commands can spend more CPU per cycle than one that sees them all.\n\n")
		b.WriteString(r.namesTable(cluster))
		fmt.Fprintf(b, "\n| distribution | implementation | cycles/s ÷ single's | Redis CPU per cycle ÷ single's | target ≤ %.1f× | commands: largest deviation from the mean | CPU: largest deviation | target ±%.0f %% | MOVED | ASK | CROSSSLOT |\n|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|\n", TargetClusterCPU, TargetSpread*100)
		for _, c := range cluster {
			s := r.names("single", c.Dist, c.Variant)
			if s == nil {
				continue
			}
			cpuRatio := float64(c.CPUPerCycle()) / float64(max(s.CPUPerCycle(), 1))
			calls, cpu := c.Spread()
			moved, ask, cross := c.Server().redirects()
			fmt.Fprintf(b, "| %s | %s | %s | %.2f× | %s | %.1f %% | %.1f %% | %s | %d | %d | %d |\n", c.Dist, c.Variant, ratio(c.Cycles.PerSecond(), s.Cycles.PerSecond()), cpuRatio, verdict(cpuRatio <= TargetClusterCPU), calls*100, cpu*100, verdict(calls <= TargetSpread && cpu <= TargetSpread), moved, ask, cross)
		}
		fmt.Fprintf(b, "\n**Model.** A primary serves as many lock cycles per second as one core of Redis CPU buys: cycles ÷ the primaries' CPU seconds (net of their CPU at rest). N primaries on N cores of their own give N times that, less the imbalance (× mean ÷ busiest primary's CPU), until the clients or the network saturate first.\n\n| distribution | implementation | cycles/s per primary core | %d primaries on %d cores |\n|---|---|---:|---:|\n", p.Primaries, p.Primaries)
		for _, c := range cluster {
			per, total := c.Model(p.Primaries)
			fmt.Fprintf(b, "| %s | %s | %.0f | %.0f |\n", c.Dist, c.Variant, per, total)
		}
		b.WriteString("\n")
	}
	if len(r.Consensus) > 0 {
		cl := p.ConsensusLoad
		fmt.Fprintf(b, "## etcd and ZooKeeper\n\nreqlock (no guard) on etcd and ZooKeeper, one server against a cluster of %d, %d Lockers × %d goroutines over %d names, uniform, for %v each. Both replicate every write through their leader (raft, Zab): a cluster does not scale writes out, it makes them survive a member; the ratio is the price of that. Their Lockers run in the runner's process.\n\n| store | members | cycles/s | ÷ one server's | failed | overlaps |\n|---|---:|---:|---:|---:|---:|\n", p.Members, cl.Lockers, cl.Goroutines, cl.Names, cl.For)
		for _, c := range r.Consensus {
			var base float64
			for _, o := range r.Consensus {
				if o.Store == c.Store && o.Members == 1 {
					base = o.Cycles.PerSecond()
				}
			}
			fmt.Fprintf(b, "| %s | %d | %.0f | %s | %d | %d |\n", c.Store, c.Members, c.Cycles.PerSecond(), ratio(c.Cycles.PerSecond(), base), c.Cycles.Failed, c.Cycles.Overlaps)
		}
		b.WriteString("\n")
	}
	if len(r.Handover) > 0 {
		cs := p.Contention
		fmt.Fprintf(b, "## The hand-over gap\n\n%d %s × %d goroutines on one name for %v, a critical section of two round trips (INCR, DECR), every client behind a proxy that delays each way by %v. ", cs.Lockers, r.who(), cs.Goroutines, cs.For, cs.RTT/2)
		fmt.Fprintf(b, "The gap is from the holder's last critical-section reply to the next holder's first (both read on the machine's wall clock): the release's way to the store, the store's work, the news reaching the next holder and its acquire's return. \"across\" is the next holder in another of the %s, \"same\" in the holder's own: through Redis, or by the hotspot Guard's local hand-off without Redis (WithHandoff; the Guard counts those). \"from the store\" takes half a round trip off the gap across: the release reaches Redis about then. Ratios are to the median PING round trip through the proxy.\n\n", r.who())
		fmt.Fprintf(b, "| implementation | cycles | failed | overlaps | round trip | across p50 | across p99 | from the store p50 ÷ RTT | p99 ÷ RTT | same p50 | same p99 | same hand-overs | of which the Guard's | name held |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, h := range r.Handover {
			rtt := float64(max(h.RTT, 1))
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s | %s | %s | %.2f | %.2f | %s | %s | %d | %d | %.1f %% |\n", h.Variant, h.Cycles, h.Failed, h.Overlaps, ms(h.RTT),
				ms(percentile(h.Cross, 50)), ms(percentile(h.Cross, 99)), float64(h.crossFromStore(50))/rtt, float64(h.crossFromStore(99))/rtt,
				ms(percentile(h.Local, 50)), ms(percentile(h.Local, 99)), len(h.Local), h.Guard["handoffs"], h.HeldShare()*100)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "## Implementations\n\nShape of every lock: TTL %v, sleep %v–%v while a name is held; the many-names runs' wait budget is %v, the hand-over run's 3s.\n\n| implementation | configuration |\n|---|---|\n", p.Shape.TTL, p.Shape.SpinMin, p.Shape.SpinMin+p.Shape.SpinRandom, p.Shape.Wait)
	for _, v := range Variants {
		fmt.Fprintf(b, "| %s | %s |\n", v.Name, v.Config)
	}
	b.WriteString("\n")
	b.WriteString(r.errorsNote())
	_, err := io.WriteString(w, b.String())
	return err
}

// who names the contenders of the runs: processes or Lockers.
func (r *Report) who() string {
	if r.Params.Processes {
		return "processes"
	}
	return "Lockers in one process"
}

func (r *Report) namesOf(target string) []NamesResult {
	var out []NamesResult
	for _, n := range r.Names {
		if n.Target == target {
			out = append(out, n)
		}
	}
	return out
}

func (r *Report) namesTable(rows []NamesResult) string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "| distribution | implementation | cycles | failed | overlaps | cycles/s | ÷ floor | target | lock commands / cycle | Redis CPU / cycle | client CPU / cycle | Redis CPU at rest | commandstats µs / cycle | guard |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, n := range rows {
		q, ok := r.FloorRatio(n)
		target := "–"
		if strings.HasPrefix(n.Variant, "reqlock") && ok {
			want := TargetNames
			if n.Dist != "uniform" && strings.Contains(n.Variant, "hotspot") {
				want = TargetZipfGuard
			}
			target = fmt.Sprintf("≥ %.1f×: %s", want, verdict(q >= want))
		}
		s := n.Server()
		per := func(v float64) float64 { return v / float64(max(n.Cycles.Total, 1)) }
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %.0f | %.2f× | %s | %.2f | %s | %s | %.1f %% of a core | %.1f | %s |\n", n.Dist, n.Variant, n.Cycles.Total, n.Cycles.Failed, n.Cycles.Overlaps, n.Cycles.PerSecond(), q, target,
			per(float64(s.totalCalls())), us(n.CPUPerCycle()), us(n.ClientCPUPerCycle()), sum(n.IdleCPU)*100, per(float64(s.totalUsec())), counters(n.Guard))
	}
	return b.String()
}

func counters(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// errorsNote lists the errors runs met, if any.
func (r *Report) errorsNote() string {
	var lines []string
	for _, n := range r.Names {
		if len(n.Cycles.Errors) > 0 {
			lines = append(lines, fmt.Sprintf("- %s, %s, %s: %s", n.Target, n.Dist, n.Variant, strings.Join(n.Cycles.Errors, "; ")))
		}
	}
	for _, c := range r.Consensus {
		if len(c.Cycles.Errors) > 0 {
			lines = append(lines, fmt.Sprintf("- %s × %d: %s", c.Store, c.Members, strings.Join(c.Cycles.Errors, "; ")))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "Errors met (the first few distinct ones of each run):\n\n" + strings.Join(lines, "\n") + "\n"
}
