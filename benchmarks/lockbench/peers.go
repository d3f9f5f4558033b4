package lockbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/reqlock/reqlock/core"
)

// This file adapts the peers to Lock, each configured as close to the run's
// settings (wait 3 s, TTL 10 s, sleep 10–20 ms) as its API allows.

// spin draws a sleep in [SpinMin, SpinMin+SpinRandom).
func (p Params) spin() time.Duration {
	d := p.SpinMin
	if p.SpinRandom > 0 {
		d += time.Duration(mrand.Int64N(int64(p.SpinRandom)))
	}
	return d
}

// redislockPeer is bsm/redislock. Its Obtain retries by its RetryStrategy
// until the context's deadline, which carries the wait budget; each attempt
// is one EVALSHA of its obtain script (SET NX PX inside).
type redislockPeer struct {
	client *redislock.Client
	p      Params
}

func openRedislock(env *Env) (Lock, error) {
	return &redislockPeer{client: redislock.New(env.Client), p: env.Params}, nil
}

// randomSleep is a redislock.RetryStrategy sleeping the run's random time.
type randomSleep struct{ p Params }

func (r randomSleep) NextBackoff() time.Duration { return r.p.spin() }

func (l *redislockPeer) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	wctx, cancel := context.WithTimeout(ctx, l.p.Wait)
	defer cancel()
	lock, err := l.client.Obtain(wctx, name, l.p.TTL, &redislock.Options{RetryStrategy: randomSleep{l.p}})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = errTimeout
		}
		return nil, err
	}
	return lock.Release, nil
}

// redsyncPeer is go-redsync/redsync on one Redis (one pool, quorum 1). Its
// Mutex holds the state of one acquire, so every acquire makes a new one.
// Tries are unlimited and the context's deadline carries the wait budget.
// A failed attempt costs redsync two round trips: the SET NX and a release
// script it runs to undo a partial quorum, even on a single node.
type redsyncPeer struct {
	rs   *redsync.Redsync
	opts []redsync.Option
	p    Params
}

func openRedsync(env *Env) (Lock, error) {
	p := env.Params
	return &redsyncPeer{
		rs: redsync.New(redsyncgoredis.NewPool(env.Client)),
		opts: []redsync.Option{
			redsync.WithExpiry(p.TTL),
			redsync.WithTries(math.MaxInt32),
			redsync.WithRetryDelayFunc(func(int) time.Duration { return p.spin() }),
		},
		p: p,
	}, nil
}

func (l *redsyncPeer) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	m := l.rs.NewMutex(name, l.opts...)
	wctx, cancel := context.WithTimeout(ctx, l.p.Wait)
	defer cancel()
	if err := m.LockContext(wctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("lockbench: redsync unlock %q: not held", name)
		}
		return err
	}, nil
}

// rueidisPeer is rueidis/rueidislock with one key per lock (KeyMajority 1,
// where its default takes 2 of 3 keys on the same server). It does not poll:
// a waiter sleeps until client-side caching reports that the lock key changed
// (its acquire script GETs the key to track it) and tries again then. Its
// wait has no budget of its own, so the budget cancels the wait; a lock
// taken as the budget runs out is given back and counts as a timeout.
type rueidisPeer struct {
	locker rueidislock.Locker
	p      Params
}

func openRueidislock(env *Env) (Lock, error) {
	locker, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{env.Addr}, ForceSingleClient: true},
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return countedRueidis{Client: c, rt: env.RoundTrips}, nil
		},
		KeyMajority:  1,
		KeyValidity:  env.Params.TTL,
		TryNextAfter: core.DefaultIOTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &rueidisPeer{locker: locker, p: env.Params}, nil
}

func (l *rueidisPeer) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	wctx, cancelWait := context.WithCancel(ctx)
	budget := time.AfterFunc(l.p.Wait, cancelWait)
	lctx, unlock, err := l.locker.WithContext(wctx, name)
	if err != nil {
		budget.Stop()
		cancelWait()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = errTimeout
		}
		return nil, err
	}
	if !budget.Stop() { // the budget ran out as the lock was taken: give it back
		unlock()
		cancelWait()
		return nil, errTimeout
	}
	return func(context.Context) error {
		err := lctx.Err() // set if the lock was lost while held
		unlock()
		cancelWait()
		if err != nil {
			return fmt.Errorf("lockbench: rueidislock %q lost while held: %w", name, err)
		}
		return nil
	}, nil
}

func (l *rueidisPeer) Close() error {
	l.locker.Close()
	return nil
}
