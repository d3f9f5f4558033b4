package lockbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// WriteMarkdown writes the setup line and a table per scenario that ran.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString(rep.Setup() + "\n\n")
	if len(rep.Results) > 0 {
		b.WriteString(rep.ContentionShape() + "\n\n" + rep.ContentionTable())
		if cmp := rep.Comparison(Best); cmp != "" {
			b.WriteString("\n" + cmp)
		}
		b.WriteString("\n")
	}
	if len(rep.Hot) > 0 {
		b.WriteString(rep.HotShape() + "\n\n" + rep.HotTable() + "\n")
	}
	if len(rep.Solo) > 0 {
		b.WriteString(rep.SoloShape() + "\n\n" + rep.SoloTable() + "\n")
	}
	if len(rep.Scale) > 0 {
		b.WriteString(rep.ScaleShape() + "\n\n" + rep.ScaleWaitTable() + "\n" + rep.ScaleRoundTripTable() + "\n")
	}
	if t := rep.TargetTable(); t != "" {
		b.WriteString(t + "\n")
	}
	if len(rep.StoreSolo) > 0 || len(rep.StoreResults) > 0 {
		b.WriteString(rep.StoresShape() + "\n\n" + rep.StoreTable() + "\n" + rep.StoreSoloTable() + "\n" + rep.StoreContentionTable() + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Setup describes the machine, the server and the network of the run.
func (rep *Report) Setup() string {
	m := rep.Machine
	return fmt.Sprintf("%s, %s; %d cores (%s), %s; redis-server %s on 127.0.0.1 behind a delaying TCP proxy that holds every chunk for %v each way, a simulated round trip of %v (measured: a PING through the proxy takes %s, median) for every exchange of every client.",
		rep.Date.Format("2006-01-02"), m.CPU, m.Cores, m.OS, m.Go, rep.Redis, rep.Params.RTT/2, rep.Params.RTT, ms2(rep.MeasuredRTT))
}

// ContentionShape describes the contention experiment.
func (rep *Report) ContentionShape() string {
	p := rep.Params
	return fmt.Sprintf("%d processes × %d attempts in rounds of %d parallel acquires of %q (%d attempts); wait %v, TTL %v, sleep %v–%v; critical section: two round trips (INCR/DECR of another key, which also detects overlaps across processes).",
		p.Procs, p.Attempts, p.Goroutines, p.Name, p.Procs*p.Attempts, p.Wait, p.TTL, p.SpinMin, p.SpinMin+p.SpinRandom)
}

// ContentionTable is the contention experiment's table, one row per implementation.
func (rep *Report) ContentionTable() string {
	var b strings.Builder
	b.WriteString("| implementation | succeeded | failed | overlaps | SET calls | SETs / success | EVALSHA+EVAL calls | round trips / success | wall time | wait p50 | wait p99 | lock commands (INFO commandstats) | counters |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %d | %s | %s | %s | %s | %s | %s |\n",
			r.Impl, r.Succeeded, r.Failed, r.Overlaps, r.SETs, ratio(r.SETs, int64(r.Succeeded)), r.Scripts,
			ratio(r.RoundTrips, int64(r.Succeeded)), seconds(r.Wall), ms(r.WaitP50), ms(r.WaitP99),
			counters(r.Commands), counters(r.Counters))
	}
	for _, r := range rep.Results {
		errorNote(&b, r.Impl, r.ReleaseErrors, r.Errors)
	}
	stalls := make([]string, len(rep.Results))
	for i, r := range rep.Results {
		stalls[i] = fmt.Sprintf("%s %s, %s", r.Impl, msShort(r.Stall), ms2(r.RTT))
	}
	stallNote(&b, stalls)
	return b.String()
}

// Verdict compares the best reqlock variant with one other implementation
// on one metric of the contention experiment, lower being better for each.
type Verdict struct {
	Other  string
	Metric string  // "wait p99", "round trips / success" or "wall time"
	Best   float64 // the best variant's value
	Value  float64 // the other's
	Unit   string
}

// Beats reports whether the best variant did better than the other.
func (v Verdict) Beats() bool { return v.Best < v.Value }

// Factor is how many times the other's value the best variant's is: below 1
// when the best variant wins.
func (v Verdict) Factor() float64 {
	if v.Value == 0 {
		return 0
	}
	return v.Best / v.Value
}

// Verdicts compares the row named best with every peer (the rows of
// implementations marked Peer) on wait p99, round trips per success and wall
// time; nil when best did not run.
func (rep *Report) Verdicts(best string) []Verdict {
	i := slices.IndexFunc(rep.Results, func(r Result) bool { return r.Impl == best })
	if i < 0 {
		return nil
	}
	b := rep.Results[i]
	var out []Verdict
	for _, r := range rep.Results {
		impl, ok := find(r.Impl)
		if !ok || !impl.Peer {
			continue
		}
		out = append(out,
			Verdict{r.Impl, "wait p99", msf(b.WaitP99), msf(r.WaitP99), "ms"},
			Verdict{r.Impl, "round trips / success", per(b.RoundTrips, b.Succeeded), per(r.RoundTrips, r.Succeeded), ""},
			Verdict{r.Impl, "wall time", b.Wall.Seconds(), r.Wall.Seconds(), "s"},
		)
	}
	return out
}

// Comparison is a table of the best variant against every peer: each cell
// gives the peer's value, the best variant's and the ratio of the two.
func (rep *Report) Comparison(best string) string {
	vs := rep.Verdicts(best)
	if len(vs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s against each peer, in the same run (peer → %s, and how many times lower %s's value is):\n\n", best, best, best)
	b.WriteString("| peer | wait p99 | round trips / success | wall time |\n|---|---|---|---|\n")
	for i := 0; i+2 < len(vs); i += 3 {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", vs[i].Other, vs[i].cell(), vs[i+1].cell(), vs[i+2].cell())
	}
	return b.String()
}

// String says how the best variant did: "wait p99 40.0 ms → 20.0 ms, 2.00×
// lower" when it wins, "… 1.05× higher: loses by 5%" when it does not.
func (v Verdict) String() string {
	head := fmt.Sprintf("%s %s → %s", v.Metric, v.format(v.Value), v.format(v.Best))
	switch {
	case v.Best == v.Value:
		return head + ", equal"
	case v.Beats():
		if v.Best == 0 {
			return head
		}
		return fmt.Sprintf("%s, %.2f× lower", head, v.Value/v.Best)
	}
	return fmt.Sprintf("%s, %.2f× higher: loses by %.0f%%", head, v.Factor(), (v.Factor()-1)*100)
}

func (v Verdict) cell() string {
	times := "–"
	if v.Best > 0 {
		times = fmt.Sprintf("%.2f×", v.Value/v.Best)
	}
	return fmt.Sprintf("%s → %s (%s)", v.format(v.Value), v.format(v.Best), times)
}

func (v Verdict) format(x float64) string {
	switch v.Unit {
	case "":
		return fmt.Sprintf("%.2f", x)
	case "s":
		return fmt.Sprintf("%.2f s", x)
	}
	return fmt.Sprintf("%.1f %s", x, v.Unit)
}

// HotShape describes the hot-key scenario.
func (rep *Report) HotShape() string {
	p := rep.Params
	return fmt.Sprintf("%d processes × %d goroutines acquire %q one attempt after another for %v (no rounds), same lock settings and critical section. Hand-offs: the lock passing from a holder in one process to a holder in another; local hand-offs: leases passed by the hotspot Guard to a waiter of the same process without a Redis release and acquire.",
		p.HotProcs, p.HotGoroutines, p.Name, p.HotFor)
}

// HotTable is the hot-key scenario's table.
func (rep *Report) HotTable() string {
	var b strings.Builder
	b.WriteString("| implementation | acquires / s | hand-offs between processes / s | local hand-offs / s | round trips / success | wait p50 | wait p99 | failed | overlaps |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Hot {
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.1f | %s | %s | %s | %d | %d |\n",
			r.Impl, r.PerSecond(int64(r.Acquires)), r.PerSecond(int64(r.Handovers)), r.PerSecond(r.LocalHandoffs),
			ratio(r.RoundTrips, int64(r.SuccessesAll)), ms(r.WaitP50), ms(r.WaitP99), r.Failed, r.Overlaps)
	}
	for _, r := range rep.Hot {
		errorNote(&b, r.Impl, r.ReleaseErrors, r.Errors)
	}
	stalls := make([]string, len(rep.Hot))
	for i, r := range rep.Hot {
		stalls[i] = fmt.Sprintf("%s %s, %s", r.Impl, msShort(r.Stall), ms2(r.RTT))
	}
	stallNote(&b, stalls)
	return b.String()
}

// SoloShape describes the uncontended scenario.
func (rep *Report) SoloShape() string {
	return fmt.Sprintf("One process, one goroutine: %d acquires and releases of distinct names in turn, no critical section. Allocations are the whole worker process's during the run (runtime.MemStats), client goroutines included.",
		rep.Params.SoloOps)
}

// SoloTable is the uncontended scenario's table.
func (rep *Report) SoloTable() string {
	var b strings.Builder
	b.WriteString("| implementation | round trips / acquire+release | allocations / acquire+release | bytes / acquire+release | acquire+release p50 | p99 | failed |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Solo {
		fmt.Fprintf(&b, "| %s | %.2f | %.0f | %.0f | %s | %s | %d |\n",
			r.Impl, r.Per(float64(r.RoundTrips)), r.Per(float64(r.Mallocs)), r.Per(float64(r.Bytes)), ms(r.P50), ms(r.P99), r.Failed)
	}
	for _, r := range rep.Solo {
		errorNote(&b, r.Impl, 0, r.Errors)
	}
	return b.String()
}

// ScaleShape describes the scaling scenario.
func (rep *Report) ScaleShape() string {
	p := rep.Params
	levels := make([]string, len(p.ScaleGoroutines))
	attempts := make([]string, len(p.ScaleGoroutines))
	for i, g := range p.ScaleGoroutines {
		levels[i] = fmt.Sprint(g)
		attempts[i] = fmt.Sprint(p.ScaleQuota(g))
	}
	return fmt.Sprintf("%d processes × %s goroutines (%s contenders) acquire %q one attempt after another, same lock settings and critical section, until each process has started %s attempts (at least two per goroutine) or %v have passed; the attempts under way then finish.",
		p.ScaleProcs, strings.Join(levels, ", "), strings.Join(rep.ScaleLevels(), ", "), p.Name, strings.Join(attempts, ", "), p.ScaleFor)
}

// ScaleLevels returns the contenders of each level of the scaling scenario,
// as text.
func (rep *Report) ScaleLevels() []string {
	out := make([]string, len(rep.Params.ScaleGoroutines))
	for i, g := range rep.Params.ScaleGoroutines {
		out[i] = fmt.Sprint(rep.Params.ScaleProcs * g)
	}
	return out
}

// ScaleRows groups the scaling results by implementation, in the order the
// implementations first appear, each with its levels in order.
func (rep *Report) ScaleRows() [][]ScaleResult {
	var rows [][]ScaleResult
	for _, r := range rep.Scale {
		i := slices.IndexFunc(rows, func(row []ScaleResult) bool { return row[0].Impl == r.Impl })
		if i < 0 {
			rows = append(rows, nil)
			i = len(rows) - 1
		}
		rows[i] = append(rows[i], r)
	}
	for _, row := range rows {
		slices.SortStableFunc(row, func(a, b ScaleResult) int { return a.Contenders - b.Contenders })
	}
	return rows
}

// ScaleResultOf returns impl's result at the level of contenders.
func (rep *Report) ScaleResultOf(impl string, contenders int) (ScaleResult, bool) {
	for _, r := range rep.Scale {
		if r.Impl == impl && r.Contenders == contenders {
			return r, true
		}
	}
	return ScaleResult{}, false
}

// scaleHeader is the header of a table with a column per level.
func (rep *Report) scaleHeader() string {
	var b strings.Builder
	b.WriteString("| implementation |")
	for _, n := range rep.ScaleLevels() {
		fmt.Fprintf(&b, " %s contenders |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(rep.Params.ScaleGoroutines)) + "\n")
	return b.String()
}

// ScaleWaitTable gives, per implementation and level, the wait p50, p99 and
// maximum of the successful acquires.
func (rep *Report) ScaleWaitTable() string {
	var b strings.Builder
	b.WriteString("Wait p50 / p99 / max of the successful acquires:\n\n" + rep.scaleHeader())
	for _, row := range rep.ScaleRows() {
		fmt.Fprintf(&b, "| %s |", row[0].Impl)
		for _, r := range row {
			fmt.Fprintf(&b, " %s / %s / %s |", msShort(r.WaitP50), msShort(r.WaitP99), msShort(r.WaitMax))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ScaleRoundTripTable gives, per implementation and level, the Redis round
// trips per success, and the failed acquires where there were any.
func (rep *Report) ScaleRoundTripTable() string {
	var b strings.Builder
	b.WriteString("Redis round trips per success (and the failed acquires, out of all attempts, where any failed: their wait budget of " + rep.Params.Wait.String() + " ran out):\n\n" + rep.scaleHeader())
	for _, row := range rep.ScaleRows() {
		fmt.Fprintf(&b, "| %s |", row[0].Impl)
		for _, r := range row {
			fmt.Fprintf(&b, " %s", ratio(r.RoundTrips, int64(r.Succeeded)))
			if r.Failed > 0 {
				fmt.Fprintf(&b, " (%d of %d failed)", r.Failed, r.Attempts)
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	for _, r := range rep.Scale {
		if r.Overlaps > 0 {
			fmt.Fprintf(&b, "\n%s, %d contenders: %d overlaps\n", r.Impl, r.Contenders, r.Overlaps)
		}
	}
	for _, row := range rep.ScaleRows() {
		var releaseErrors int
		var errs []string
		for _, r := range row {
			releaseErrors += r.ReleaseErrors
			errs = addErrors(errs, r.Errors)
		}
		errorNote(&b, row[0].Impl, releaseErrors, errs[:min(len(errs), 3)])
	}
	var stalls []string
	for _, row := range rep.ScaleRows() {
		levels := make([]string, len(row))
		rtts := make([]string, len(row))
		for i, r := range row {
			levels[i] = fmt.Sprintf("%.0f", msf(r.Stall))
			rtts[i] = fmt.Sprintf("%.2f", msf(r.RTT))
		}
		stalls = append(stalls, fmt.Sprintf("%s %s ms, %s ms", row[0].Impl, strings.Join(levels, " / "), strings.Join(rtts, " / ")))
	}
	stallNote(&b, stalls)
	return b.String()
}

// TargetTable lists the targets of the fair queue the run checked, met or
// missed; "" when it checked none.
func (rep *Report) TargetTable() string {
	var b strings.Builder
	for _, t := range rep.Targets() {
		if t.Missing {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| target | in this run | verdict |\n|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Goal, t.Measured, t.Verdict())
	}
	return b.String()
}

// stallNote writes, below a table, the longest stall of the runner's 1 ms
// sleep during each row's run.
func stallNote(b *strings.Builder, stalls []string) {
	fmt.Fprintf(b, "\nThe machine during each run: the longest stall (how much the runner's 1 ms sleep overslept at worst; the runner forwards every round trip through the proxy, so a stall holds up whoever waits on Redis), then the median round trip of a PING through the proxy every 10 ms: %s.\n", strings.Join(stalls, "; "))
}

// errorNote writes, below a table, the errors an implementation met.
func errorNote(b *strings.Builder, impl string, releaseErrors int, errs []string) {
	if len(errs) > 0 || releaseErrors > 0 {
		fmt.Fprintf(b, "\n%s: %d release errors; errors: %s\n", impl, releaseErrors, strings.Join(errs, "; "))
	}
}

func ratio(a, b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func per(a int64, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", msf(d)) }

// msShort is ms with the unit, and without decimals from 100 ms on.
func msShort(d time.Duration) string {
	if d >= 100*time.Millisecond {
		return fmt.Sprintf("%.0f ms", msf(d))
	}
	return ms(d)
}

func ms2(d time.Duration) string { return fmt.Sprintf("%.2f ms", msf(d)) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func counters(c map[string]int64) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// StoresShape describes the stores section.
func (rep *Report) StoresShape() string {
	p := rep.Params
	return fmt.Sprintf("Uncontended: one process, one goroutine, %d acquires and releases of distinct names in turn. Contention: the contention experiment with %d processes × %d attempts in rounds of %d parallel acquires of %q (%d attempts per row), the same lock settings and critical section.",
		p.StoreSoloOps, p.Procs, p.StoreAttempts, p.Goroutines, p.Name, p.Procs*p.StoreAttempts)
}

// StoreTable lists the stores that ran: their server's version, the server's
// settings and the client.
func (rep *Report) StoreTable() string {
	var b strings.Builder
	b.WriteString("| store | server | settings | client, reqlock store |\n|---|---|---|---|\n")
	for _, r := range rep.StoreSolo {
		k, _ := findStore(r.Store)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.Name, rep.StoreVersions[k.Name], k.Server, k.Client)
	}
	return b.String()
}

// StoreSoloTable is the stores section's uncontended table: one row per
// store, its latency also as a ratio to the Redis reference row's and as
// what it takes beyond its round trips.
func (rep *Report) StoreSoloTable() string {
	var ref *SoloResult
	for i, r := range rep.StoreSolo {
		if r.Store == RedisStore {
			ref = &rep.StoreSolo[i]
		}
	}
	var b strings.Builder
	b.WriteString("| store | round trips / acquire+release | client requests / acquire+release | acquire+release mean | p50 | p99 | p50 ÷ redis's | p50 beyond its round trips | failed |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.StoreSolo {
		vs := "–"
		if ref != nil && ref.P50 > 0 {
			vs = fmt.Sprintf("%.2f×", float64(r.P50)/float64(ref.P50))
		}
		requests := "–"
		if k, _ := findStore(r.Store); k.Requests != "" {
			requests = fmt.Sprintf("%.2f", r.Per(float64(r.RoundTrips)))
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s | %s | %s | %d |\n",
			r.Store, r.Per(float64(r.Exchanges)), requests, ms(r.Mean), ms(r.P50), ms(r.P99), vs, ms(r.BeyondRoundTrips()), r.Failed)
	}
	for _, r := range rep.StoreSolo {
		errorNote(&b, r.Store, 0, r.Errors)
	}
	stalls := make([]string, len(rep.StoreSolo))
	for i, r := range rep.StoreSolo {
		stalls[i] = fmt.Sprintf("%s %s, %s", r.Store, msShort(r.Stall), ms2(r.RTT))
	}
	stallNote(&b, stalls)
	return b.String()
}

// StoreResultOf returns the stores section's contention row of store with
// setting.
func (rep *Report) StoreResultOf(store, setting string) (Result, bool) {
	for _, r := range rep.StoreResults {
		if r.Store == store && r.Impl == setting {
			return r, true
		}
	}
	return Result{}, false
}

// StoreContentionTable is the stores section's contention table: one row
// per setting and store, wait p99 and wall time also as ratios to the Redis
// reference row's of the same setting.
func (rep *Report) StoreContentionTable() string {
	var b strings.Builder
	b.WriteString("| setting | store | succeeded | failed | overlaps | round trips / success | client requests / success | wait p50 | wait p99 | wall time | wait p99 ÷ redis's | wall time ÷ redis's |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.StoreResults {
		p99, wall := "–", "–"
		if ref, ok := rep.StoreResultOf(RedisStore, r.Impl); ok && ref.WaitP99 > 0 && ref.Wall > 0 {
			p99 = fmt.Sprintf("%.2f×", float64(r.WaitP99)/float64(ref.WaitP99))
			wall = fmt.Sprintf("%.2f×", float64(r.Wall)/float64(ref.Wall))
		}
		requests := "–"
		if k, _ := findStore(r.Store); k.Requests != "" {
			requests = ratio(r.RoundTrips, int64(r.Succeeded))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Impl, r.Store, r.Succeeded, r.Failed, r.Overlaps, ratio(r.Exchanges, int64(r.Succeeded)), requests,
			ms(r.WaitP50), ms(r.WaitP99), seconds(r.Wall), p99, wall)
	}
	for _, r := range rep.StoreResults {
		errorNote(&b, r.Store+", "+r.Impl, r.ReleaseErrors, r.Errors)
	}
	stalls := make([]string, len(rep.StoreResults))
	for i, r := range rep.StoreResults {
		stalls[i] = fmt.Sprintf("%s %s %s, %s", r.Store, r.Impl, msShort(r.Stall), ms2(r.RTT))
	}
	stallNote(&b, stalls)
	return b.String()
}
