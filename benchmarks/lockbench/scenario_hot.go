package lockbench

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// HotResult is one implementation's row of the continuous hot-key scenario.
type HotResult struct {
	Impl          string
	For           time.Duration // how long the goroutines kept acquiring
	Acquires      int           // successful acquires that took the lock within For
	Failed        int
	Overlaps      int
	ReleaseErrors int
	// Handovers counts the times the lock passed from a holder in one
	// process to a holder in another, in the order the lock was taken.
	Handovers int
	// LocalHandoffs counts the leases the hotspot Guard passed to a waiter
	// of the same process without a Redis release and acquire.
	LocalHandoffs int64
	RoundTrips    int64 // Redis round trips of the lock clients
	SuccessesAll  int   // successful acquires, also those taken after For
	WaitP50       time.Duration
	WaitP99       time.Duration
	Errors        []string
	Stall         time.Duration // as Result's
	RTT           time.Duration // as Result's
}

// PerSecond returns the rate of n over the scenario's duration.
func (r HotResult) PerSecond(n int64) float64 {
	return float64(n) / r.For.Seconds()
}

// hotLoop runs p.HotGoroutines goroutines that acquire p.Name one attempt
// after another until p.HotFor has passed, recording when each success took
// the lock. Each goroutine makes at least one attempt, even one that starts
// after p.HotFor (a process held up that long on a busy machine): a short
// run still takes the lock.
func hotLoop(ctx context.Context, lock Lock, critical *redis.Client, p Params) *report {
	r := &report{}
	var mu sync.Mutex
	stop := time.Now().Add(p.HotFor)
	var wg sync.WaitGroup
	for range p.HotGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; first || time.Now().Before(stop); first = false {
				if at := attempt(ctx, lock, critical, p, r, &mu); !at.IsZero() && at.Before(stop) {
					mu.Lock()
					r.Acquired = append(r.Acquired, at.UnixNano())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return r
}

// mergeHot sums the workers' reports and counts the hand-offs between
// processes in the order in which the lock was taken.
func mergeHot(name string, p Params, run workerRun) HotResult {
	t := run.tally()
	res := HotResult{
		Impl:          name,
		For:           p.HotFor,
		Failed:        t.failed,
		Overlaps:      t.overlaps,
		ReleaseErrors: t.releaseErrors,
		LocalHandoffs: t.counters["handoffs"],
		RoundTrips:    t.roundTrips,
		SuccessesAll:  t.succeeded,
		WaitP50:       percentile(t.waits, 50),
		WaitP99:       percentile(t.waits, 99),
		Errors:        t.errors,
		Stall:         run.stall,
		RTT:           run.rtt,
	}
	type take struct {
		at   int64
		proc int
	}
	var takes []take
	for proc, r := range run.reports {
		for _, at := range r.Acquired {
			takes = append(takes, take{at, proc})
		}
	}
	res.Acquires = len(takes)
	slices.SortFunc(takes, func(a, b take) int { return cmp.Compare(a.at, b.at) })
	for i := 1; i < len(takes); i++ {
		if takes[i].proc != takes[i-1].proc {
			res.Handovers++
		}
	}
	return res
}
