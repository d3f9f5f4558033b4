package scale

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// errBusy is the floor's failure when its wait budget ran out.
var errBusy = errors.New("scale: wait budget spent")

// releaseScript is the compare-and-delete of the Redis documentation's
// single-instance lock
// (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/).
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Lock is one contender: Acquire takes name within the wait budget and
// returns its release.
type Lock interface {
	Acquire(ctx context.Context, name string) (release func(context.Context) error, err error)
}

// Shape is the lock settings every contender of a run shares.
type Shape struct {
	TTL        time.Duration // the lease
	Wait       time.Duration // the wait budget of an acquire
	SpinMin    time.Duration // the sleep between two tries while the name is held:
	SpinRandom time.Duration // SpinMin plus up to SpinRandom at random
}

func (s Shape) spin() time.Duration {
	if s.SpinRandom <= 0 {
		return s.SpinMin
	}
	return s.SpinMin + rand.N(s.SpinRandom)
}

// handLock is the floor: SET key token NX PX ttl, retried after the same
// random sleep as reqlock's while the name is held, until the wait budget
// is spent; the compare-and-delete script to release. The key is reqlock's
// ("reqlock:{name}"), so that on a cluster it lands where reqlock's does.
type handLock struct {
	c     redis.UniversalClient
	shape Shape
}

func (h *handLock) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	key := "reqlock:{" + name + "}"
	token := crand.Text()
	deadline := time.Now().Add(h.shape.Wait)
	for {
		ok, err := setNX(ctx, h.c, key, token, h.shape.TTL)
		if err != nil {
			return nil, err
		}
		if ok {
			return func(ctx context.Context) error { return handRelease(ctx, h.c, key, token) }, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errBusy
		}
		t := time.NewTimer(min(h.shape.spin(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// setNX is the acquire by hand: SET key token NX PX ttl.
func setNX(ctx context.Context, c redis.Cmdable, key, token string, ttl time.Duration) (bool, error) {
	err := c.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if err == redis.Nil {
		return false, nil
	}
	return err == nil, err
}

// handRelease is the release by hand: the compare-and-delete script.
func handRelease(ctx context.Context, c redis.Scripter, key, token string) error {
	n, err := releaseScript.Run(ctx, c, []string{key}, token).Int64()
	if err == nil && n != 1 {
		err = fmt.Errorf("scale: release %q: not held", key)
	}
	return err
}

// reqLock is a core.Locker, with the hotspot Guard in front when guard is
// not nil.
type reqLock struct {
	l     *core.Locker
	guard *hotspot.Guard
}

func (r *reqLock) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	lease, err := r.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// Close ends the Locker's background work.
func (r *reqLock) Close() error { return r.l.Close() }

// stats are the Guard's counters, nil without one.
func (r *reqLock) stats() map[string]int64 {
	if r.guard == nil {
		return nil
	}
	s := r.guard.Stats()
	return map[string]int64{"hits": s.Hits, "bypasses": s.Bypasses, "evictions": s.Evictions, "handoffs": s.Handoffs}
}

// Variant is one contender configuration of the many-names, cluster and
// hand-over runs.
type Variant struct {
	Name   string
	Config string // for the report
	open   func(c redis.UniversalClient, s Shape) (Lock, error)
}

// Floor is the name of the hand-written floor.
const Floor = "floor"

// Variants are the contenders, floor first.
var Variants = []Variant{
	{Name: Floor, Config: "SET NX PX by hand, the same random sleep as reqlock's while the name is held, the compare-and-delete script (go-redis)",
		open: func(c redis.UniversalClient, s Shape) (Lock, error) { return &handLock{c: c, shape: s}, nil }},
	{Name: "reqlock", Config: "core.New with WithTTL, WithWait, WithSpin as the floor's",
		open: openReqlock(nil)},
	{Name: "reqlock+hotspot", Config: "as reqlock, with a hotspot Guard (capacity 1000, automatic detection: no WithKeys)",
		open: openReqlock(nil, hotspot.WithCapacity(1000))},
	{Name: "reqlock+hotspot+handoff3", Config: "as reqlock+hotspot, with WithHandoff(3): a release passes the lease to a local waiter, at most 3 times in a row, without Redis",
		open: openReqlock(nil, hotspot.WithCapacity(1000), hotspot.WithHandoff(3))},
	{Name: "reqlock+fair+hotspot+handoff3", Config: "as reqlock+hotspot, with WithFair() and WithHandoff(3)",
		open: openReqlock([]core.Option{core.WithFair()}, hotspot.WithCapacity(1000), hotspot.WithHandoff(3))},
}

// LookupVariant finds a variant by name.
func LookupVariant(name string) (Variant, error) {
	for _, v := range Variants {
		if v.Name == name {
			return v, nil
		}
	}
	return Variant{}, fmt.Errorf("scale: unknown variant %q", name)
}

func openReqlock(extra []core.Option, guardOpts ...hotspot.Option) func(c redis.UniversalClient, s Shape) (Lock, error) {
	return func(c redis.UniversalClient, s Shape) (Lock, error) {
		opts := append([]core.Option{core.WithTTL(s.TTL), core.WithWait(s.Wait), core.WithSpin(s.SpinMin, s.SpinRandom)}, extra...)
		var guard *hotspot.Guard
		if guardOpts != nil {
			guard = hotspot.New(guardOpts...)
			if err := guard.Err(); err != nil {
				return nil, err
			}
			opts = append(opts, core.WithHandlers(guard))
		}
		l := core.New(c, opts...)
		if err := l.Err(); err != nil {
			return nil, err
		}
		return &reqLock{l: l, guard: guard}, nil
	}
}
