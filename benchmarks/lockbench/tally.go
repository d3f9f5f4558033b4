package lockbench

import (
	"slices"
	"time"
)

// tally is what every scenario sums over the reports of its workers.
type tally struct {
	succeeded     int
	failed        int
	overlaps      int
	releaseErrors int
	// roundTrips are those the clients counted plus the subscription
	// commands Redis counted, which pass no client hook.
	roundTrips int64
	waits      []time.Duration // sorted
	counters   map[string]int64
	errors     []string
}

func (run workerRun) tally() tally {
	var t tally
	for _, r := range run.reports {
		t.succeeded += r.Succeeded
		t.failed += r.Failed
		t.overlaps += r.Overlaps
		t.releaseErrors += r.ReleaseErrors
		t.roundTrips += r.RoundTrips
		t.waits = append(t.waits, r.Waits...)
		t.counters = addCounters(t.counters, r.Counters)
		t.errors = addErrors(t.errors, r.Errors)
	}
	t.roundTrips += pubsubCalls(run.commands)
	slices.Sort(t.waits)
	return t
}

func addCounters(sum, c map[string]int64) map[string]int64 {
	for k, v := range c {
		if sum == nil {
			sum = make(map[string]int64)
		}
		sum[k] += v
	}
	return sum
}

func addErrors(seen, errs []string) []string {
	for _, e := range errs {
		if !slices.Contains(seen, e) {
			seen = append(seen, e)
		}
	}
	return seen
}

// percentile returns the nearest-rank q-th percentile of sorted, 0 if empty.
func percentile(sorted []time.Duration, q int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (q*len(sorted) + 99) / 100 // ceil(q/100 × n)
	return sorted[max(rank, 1)-1]
}

// mean returns the average of d, 0 if empty.
func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}
