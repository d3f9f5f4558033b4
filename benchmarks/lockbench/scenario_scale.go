package lockbench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ScaleResult is one implementation's row of the scaling scenario at one
// level: the sums over its worker processes.
type ScaleResult struct {
	Impl          string
	Goroutines    int // per process
	Contenders    int // processes × goroutines
	Attempts      int // started, over all processes
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	RoundTrips    int64 // Redis round trips of the lock clients
	Wall          time.Duration
	WaitP50       time.Duration // of the successful acquires
	WaitP99       time.Duration
	WaitMax       time.Duration
	Errors        []string
	Stall         time.Duration // as Result's
	RTT           time.Duration // as Result's
}

// RoundTripsPerSuccess is the level's Redis round trips per successful
// acquire, 0 when none succeeded.
func (r ScaleResult) RoundTripsPerSuccess() float64 { return per(r.RoundTrips, r.Succeeded) }

// scaleLoop runs goroutines goroutines that acquire p.Name one attempt after
// another until the process has started p.ScaleQuota(goroutines) attempts or
// p.ScaleFor has passed; attempts in flight then finish.
func scaleLoop(ctx context.Context, lock Lock, critical *redis.Client, p Params, goroutines int) *report {
	quota := int64(p.ScaleQuota(goroutines))
	r := &report{Waits: make([]time.Duration, 0, quota)}
	var mu sync.Mutex
	var started atomic.Int64
	stop := time.Now().Add(p.ScaleFor)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && started.Add(1) <= quota {
				attempt(ctx, lock, critical, p, r, &mu)
			}
		}()
	}
	wg.Wait()
	return r
}

// mergeScale sums the workers' reports of one level into a ScaleResult.
func mergeScale(name string, p Params, goroutines int, run workerRun) ScaleResult {
	t := run.tally()
	res := ScaleResult{
		Impl:          name,
		Goroutines:    goroutines,
		Contenders:    p.ScaleProcs * goroutines,
		Attempts:      t.succeeded + t.failed,
		Succeeded:     t.succeeded,
		Failed:        t.failed,
		Overlaps:      t.overlaps,
		ReleaseErrors: t.releaseErrors,
		RoundTrips:    t.roundTrips,
		Wall:          run.wall,
		WaitP50:       percentile(t.waits, 50),
		WaitP99:       percentile(t.waits, 99),
		Errors:        t.errors,
		Stall:         run.stall,
		RTT:           run.rtt,
	}
	if n := len(t.waits); n > 0 {
		res.WaitMax = t.waits[n-1]
	}
	return res
}
