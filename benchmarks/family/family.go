// Package family measures the lock family of reqlock (shared holds,
// numbered permits, several names at once) on a real redis-server behind
// the benchmarks' delaying proxy, against the exclusive lock as the
// baseline: how read throughput grows with readers on one name, how many
// sales per second a hot item's stock sells in 5 segments (Permits(5))
// instead of under one lock, and whether AcquireAll of names listed in
// crossing orders ever deadlocks, beside the one-by-one acquisition in the
// caller's order that Redisson's MultiLock and Curator's
// InterProcessMultiLock use. cmd/family runs it and writes family.md.
//
// Every experiment runs its goroutines over Procs Lockers, each on a
// client of its own (as many service processes would have), for a fixed
// number of cycles; times are wall times of the whole experiment, and the
// figures compared are ratios between rows of one run.
package family

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// Params sizes the experiments.
type Params struct {
	RTT      time.Duration // simulated round trip (the proxy holds each way half of it)
	Procs    int           // Lockers (clients) the goroutines are spread over
	Critical time.Duration // each holder's critical section (a sleep)
	Cycles   int           // lock cycles per goroutine
	Readers  []int         // reader counts of the read-scaling experiment
	Sellers  int           // goroutines of the stock experiment
	Segments int           // Permits(n) of the stock experiment
	MultiGo  int           // goroutines of the AcquireAll experiment
	Pool     int           // names the AcquireAll experiment draws from
	Sizes    []int         // names per AcquireAll
	Wait     time.Duration // wait budget of every acquire
}

// DefaultParams are the committed run's.
func DefaultParams() Params {
	return Params{
		RTT: time.Millisecond, Procs: 2, Critical: 5 * time.Millisecond, Cycles: 40,
		Readers: []int{1, 2, 4, 8}, Sellers: 16, Segments: 5,
		MultiGo: 16, Pool: 8, Sizes: []int{2, 5}, Wait: 5 * time.Second,
	}
}

// Row is one measured configuration.
type Row struct {
	Experiment string
	Config     string
	Goroutines int
	Cycles     int // lock cycles that succeeded
	Failed     int // acquires that failed (timeouts: a deadlock shows here)
	Overlaps   int // holders that broke the mode's exclusion
	Wall       time.Duration
	WaitP50    time.Duration
	WaitP99    time.Duration
	MaxInside  int // most holders inside at once
}

// PerSecond is the row's successful lock cycles per second.
func (r Row) PerSecond() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Cycles) / r.Wall.Seconds()
}

// Report is one run of every experiment.
type Report struct {
	Params      Params
	Date        time.Time
	Redis       string
	MeasuredRTT time.Duration
	Rows        []Row
	Took        time.Duration
}

// Run starts a redis-server and the proxy, and runs every experiment.
func Run(ctx context.Context, p Params) (*Report, error) {
	began := time.Now()
	srv, err := redistest.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	proxy, err := redistest.StartProxy(srv.Addr())
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.SetDelay(p.RTT / 2)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("family: %w", err)
	}
	rep := &Report{Params: p, Date: time.Now(), Redis: field(info, "redis_version")}
	rep.MeasuredRTT, err = pingRTT(ctx, proxy.Addr())
	if err != nil {
		return nil, err
	}
	e := &env{p: p, addr: proxy.Addr()}
	for _, n := range p.Readers {
		for _, shared := range []bool{true, false} {
			row, err := e.readers(ctx, n, shared)
			if err != nil {
				return nil, err
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	for _, permits := range []int{p.Segments, 0} {
		row, err := e.stock(ctx, permits)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	for _, size := range p.Sizes {
		for _, how := range []string{allAtomic, allOneByOne, callerOrder} {
			row, err := e.multi(ctx, size, how)
			if err != nil {
				return nil, err
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	rep.Took = time.Since(began)
	return rep, nil
}

// env is the Redis side of a run.
type env struct {
	p    Params
	addr string
	seq  atomic.Int64
}

// lockers returns p.Procs Lockers, each on a client of its own, and a
// function that closes them.
func (e *env) lockers(oneByOne bool) ([]*core.Locker, func()) {
	var ls []*core.Locker
	var clients []*redis.Client
	for range e.p.Procs {
		c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 64})
		clients = append(clients, c)
		var l *core.Locker
		if oneByOne {
			type plain struct{ core.Sharer } // hides the MultiAcquirer
			l = core.NewWithStore(plain{core.NewRedisStore(c).(core.Sharer)}, core.WithWait(e.p.Wait))
		} else {
			l = core.New(c, core.WithWait(e.p.Wait))
		}
		ls = append(ls, l)
	}
	return ls, func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// name returns a name no earlier experiment used.
func (e *env) name(what string) string {
	return fmt.Sprintf("family:%s:%d", what, e.seq.Add(1))
}

// tally gathers the goroutines' results.
type tally struct {
	mu       sync.Mutex
	waits    []time.Duration
	failed   int
	overlaps int
	inside   int
	most     int
	errs     []error
}

func (t *tally) enter(ok bool) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok {
		t.overlaps++
	}
	t.inside++
	t.most = max(t.most, t.inside)
	return func() { t.mu.Lock(); t.inside--; t.mu.Unlock() }
}

func (t *tally) waited(d time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.failed++
		if !errors.Is(err, core.ErrTimeout) && len(t.errs) < 3 {
			t.errs = append(t.errs, err)
		}
		return
	}
	t.waits = append(t.waits, d)
}

func (t *tally) row(exp, config string, g int, wall time.Duration) (Row, error) {
	if len(t.errs) > 0 {
		return Row{}, fmt.Errorf("family: %s %s: %w", exp, config, errors.Join(t.errs...))
	}
	slices.Sort(t.waits)
	pct := func(q float64) time.Duration {
		if len(t.waits) == 0 {
			return 0
		}
		return t.waits[min(len(t.waits)-1, int(q*float64(len(t.waits))))]
	}
	return Row{Experiment: exp, Config: config, Goroutines: g, Cycles: len(t.waits), Failed: t.failed,
		Overlaps: t.overlaps, Wall: wall, WaitP50: pct(0.5), WaitP99: pct(0.99), MaxInside: t.most}, nil
}

// spread runs g goroutines over ls, each calling cycle p.Cycles times.
func (e *env) spread(ls []*core.Locker, g int, cycle func(l *core.Locker, r *rand.Rand)) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range g {
		l := ls[i%len(ls)]
		r := rand.New(rand.NewPCG(uint64(i), 1))
		wg.Go(func() {
			for range e.p.Cycles {
				cycle(l, r)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// readers: n goroutines read one name, Shared or exclusive.
func (e *env) readers(ctx context.Context, n int, shared bool) (Row, error) {
	ls, done := e.lockers(false)
	defer done()
	name := e.name("read")
	var opts []core.CallOption
	config := "exclusive lock"
	if shared {
		opts, config = []core.CallOption{core.Shared()}, "Shared()"
	}
	var t tally
	var writers atomic.Int64
	wall := e.spread(ls, n, func(l *core.Locker, _ *rand.Rand) {
		start := time.Now()
		lease, err := l.Acquire(ctx, name, opts...)
		t.waited(time.Since(start), err)
		if err != nil {
			return
		}
		// Readers may share; an exclusive holder must be alone.
		alone := shared || writers.Add(1) == 1
		exit := t.enter(alone)
		time.Sleep(e.p.Critical)
		exit()
		if !shared {
			writers.Add(-1)
		}
		_ = lease.Release(ctx)
	})
	return t.row("read", config, n, wall)
}

// stock: p.Sellers goroutines sell one hot item, from Permits(n) segments
// (slot = segment) or under one exclusive lock (permits 0).
func (e *env) stock(ctx context.Context, permits int) (Row, error) {
	ls, done := e.lockers(false)
	defer done()
	name := e.name("stock")
	var opts []core.CallOption
	config := "exclusive lock"
	segments := 1
	if permits > 0 {
		opts, config, segments = []core.CallOption{core.Permits(permits)}, fmt.Sprintf("Permits(%d)", permits), permits
	}
	var t tally
	busy := make([]atomic.Bool, segments)
	wall := e.spread(ls, e.p.Sellers, func(l *core.Locker, _ *rand.Rand) {
		start := time.Now()
		lease, err := l.Acquire(ctx, name, opts...)
		t.waited(time.Since(start), err)
		if err != nil {
			return
		}
		seg := lease.Slot()
		ok := seg < segments && busy[seg].CompareAndSwap(false, true)
		exit := t.enter(ok)
		time.Sleep(e.p.Critical) // sell one unit of segment seg
		if ok {
			busy[seg].Store(false)
		}
		exit()
		_ = lease.Release(ctx)
	})
	return t.row("stock", config, e.p.Sellers, wall)
}

// The ways of the AcquireAll experiment to take several names.
const (
	allAtomic   = "AcquireAll (MultiAcquirer)"
	allOneByOne = "AcquireAll (no MultiAcquirer)"
	callerOrder = "Acquire each, caller's order"
)

// multi: p.MultiGo goroutines each take size names of a pool of p.Pool,
// listed in a random order, how says how.
func (e *env) multi(ctx context.Context, size int, how string) (Row, error) {
	ls, done := e.lockers(how == allOneByOne)
	defer done()
	pool := make([]string, e.p.Pool)
	for i := range pool {
		pool[i] = e.name("multi")
	}
	held := make([]atomic.Bool, len(pool))
	var t tally
	wall := e.spread(ls, e.p.MultiGo, func(l *core.Locker, r *rand.Rand) {
		idx := r.Perm(len(pool))[:size]
		names := make([]string, size)
		for i, k := range idx {
			names[i] = pool[k]
		}
		start := time.Now()
		var release func()
		var err error
		if how == callerOrder {
			release, err = eachInOrder(ctx, l, names)
		} else {
			var lease *core.Lease
			lease, err = l.AcquireAll(ctx, names)
			if err == nil {
				release = func() { _ = lease.Release(ctx) }
			}
		}
		t.waited(time.Since(start), err)
		if err != nil {
			return
		}
		ok := true
		for _, k := range idx {
			ok = held[k].CompareAndSwap(false, true) && ok
		}
		exit := t.enter(ok)
		time.Sleep(e.p.Critical)
		for _, k := range idx {
			held[k].Store(false)
		}
		exit()
		release()
	})
	return t.row(fmt.Sprintf("multi-%d", size), how, e.p.MultiGo, wall)
}

// eachInOrder takes names one by one in the caller's order, as Redisson's
// MultiLock and Curator's InterProcessMultiLock do, releasing what it took
// when one fails.
func eachInOrder(ctx context.Context, l *core.Locker, names []string) (func(), error) {
	var leases []*core.Lease
	release := func() {
		for i := len(leases) - 1; i >= 0; i-- {
			_ = leases[i].Release(ctx)
		}
	}
	for _, n := range names {
		lease, err := l.Acquire(ctx, n)
		if err != nil {
			release()
			return nil, err
		}
		leases = append(leases, lease)
	}
	return release, nil
}

// pingRTT is the median of 50 PINGs through the proxy.
func pingRTT(ctx context.Context, addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var d []time.Duration
	for range 50 {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("family: ping: %w", err)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	return d[len(d)/2], nil
}

// field returns the value of name in a Redis INFO answer.
func field(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
