package seed

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Result is one implementation's row of the seed experiment: the sums over
// its worker processes.
type Result struct {
	Impl          string
	Attempts      int
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	SETs          int64            // SET calls Redis executed (INFO commandstats), also those inside scripts
	Scripts       int64            // EVALSHA and EVAL calls
	Commands      map[string]int64 // the locks' calls per command (INFO commandstats)
	RoundTrips    int64            // Redis round trips of the lock clients
	Wall          time.Duration
	WaitP50       time.Duration // of the successful acquires
	WaitP99       time.Duration
	Counters      map[string]int64
	Errors        []string
}

// seedAttempts runs p.Attempts acquires of p.Name in rounds of p.Goroutines
// parallel ones, as the seed's instances do.
func seedAttempts(ctx context.Context, lock Lock, critical *redis.Client, p Params) *report {
	r := &report{Waits: make([]time.Duration, 0, p.Attempts)}
	var mu sync.Mutex
	for done := 0; done < p.Attempts; {
		n := min(p.Goroutines, p.Attempts-done)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				attempt(ctx, lock, critical, p, r, &mu)
			}()
		}
		wg.Wait()
		done += n
	}
	return r
}

// mergeSeed sums the workers' reports into a Result.
func mergeSeed(name string, p Params, run workerRun) Result {
	res := Result{
		Impl:     name,
		Attempts: p.Procs * p.Attempts,
		SETs:     run.commands["set"],
		Scripts:  run.commands["evalsha"] + run.commands["eval"],
		Commands: run.commands,
		Wall:     run.wall,
	}
	var waits []time.Duration
	for _, r := range run.reports {
		res.Succeeded += r.Succeeded
		res.Failed += r.Failed
		res.Overlaps += r.Overlaps
		res.ReleaseErrors += r.ReleaseErrors
		res.RoundTrips += r.RoundTrips
		waits = append(waits, r.Waits...)
		res.Counters = addCounters(res.Counters, r.Counters)
		res.Errors = addErrors(res.Errors, r.Errors)
	}
	res.RoundTrips += pubsubCalls(run.commands)
	slices.Sort(waits)
	res.WaitP50, res.WaitP99 = percentile(waits, 50), percentile(waits, 99)
	return res
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
