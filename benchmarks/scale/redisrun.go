package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
)

// Target is where a run keeps its locks: one Redis primary, or a cluster
// of several.
type Target struct {
	Name string
	// newClient makes the client of one Locker, with a pool of its own.
	newClient func() redis.UniversalClient
	// Primaries are direct clients of each primary, for INFO and FLUSHALL.
	Primaries []*redis.Client
	// Addrs and Cluster are what a worker process dials.
	Addrs   []string
	Cluster bool
	close   func()
}

// Close stops the target's servers.
func (t *Target) Close() {
	for _, p := range t.Primaries {
		_ = p.Close()
	}
	if t.close != nil {
		t.close()
	}
}

// LaunchSingle starts one redis-server.
func LaunchSingle() (*Target, error) {
	srv, err := redistest.Launch()
	if err != nil {
		return nil, err
	}
	return &Target{
		Name:      "single",
		newClient: func() redis.UniversalClient { return redis.NewClient(srv.Options()) },
		Primaries: []*redis.Client{redis.NewClient(srv.Options())},
		Addrs:     []string{srv.Addr()},
		close:     srv.Close,
	}, nil
}

// LaunchCluster starts a Redis Cluster of n primaries without replicas.
func LaunchCluster(n int) (*Target, error) {
	c, err := redistest.LaunchCluster(n, 0)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Name:      fmt.Sprintf("cluster of %d", n),
		newClient: func() redis.UniversalClient { return redis.NewClusterClient(c.Options()) },
		close:     c.Close,
		Addrs:     c.Addrs(),
		Cluster:   true,
	}
	for _, node := range c.Nodes[:n] {
		t.Primaries = append(t.Primaries, redis.NewClient(node.Options()))
	}
	return t, nil
}

// NamesResult is one many-names run of one variant on one target.
type NamesResult struct {
	Target  string
	Variant string
	Dist    string
	Cycles  Cycles
	// Primaries are each primary's lock commands, their time, its errors
	// and its CPU during the run.
	Primaries []serverStats
	Guard     map[string]int64 // the hotspot Guards' counters, summed
	// IdleCPU is each primary's CPU at rest, in CPU seconds per second,
	// measured just before the run.
	IdleCPU []float64
}

// NetCPU is each primary's CPU during the run less its CPU at rest over
// the run's wall time (at least 0).
func (r NamesResult) NetCPU() []float64 {
	out := make([]float64, len(r.Primaries))
	for i, p := range r.Primaries {
		var idle float64
		if i < len(r.IdleCPU) {
			idle = r.IdleCPU[i] * r.Cycles.Wall.Seconds()
		}
		out[i] = max(p.CPU-idle, 0)
	}
	return out
}

// Server sums the primaries.
func (r NamesResult) Server() serverStats {
	var s serverStats
	for _, p := range r.Primaries {
		s.add(p)
	}
	return s
}

// stats reads every primary's statistics.
func (t *Target) stats(ctx context.Context) ([]serverStats, error) {
	out := make([]serverStats, len(t.Primaries))
	for i, p := range t.Primaries {
		s, err := readStats(ctx, p)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// flush empties every primary.
func (t *Target) flush(ctx context.Context) error {
	for _, p := range t.Primaries {
		if err := p.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("scale: FLUSHALL: %w", err)
		}
	}
	return nil
}

// RunNames runs load with variant v on t: one client and Lock per Locker,
// each Locker in a worker process of its own if procs, or all of them in
// this process.
func RunNames(ctx context.Context, t *Target, v Variant, load Load, shape Shape, procs bool) (res NamesResult, err error) {
	res = NamesResult{Target: t.Name, Variant: v.Name, Dist: load.Dist()}
	if err := t.flush(ctx); err != nil {
		return res, err
	}
	var run func() (Cycles, map[string]int64, error)
	var closeAll func() error
	if procs {
		run, closeAll, err = namesInProcs(ctx, t, v, load, shape)
	} else {
		run, closeAll, err = namesHere(ctx, t, v, load, shape)
	}
	if closeAll != nil {
		defer func() { err = errors.Join(err, closeAll()) }()
	}
	if err != nil {
		return res, err
	}
	// The primaries' CPU at rest (their timers, a cluster's bus), over a
	// fifth of the run's length, up to a second: the run's CPU per cycle is
	// net of it.
	idle, err := t.stats(ctx)
	if err != nil {
		return res, err
	}
	idleFor := min(load.For/5, time.Second)
	time.Sleep(idleFor)
	before, err := t.stats(ctx)
	if err != nil {
		return res, err
	}
	for i := range before {
		res.IdleCPU = append(res.IdleCPU, max(before[i].CPU-idle[i].CPU, 0)/idleFor.Seconds())
	}
	if res.Cycles, res.Guard, err = run(); err != nil {
		return res, err
	}
	after, err := t.stats(ctx)
	if err != nil {
		return res, err
	}
	for i := range after {
		res.Primaries = append(res.Primaries, after[i].sub(before[i]))
	}
	return res, nil
}

// namesHere opens the Lockers in this process and warms them up; run
// runs the load.
func namesHere(ctx context.Context, t *Target, v Variant, load Load, shape Shape) (run func() (Cycles, map[string]int64, error), closeAll func() error, err error) {
	var locks []Lock
	var clients []redis.UniversalClient
	closeAll = func() error {
		var err error
		for _, l := range locks {
			if c, ok := l.(io.Closer); ok {
				err = errors.Join(err, c.Close())
			}
		}
		for _, c := range clients {
			_ = c.Close()
		}
		return err
	}
	for range load.Lockers {
		c := t.newClient()
		clients = append(clients, c)
		l, err := v.open(c, shape)
		if err != nil {
			return nil, closeAll, err
		}
		locks = append(locks, l)
	}
	if err := warm(ctx, locks, load.Goroutines, "w:"); err != nil {
		return nil, closeAll, err
	}
	return func() (Cycles, map[string]int64, error) {
		cpu := processCPU()
		c := runLoad(ctx, locks, load, "n:", 0)
		c.ClientCPU = processCPU() - cpu // this process's: the runner's too
		var guard map[string]int64
		for _, l := range locks {
			if r, ok := l.(*reqLock); ok {
				guard = addCounters(guard, r.stats())
			}
		}
		return c, guard, nil
	}, closeAll, nil
}

// namesInProcs starts a worker process per Locker and waits until they are
// warmed up; run starts them together and merges their reports; closeAll
// ends the workers (killing them if run did not end them).
func namesInProcs(ctx context.Context, t *Target, v Variant, load Load, shape Shape) (run func() (Cycles, map[string]int64, error), closeAll func() error, err error) {
	share := load
	share.Lockers = 1
	var jobs []workerJob
	for i := range load.Lockers {
		jobs = append(jobs, workerJob{Kind: jobNames, Variant: v.Name, Shape: shape, Load: share, Addrs: t.Addrs, Cluster: t.Cluster, Index: i})
	}
	ps, err := startProcs(ctx, jobs)
	if err != nil {
		return nil, nil, err
	}
	ran := false
	closeAll = func() error {
		if !ran {
			ps.close(true)
		}
		return nil
	}
	return func() (Cycles, map[string]int64, error) {
		ran = true
		reps, wall, err := ps.run()
		ps.close(err != nil)
		if err != nil {
			return Cycles{}, nil, err
		}
		c := Cycles{Wall: wall}
		var guard map[string]int64
		var errs errorList
		for _, r := range reps {
			c.PerLocker = append(c.PerLocker, r.Cycles.Total)
			c.Total += r.Cycles.Total
			c.Attempts += r.Cycles.Attempts
			c.Failed += r.Cycles.Failed
			c.ReleaseErrors += r.Cycles.ReleaseErrors
			c.Overlaps += r.Cycles.Overlaps
			c.ClientCPU += r.Cycles.ClientCPU
			for _, e := range r.Cycles.Errors {
				errs.note(errors.New(e))
			}
			guard = addCounters(guard, r.Guard)
		}
		c.Errors = errs.list
		return c, guard, nil
	}, closeAll, nil
}

// addCounters sums b into a, making a if needed and b is not empty.
func addCounters(a, b map[string]int64) map[string]int64 {
	for k, v := range b {
		if a == nil {
			a = map[string]int64{}
		}
		a[k] += v
	}
	return a
}
