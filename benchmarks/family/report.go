package family

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// row returns the first row of an experiment and config, and whether there
// is one.
func (r *Report) row(exp, config string, g int) (Row, bool) {
	for _, row := range r.Rows {
		if row.Experiment == exp && row.Config == config && (g == 0 || row.Goroutines == g) {
			return row, true
		}
	}
	return Row{}, false
}

// ReadScaling returns, for n readers, the shared throughput against n times
// the throughput of one reader (1.0 is linear).
func (r *Report) ReadScaling(n int) float64 {
	one, ok1 := r.row("read", "Shared()", 1)
	many, ok2 := r.row("read", "Shared()", n)
	if !ok1 || !ok2 || one.PerSecond() == 0 {
		return 0
	}
	return many.PerSecond() / (float64(n) * one.PerSecond())
}

// StockRatio returns the sales per second of Permits(Segments) against
// those of one exclusive lock.
func (r *Report) StockRatio() float64 {
	seg, ok1 := r.row("stock", fmt.Sprintf("Permits(%d)", r.Params.Segments), 0)
	one, ok2 := r.row("stock", "exclusive lock", 0)
	if !ok1 || !ok2 || one.PerSecond() == 0 {
		return 0
	}
	return seg.PerSecond() / one.PerSecond()
}

// WriteMarkdown writes the report as the page family.md.
func (r *Report) WriteMarkdown(w io.Writer) error {
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "# The lock family: shared holds, permits, several names\n\n")
	fmt.Fprintf(&b, "Everything on this page comes from one run of\n\n```sh\ncd benchmarks && go run ./cmd/family -write\n```\n\n")
	fmt.Fprintf(&b, "which starts its own `redis-server` and puts every client behind the same delaying proxy as the [contention benchmarks](README.md) "+
		"(a simulated round trip of %v; measured: a PING through the proxy takes %v, median). "+
		"Goroutines are spread over %d Lockers, each on a Redis client of its own, as %d service processes would be; "+
		"each holder's critical section is a sleep of %v, each goroutine runs %d lock cycles, and every acquire has a wait budget of %v. "+
		"The run took %v on %s, %d cores, %s, redis-server %s, %s. Absolute rates drift with the machine's load; the ratios between rows of this run are what the page compares.\n\n",
		p.RTT, r.MeasuredRTT.Round(10*time.Microsecond), p.Procs, p.Procs, p.Critical, p.Cycles, p.Wait,
		r.Took.Round(time.Second), runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.Redis, r.Date.Format("2006-01-02"))
	fmt.Fprintf(&b, "**Summary.** Read throughput with %d readers on one name: %.2f × linear with `Shared()` (target ≥ 0.8). "+
		"Hot-item sales with `Permits(%d)`: %.2f × those under one exclusive lock (target ≥ 3). "+
		"AcquireAll under crossing orders: %s.\n\n",
		p.Readers[len(p.Readers)-1], r.ReadScaling(p.Readers[len(p.Readers)-1]), p.Segments, r.StockRatio(), r.multiSummary())
	fmt.Fprintf(&b, "| experiment | how | goroutines | cycles | failed | overlaps | most inside at once | wall | cycles/s | wait p50 | wait p99 |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %v | %.0f | %v | %v |\n",
			row.Experiment, row.Config, row.Goroutines, row.Cycles, row.Failed, row.Overlaps, row.MaxInside,
			row.Wall.Round(time.Millisecond), row.PerSecond(), row.WaitP50.Round(10*time.Microsecond), row.WaitP99.Round(10*time.Microsecond))
	}
	fmt.Fprintf(&b, "\n**Read scaling** (Shared(), cycles/s against n × one reader's): ")
	var parts []string
	for _, n := range p.Readers[1:] {
		parts = append(parts, fmt.Sprintf("%d readers %.2f", n, r.ReadScaling(n)))
	}
	fmt.Fprintf(&b, "%s. The exclusive rows are the baseline: one holder at a time, whatever the number of readers.\n\n", strings.Join(parts, ", "))
	fmt.Fprintf(&b, "**Segmented stock.** `Permits(%d)` lets %d sellers work on a hot item at once, each on the segment `Lease.Slot()` names "+
		"(the overlaps column counts a segment held twice: 0 means every slot was distinct); one exclusive lock lets one.\n\n", p.Segments, p.Segments)
	fmt.Fprintf(&b, "**Several names.** Each goroutine takes %v names of a pool of %d, listed in a random order, so that two requests often list the same names in crossing orders. "+
		"`AcquireAll` takes them in one canonical order (on Redis, a MultiAcquirer, its first attempt takes them all in one step, one round trip when they are free; while one is held, and on a store that is no MultiAcquirer, it takes them one by one in key order, as a waiting writer where readers hold one), "+
		"so it cannot deadlock; taking them one by one in the caller's order (what Redisson's MultiLock and Curator's InterProcessMultiLock do) deadlocks, "+
		"and each deadlock lasts until a wait budget runs out: the failed column (there every Acquire has a budget of its own, so a request may wait several). "+
		"A failed AcquireAll is a request whose budget ran out while the names it wanted stayed busy under this contention (%d goroutines taking %d of %d names); canonical order cannot deadlock. "+
		"Neither bsm/redislock (v0.9.4) nor go-redsync/redsync (v4.18.1), the peers of the [contention benchmarks](README.md), offers a multi-name lock, a shared hold or permits in the versions this module requires, so no peer row: the baselines are reqlock's own exclusive lock and the caller-order acquisition.\n",
		p.Sizes, p.Pool, p.MultiGo, p.Sizes[len(p.Sizes)-1], p.Pool)
	_, err := io.WriteString(w, b.String())
	return err
}

// multiSummary says how many AcquireAlls failed, and the p99 of their waits.
func (r *Report) multiSummary() string {
	var parts []string
	for _, size := range r.Params.Sizes {
		exp := fmt.Sprintf("multi-%d", size)
		a, _ := r.row(exp, allAtomic, 0)
		o, _ := r.row(exp, allOneByOne, 0)
		c, _ := r.row(exp, callerOrder, 0)
		parts = append(parts, fmt.Sprintf("%d names: %d and %d failed acquires (with and without a MultiAcquirer; wait p99 %v and %v) against %d for the caller's order",
			size, a.Failed, o.Failed, a.WaitP99.Round(100*time.Microsecond), o.WaitP99.Round(100*time.Microsecond), c.Failed))
	}
	return strings.Join(parts, "; ")
}
