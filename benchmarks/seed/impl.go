package seed

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
	// Addr is the Redis address, for clients of other libraries.
	Addr string
	// Params is the experiment's shape: wait, TTL and sleep to configure.
	Params Params
	// Client is a go-redis client of Addr whose round trips are counted.
	Client *redis.Client
	// RoundTrips counts the round trips of Client; an implementation on
	// another client adds its own to it.
	RoundTrips *RoundTrips
}

// Impl is one lock implementation under test.
type Impl struct {
	// Name labels the table's row and selects the implementation.
	Name string
	// Open builds the Lock of one worker process.
	Open func(env *Env) (Lock, error)
}

// HandoffK is the WithHandoff bound of the handoff variant: one less than
// the parallel acquires of a round, so that one Redis acquire can serve a
// whole round of a process (at most Goroutines-1 waiters queue behind a
// holder) while no process keeps the lock for more than k+1 = 4 critical
// sections in a row.
const HandoffK = 3

// Impls are the implementations the experiment compares, in table order.
var Impls = []Impl{
	{Name: "reqlock", Open: openReqlock()},
	{Name: "reqlock+hotspot", Open: openReqlock(hotspot.WithCapacity(1000))},
	{Name: fmt.Sprintf("reqlock+hotspot+handoff%d", HandoffK), Open: openReqlock(hotspot.WithCapacity(1000), hotspot.WithHandoff(HandoffK))},
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
			return nil, fmt.Errorf("seed: unknown implementation %q", name)
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

// openReqlock returns the constructor of a core.Locker, with a hotspot Guard
// in front of it when guardOpts are given.
func openReqlock(guardOpts ...hotspot.Option) func(env *Env) (Lock, error) {
	return func(env *Env) (Lock, error) {
		p := env.Params
		opts := []core.Option{core.WithTTL(p.TTL), core.WithWait(p.Wait), core.WithSpin(p.SpinMin, p.SpinRandom)}
		var guard *hotspot.Guard
		if guardOpts != nil {
			guard = hotspot.New(guardOpts...)
			if err := guard.Err(); err != nil {
				return nil, err
			}
			opts = append(opts, core.WithHandlers(guard))
		}
		l := core.New(env.Client, opts...)
		if err := l.Err(); err != nil {
			return nil, err
		}
		return &reqlock{locker: l, guard: guard}, nil
	}
}

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
	return r.guard.Counters()
}
