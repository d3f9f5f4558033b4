package scale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// The peers, configured as lockbench configures them: the run's TTL, a
// context deadline of the wait budget, the floor's random sleep. Their keys
// are reqlock's ("reqlock:{name}"), so that on a cluster every
// implementation spreads its names over the same slots.

// redislockPeer is bsm/redislock: Obtain retries by its RetryStrategy until
// the context's deadline; each try is one EVALSHA of its obtain script.
type redislockPeer struct {
	c     *redislock.Client
	shape Shape
}

// randomSleep is a redislock.RetryStrategy sleeping the floor's random time.
type randomSleep struct{ s Shape }

func (r randomSleep) NextBackoff() time.Duration { return r.s.spin() }

func (l *redislockPeer) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	wctx, cancel := context.WithTimeout(ctx, l.shape.Wait)
	defer cancel()
	lock, err := l.c.Obtain(wctx, handLockKey(name), l.shape.TTL, &redislock.Options{RetryStrategy: randomSleep{l.shape}})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = errBusy
		}
		return nil, err
	}
	return lock.Release, nil
}

// redsyncPeer is go-redsync/redsync on one pool (quorum 1); a Mutex per
// acquire, unlimited tries within the context's deadline.
type redsyncPeer struct {
	rs    *redsync.Redsync
	opts  []redsync.Option
	shape Shape
}

func (l *redsyncPeer) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	m := l.rs.NewMutex(handLockKey(name), l.opts...)
	wctx, cancel := context.WithTimeout(ctx, l.shape.Wait)
	defer cancel()
	if err := m.LockContext(wctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("scale: redsync unlock %q: not held", name)
		}
		return err
	}, nil
}

func init() {
	Variants = append(Variants,
		Variant{Name: "bsm/redislock", Config: "Obtain with a context deadline of the wait budget, a RetryStrategy sleeping as the floor",
			open: func(c redis.UniversalClient, s Shape) (Lock, error) {
				return &redislockPeer{c: redislock.New(c), shape: s}, nil
			}},
		Variant{Name: "go-redsync/redsync", Config: "one pool, expiry the TTL, unlimited tries within a context deadline of the wait budget, retry delay as the floor's sleep",
			open: func(c redis.UniversalClient, s Shape) (Lock, error) {
				return &redsyncPeer{rs: redsync.New(redsyncgoredis.NewPool(c)), shape: s, opts: []redsync.Option{
					redsync.WithExpiry(s.TTL),
					redsync.WithTries(math.MaxInt32),
					redsync.WithRetryDelayFunc(func(int) time.Duration { return s.spin() }),
				}}, nil
			}})
}
