package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Load is the shape of a many-names run: Lockers × Goroutines contenders
// acquiring names drawn from Names, uniformly or by a Zipf law of exponent
// ZipfS, each holding its name for Hold, for For.
type Load struct {
	Lockers    int
	Goroutines int
	Names      int
	ZipfS      float64 // 0: uniform; else Zipf (math/rand/v2, v = 1), s > 1
	Hold       time.Duration
	For        time.Duration
}

// Dist labels the distribution of names.
func (l Load) Dist() string {
	if l.ZipfS == 0 {
		return "uniform"
	}
	return fmt.Sprintf("Zipf s=%g", l.ZipfS)
}

// Cycles is what the contenders of a run did: a cycle is an acquire that
// succeeded, its critical section and its release.
type Cycles struct {
	// PerLocker counts the cycles of each Locker; they sum to Total.
	PerLocker     []int64
	Total         int64
	Attempts      int64 // acquires called: Total + Failed
	Failed        int64 // acquires that did not get their name
	ReleaseErrors int64
	Overlaps      int64 // critical sections that found another inside, on the same name
	Wall          time.Duration
	// ClientCPU is the CPU time (user and system) of the processes that
	// ran the contenders, over the run: the clients' cost beside Redis's.
	ClientCPU time.Duration
	Errors    []string // the first few distinct errors
}

// PerSecond is the run's lock cycles per second.
func (c Cycles) PerSecond() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return float64(c.Total) / c.Wall.Seconds()
}

// errorList keeps the first few distinct errors.
type errorList struct {
	mu   sync.Mutex
	list []string
}

func (e *errorList) note(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	msg := err.Error()
	for _, s := range e.list {
		if s == msg {
			return
		}
	}
	if len(e.list) < 3 {
		e.list = append(e.list, msg)
	}
}

// nameOf is the name of index i.
func nameOf(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// runLoad runs the load on locks (one per Locker) until load.For has
// passed: each goroutine draws a name, acquires it, checks that nobody else
// in this process is inside, holds it for load.Hold and releases it. The
// random stream of goroutine g of lock li is PCG(first+li, g), so that
// worker processes numbered first draw what Lockers of one process would.
func runLoad(ctx context.Context, locks []Lock, load Load, prefix string, first int) Cycles {
	inside := make([]atomic.Int32, load.Names)
	per := make([]atomic.Int64, len(locks))
	var attempts, failed, relErr, overlaps atomic.Int64
	var errs errorList
	deadline := time.Now().Add(load.For)
	start := time.Now()
	var wg sync.WaitGroup
	for li, lock := range locks {
		for g := range load.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(first+li), uint64(g)))
				var zipf *rand.Zipf
				if load.ZipfS > 0 {
					zipf = rand.NewZipf(r, load.ZipfS, 1, uint64(load.Names-1))
				}
				for time.Now().Before(deadline) && ctx.Err() == nil {
					var i int
					if zipf != nil {
						i = int(zipf.Uint64())
					} else {
						i = r.IntN(load.Names)
					}
					attempts.Add(1)
					release, err := lock.Acquire(ctx, nameOf(prefix, i))
					if err != nil {
						failed.Add(1)
						errs.note(err)
						continue
					}
					if inside[i].Add(1) > 1 {
						overlaps.Add(1)
					}
					if load.Hold > 0 {
						time.Sleep(load.Hold)
					}
					inside[i].Add(-1)
					if err := release(ctx); err != nil {
						relErr.Add(1)
						errs.note(fmt.Errorf("release: %w", err))
					}
					per[li].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	c := Cycles{Wall: time.Since(start), Attempts: attempts.Load(), Failed: failed.Load(), ReleaseErrors: relErr.Load(), Overlaps: overlaps.Load(), Errors: errs.list}
	for i := range per {
		c.PerLocker = append(c.PerLocker, per[i].Load())
		c.Total += per[i].Load()
	}
	return c
}

// warm acquires and releases a few distinct names on each lock, in
// parallel, so that connections are dialled and scripts loaded before the
// count.
func warm(ctx context.Context, locks []Lock, parallel int, prefix string) error {
	var wg sync.WaitGroup
	var errs errorList
	for li, lock := range locks {
		for g := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 2 {
					release, err := lock.Acquire(ctx, fmt.Sprintf("%swarm:%d:%d:%d", prefix, li, g, k))
					if err == nil {
						err = release(ctx)
					}
					if err != nil {
						errs.note(err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(errs.list) > 0 {
		return fmt.Errorf("scale: warm-up: %s", errs.list[0])
	}
	return nil
}
