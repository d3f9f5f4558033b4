package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
)

// Contention is the shape of the hand-over run: Lockers × Goroutines
// contenders on one name, each critical section two round trips (INCR and
// DECR of a key of its own), for For, every client behind a proxy that
// delays each way by RTT/2.
type Contention struct {
	Lockers    int
	Goroutines int
	For        time.Duration
	RTT        time.Duration
}

// hold is one critical section: which Locker held the name, when its
// acquire returned and when its release was called.
type hold struct {
	locker        int
	start, finish time.Time
}

// HandoverResult is one variant's hand-over run.
type HandoverResult struct {
	Variant  string
	Cycles   int64
	Failed   int64
	Overlaps int64
	Wall     time.Duration
	// RTT is the median PING round trip through the proxy.
	RTT time.Duration
	// Cross and Local are the gaps from a release's call to the next
	// holder's start, when the next holder is in another Locker or in the
	// same one.
	Cross, Local []time.Duration
	// Held is the time the name was held (sum of the critical sections).
	Held  time.Duration
	Guard map[string]int64
	// Attempts are the acquires called: Cycles + Failed.
	Attempts int64
}

// HeldShare is the share of the wall time the name was held.
func (h HandoverResult) HeldShare() float64 {
	if h.Wall <= 0 {
		return 0
	}
	return h.Held.Seconds() / h.Wall.Seconds()
}

// gaps splits the gaps between consecutive holds (ordered by start) into
// those between Lockers and those within one, and sums the holds.
func gaps(holds []hold) (cross, local []time.Duration, held time.Duration) {
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	for i, h := range holds {
		held += h.finish.Sub(h.start)
		if i == 0 {
			continue
		}
		g := h.start.Sub(holds[i-1].finish)
		if h.locker == holds[i-1].locker {
			local = append(local, g)
		} else {
			cross = append(cross, g)
		}
	}
	slices.Sort(cross)
	slices.Sort(local)
	return cross, local, held
}

// percentile is the nearest-rank p-th percentile of sorted d, 0 if empty.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p/100+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// medianPing is the median of 50 PINGs through addr.
func medianPing(ctx context.Context, addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	d := make([]time.Duration, 50)
	for i := range d {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return percentile(d, 50), nil
}

// RunHandover runs the contention of shape cs for variant v on the
// redis-server at addr, behind a proxy of its own: each Locker in a worker
// process of its own if procs (the holds are then read on the machine's
// wall clock, which the processes share), or all of them in this process.
func RunHandover(ctx context.Context, addr string, v Variant, cs Contention, shape Shape, procs bool) (res HandoverResult, err error) {
	res.Variant = v.Name
	proxy, err := redistest.StartProxy(addr)
	if err != nil {
		return res, err
	}
	defer proxy.Close()
	proxy.SetDelay(cs.RTT / 2)
	if res.RTT, err = medianPing(ctx, proxy.Addr()); err != nil {
		return res, err
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return res, err
	}
	var c contention
	if procs {
		c, res.Wall, res.Guard, err = handoverInProcs(ctx, proxy.Addr(), v, cs, shape)
	} else {
		c, res.Wall, res.Guard, err = handoverHere(ctx, proxy.Addr(), v, cs, shape)
	}
	if err != nil {
		return res, err
	}
	res.Attempts, res.Failed, res.Overlaps = c.attempts, c.failed, c.overlaps
	res.Cycles = int64(len(c.holds))
	res.Cross, res.Local, res.Held = gaps(c.holds)
	if len(c.errs) > 0 && res.Cycles == 0 {
		return res, fmt.Errorf("scale: %s: no cycle: %s", v.Name, c.errs[0])
	}
	return res, nil
}

func handoverHere(ctx context.Context, addr string, v Variant, cs Contention, shape Shape) (c contention, wall time.Duration, guard map[string]int64, err error) {
	var locks []Lock
	var clients []*redis.Client
	defer func() {
		for _, l := range locks {
			if c, ok := l.(io.Closer); ok {
				err = errors.Join(err, c.Close())
			}
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for range cs.Lockers {
		cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		clients = append(clients, cl)
		l, err := v.open(cl, shape)
		if err != nil {
			return c, 0, nil, err
		}
		locks = append(locks, l)
	}
	if err := warm(ctx, locks, cs.Goroutines, "w:"); err != nil {
		return c, 0, nil, err
	}
	critical := redis.NewClient(&redis.Options{Addr: addr, PoolSize: cs.Lockers * cs.Goroutines})
	defer critical.Close()
	if err := critical.Ping(ctx).Err(); err != nil {
		return c, 0, nil, err
	}
	start := time.Now()
	c = contend(ctx, locks, critical, cs, 0)
	wall = time.Since(start)
	for _, l := range locks {
		if r, ok := l.(*reqLock); ok {
			guard = addCounters(guard, r.stats())
		}
	}
	return c, wall, guard, nil
}

func handoverInProcs(ctx context.Context, addr string, v Variant, cs Contention, shape Shape) (c contention, wall time.Duration, guard map[string]int64, err error) {
	var jobs []workerJob
	for i := range cs.Lockers {
		jobs = append(jobs, workerJob{Kind: jobHandover, Variant: v.Name, Shape: shape, Contention: cs, Addrs: []string{addr}, Index: i})
	}
	ps, err := startProcs(ctx, jobs)
	if err != nil {
		return c, 0, nil, err
	}
	reps, wall, err := ps.run()
	ps.close(err != nil)
	if err != nil {
		return c, 0, nil, err
	}
	var errs errorList
	for i, r := range reps {
		c.attempts += r.Attempts
		c.failed += r.Failed
		c.overlaps += r.Overlaps
		for _, e := range r.Errors {
			errs.note(errors.New(e))
		}
		for _, h := range r.Holds {
			c.holds = append(c.holds, hold{locker: i, start: time.Unix(0, h[0]), finish: time.Unix(0, h[1])})
		}
		guard = addCounters(guard, r.Guard)
	}
	c.errs = errs.list
	return c, wall, guard, nil
}

// contention is what contend saw.
type contention struct {
	holds                      []hold
	attempts, failed, overlaps int64
	errs                       []string
}

// contend runs the Goroutines of every lock on the name "hot" until
// cs.For has passed: acquire, INCR and DECR of "hot:inside" on critical
// (an INCR above 1 finds another holder inside, in any process), release.
// Holds are labelled with first plus the lock's index.
func contend(ctx context.Context, locks []Lock, critical *redis.Client, cs Contention, first int) contention {
	var mu sync.Mutex
	var c contention
	var errs errorList
	deadline := time.Now().Add(cs.For)
	var wg sync.WaitGroup
	for li, lock := range locks {
		for range cs.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && ctx.Err() == nil {
					release, err := lock.Acquire(ctx, "hot")
					if err != nil {
						mu.Lock()
						c.attempts++
						c.failed++
						mu.Unlock()
						errs.note(err)
						continue
					}
					began := time.Now()
					n, err := critical.Incr(ctx, "hot:inside").Result()
					if err == nil {
						err = critical.Decr(ctx, "hot:inside").Err()
					}
					finished := time.Now()
					if rerr := release(ctx); rerr != nil {
						err = errors.Join(err, fmt.Errorf("release: %w", rerr))
					}
					if err != nil {
						errs.note(err)
					}
					mu.Lock()
					c.attempts++
					c.holds = append(c.holds, hold{locker: first + li, start: began, finish: finished})
					if n > 1 {
						c.overlaps++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	c.errs = errs.list
	return c
}
