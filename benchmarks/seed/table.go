package seed

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// WriteMarkdown writes the report as a Markdown table, with the shape of the
// run above it. The last column compares each row's SET count with the
// first row's, measured in the same run.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	p := rep.Params
	var b strings.Builder
	fmt.Fprintf(&b, "%d processes × %d attempts in rounds of %d parallel acquires of %q (%d attempts); wait %v, TTL %v, sleep %v–%v; critical section: two round trips (INCR/DECR, also detecting overlaps across processes). redis-server %s on 127.0.0.1, %s, GOMAXPROCS %d.\n\n",
		p.Procs, p.Attempts, p.Goroutines, p.Name, p.Procs*p.Attempts, p.Wait, p.TTL, p.SpinMin, p.SpinMin+p.SpinRandom,
		rep.Redis, runtime.Version(), runtime.GOMAXPROCS(0))
	b.WriteString("| implementation | succeeded | failed | overlaps | SET commands | SETs / success | lock round trips / success | wall time | wait p50 | wait p99 | SETs vs first row | counters |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	var first int64
	for i, r := range rep.Results {
		if i == 0 {
			first = r.SETs
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Impl, r.Succeeded, r.Failed, r.Overlaps, r.SETs,
			ratio(r.SETs, int64(r.Succeeded)), ratio(r.RoundTrips, int64(r.Succeeded)),
			ms(r.Wall), ms(r.WaitP50), ms(r.WaitP99), ratio(r.SETs, first)+"×", counters(r.Counters))
	}
	for _, r := range rep.Results {
		if len(r.Errors) > 0 || r.ReleaseErrors > 0 {
			fmt.Fprintf(&b, "\n%s: %d release errors; errors: %s\n", r.Impl, r.ReleaseErrors, strings.Join(r.Errors, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ratio(a, b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

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
