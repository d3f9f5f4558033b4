package lockbench

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// Lock is a lock implementation as one worker process uses it.
type Lock interface {
	// Acquire takes name, waiting for it up to the wait budget, and returns
	// the function that releases it.
	Acquire(ctx context.Context, name string) (release func(context.Context) error, err error)
}

// Counted is implemented by a Lock with counters of its own (such as the
// hotspot Guard's); the table sums them over the worker processes.
type Counted interface {
	Counters() map[string]int64
}

// Env is what a worker process gives an implementation.
type Env struct {
	// Addr is the address every client dials: the delaying proxy in front of
	// Redis.
	Addr string
	// Params is the run's shape: wait, TTL and sleep to configure.
	Params Params
	// Client is a go-redis client of Addr whose round trips are counted.
	Client *redis.Client
	// RoundTrips counts the round trips of Client; an implementation on
	// another client adds its own to it.
	RoundTrips *RoundTrips
	// Store, in the stores section, is the store the reqlock variants keep
	// their locks in (core.NewWithStore) instead of Client's Redis; nil
	// elsewhere, and for the stores section's Redis reference row, whose
	// Client is on the store's proxy.
	Store core.Store
}

// Impl is one lock implementation under test.
type Impl struct {
	// Name labels the table's row and selects the implementation.
	Name string
	// Peer is set for the implementations reqlock is compared with.
	Peer bool
	// Config says how the implementation is configured for the run, for
	// the README.
	Config string
	// Open builds the Lock of one worker process. If the Lock is an
	// io.Closer, the worker closes it at the end.
	Open func(env *Env) (Lock, error)
}

// HandoffK is the WithHandoff bound of the hand-off variants: one less than
// the parallel acquires of a round, so that one Redis acquire can serve a
// whole round of a process (at most Goroutines-1 waiters queue behind a
// holder) while no process keeps the lock for more than k+1 = 4 critical
// sections in a row.
const HandoffK = 3

// Best names the reqlock variant with the best settings for a hot name: the
// one the README compares with every peer.
var Best = fmt.Sprintf("reqlock+fair+hotspot+handoff%d", HandoffK)

// Impls are the implementations the experiment compares, in table order:
// the plain spin lock, the peers, and reqlock from its plain Locker to
// its best settings.
var Impls = []Impl{
	{Name: "plain-spin", Peer: true, Open: openPlain,
		Config: "the single-instance lock of the Redis documentation: SET NX PX, sleep 10–20 ms, compare-and-delete script; go-redis"},
	{Name: "bsm/redislock", Peer: true, Open: openRedislock,
		Config: "Obtain with a context deadline of the wait budget, TTL 10 s, a RetryStrategy sleeping 10–20 ms at random"},
	{Name: "go-redsync/redsync", Peer: true, Open: openRedsync,
		Config: "one pool (goredis v9), expiry 10 s, a context deadline of the wait budget with unlimited tries, retry delay 10–20 ms at random"},
	{Name: "rueidislock", Peer: true, Open: openRueidislock,
		Config: "KeyMajority 1 (one key, as the others), KeyValidity 10 s, TryNextAfter 1 s (the I/O timeout), wait budget by cancelling the wait after 3 s; wakes on client-side-caching invalidations, no sleep"},
	{Name: "reqlock", Open: openReqlock(nil),
		Config: "core.New with WithTTL(10s), WithWait(3s), WithSpin(10ms, 10ms)"},
	{Name: "reqlock+hotspot", Open: openReqlock(nil, hotspot.WithCapacity(1000)),
		Config: "as reqlock, with a hotspot Guard (capacity 1000, automatic detection)"},
	{Name: fmt.Sprintf("reqlock+hotspot+handoff%d", HandoffK), Open: openReqlock(nil, hotspot.WithCapacity(1000), hotspot.WithHandoff(HandoffK)),
		Config: fmt.Sprintf("as reqlock+hotspot, with WithHandoff(%d)", HandoffK)},
	{Name: "reqlock+notify", Open: openReqlock([]core.Option{core.WithNotify()}),
		Config: "as reqlock, with WithNotify(): release publishes, waiters wake on it or on their sleep"},
	{Name: "reqlock+hotspot+notify", Open: openReqlock([]core.Option{core.WithNotify()}, hotspot.WithCapacity(1000)),
		Config: "as reqlock+hotspot, with WithNotify()"},
	{Name: fmt.Sprintf("reqlock+hotspot+handoff%d+notify", HandoffK), Open: openReqlock([]core.Option{core.WithNotify()}, hotspot.WithCapacity(1000), hotspot.WithHandoff(HandoffK)),
		Config: fmt.Sprintf("as reqlock+hotspot+handoff%d, with WithNotify()", HandoffK)},
	{Name: "reqlock+fair", Open: openReqlock([]core.Option{core.WithFair()}),
		Config: "as reqlock, with WithFair(): waiters queue in Redis in arrival order, a release grants the lock to the first waiter and tells it by pub/sub; each process polls every third of the patience (1 s) for all its waiters of a name at once, and waiters do not sleep"},
	{Name: Best, Open: openReqlock([]core.Option{core.WithFair()}, hotspot.WithCapacity(1000), hotspot.WithHandoff(HandoffK)),
		Config: fmt.Sprintf("as reqlock+fair, with a hotspot Guard (capacity 1000) and WithHandoff(%d): one waiter per process queues in Redis", HandoffK)},
}

// Lookup returns the implementations named in the comma-separated list names
// ("" for all), in table order.
func Lookup(names string) ([]Impl, error) {
	if names == "" {
		return Impls, nil
	}
	var out []Impl
	for _, name := range strings.Split(names, ",") {
		impl, ok := find(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("lockbench: unknown implementation %q", name)
		}
		out = append(out, impl)
	}
	return out, nil
}

func find(name string) (Impl, bool) {
	for _, impl := range Impls {
		if impl.Name == name {
			return impl, true
		}
	}
	return Impl{}, false
}

// openReqlock returns the constructor of a core.Locker with the run's
// settings and extra, with a hotspot Guard in front of it when guardOpts are
// given, on env.Store if set and on env.Client's Redis otherwise.
func openReqlock(extra []core.Option, guardOpts ...hotspot.Option) func(env *Env) (Lock, error) {
	return func(env *Env) (Lock, error) {
		p := env.Params
		opts := []core.Option{core.WithTTL(p.TTL), core.WithWait(p.Wait), core.WithSpin(p.SpinMin, p.SpinRandom)}
		opts = append(opts, extra...)
		var guard *hotspot.Guard
		if guardOpts != nil {
			guard = hotspot.New(guardOpts...)
			if err := guard.Err(); err != nil {
				return nil, err
			}
			opts = append(opts, core.WithHandlers(guard))
		}
		var l *core.Locker
		if env.Store != nil {
			l = core.NewWithStore(env.Store, opts...)
		} else {
			l = core.New(env.Client, opts...)
		}
		if err := l.Err(); err != nil {
			return nil, err
		}
		return &reqlock{locker: l, guard: guard}, nil
	}
}

// Close ends the Locker's subscription (WithNotify).
func (r *reqlock) Close() error { return r.locker.Close() }

type reqlock struct {
	locker *core.Locker
	guard  *hotspot.Guard
}

func (r *reqlock) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	lease, err := r.locker.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func (r *reqlock) Counters() map[string]int64 {
	if r.guard == nil {
		return nil
	}
	s := r.guard.Stats()
	return map[string]int64{"hits": s.Hits, "bypasses": s.Bypasses, "evictions": s.Evictions, "handoffs": s.Handoffs, "size": int64(s.Size)}
}
