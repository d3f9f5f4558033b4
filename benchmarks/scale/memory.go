package scale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
)

// MemoryResult is the store's memory per lock: the sum of MEMORY USAGE
// (SAMPLES 0) over every key, per held lock or per waiter.
type MemoryResult struct {
	Impl  string
	What  string // "held lock" or "fair waiter"
	Bytes float64
	Keys  float64 // keys per lock or waiter
}

// keyMemory sums MEMORY USAGE over every key of the database and counts
// the keys (SCAN, never KEYS).
func keyMemory(ctx context.Context, c *redis.Client) (bytes, keys int64, err error) {
	iter := c.Scan(ctx, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil && err != redis.Nil {
			return 0, 0, fmt.Errorf("scale: MEMORY USAGE: %w", err)
		}
		bytes += n
		keys++
	}
	return bytes, keys, iter.Err()
}

// Memory measures, on a single redis-server reached by c (which it
// flushes), the memory of n held locks for reqlock (plain and fair),
// bsm/redislock and redsync, and of n fair waiters, one per held name.
func Memory(ctx context.Context, c *redis.Client, n int) ([]MemoryResult, error) {
	var out []MemoryResult
	measure := func(impl string, hold func(i int) (func(), error)) error {
		if err := c.FlushAll(ctx).Err(); err != nil {
			return err
		}
		var releases []func()
		defer func() {
			for _, r := range releases {
				r()
			}
		}()
		for i := range n {
			r, err := hold(i)
			if err != nil {
				return fmt.Errorf("scale: %s: hold: %w", impl, err)
			}
			releases = append(releases, r)
		}
		b, k, err := keyMemory(ctx, c)
		if err != nil {
			return err
		}
		out = append(out, MemoryResult{Impl: impl, What: "held lock", Bytes: float64(b) / float64(n), Keys: float64(k) / float64(n)})
		return nil
	}
	name := func(i int) string { return fmt.Sprintf("order:%d", i) }

	for _, fair := range []bool{false, true} {
		opts := []core.Option{core.WithTTL(time.Minute)}
		impl := "reqlock"
		if fair {
			opts, impl = append(opts, core.WithFair()), "reqlock+fair"
		}
		l := core.New(c, opts...)
		err := measure(impl, func(i int) (func(), error) {
			lease, err := l.Acquire(ctx, name(i))
			if err != nil {
				return nil, err
			}
			return func() { _ = lease.Release(ctx) }, nil
		})
		_ = l.Close()
		if err != nil {
			return nil, err
		}
	}
	rl := redislock.New(c)
	if err := measure("bsm/redislock", func(i int) (func(), error) {
		lock, err := rl.Obtain(ctx, name(i), time.Minute, nil)
		if err != nil {
			return nil, err
		}
		return func() { _ = lock.Release(ctx) }, nil
	}); err != nil {
		return nil, err
	}
	rs := redsync.New(goredis.NewPool(c))
	if err := measure("go-redsync/redsync", func(i int) (func(), error) {
		m := rs.NewMutex(name(i), redsync.WithExpiry(time.Minute), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return func() { _, _ = m.UnlockContext(ctx) }, nil
	}); err != nil {
		return nil, err
	}
	w, err := fairWaiters(ctx, c, n)
	if err != nil {
		return nil, err
	}
	return append(out, w), nil
}

// fairWaiters holds n names with one fair Locker, queues one waiter per
// name from another, and measures the memory the waiters added once the
// store lists every one of them.
func fairWaiters(ctx context.Context, c *redis.Client, n int) (res MemoryResult, err error) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		return res, err
	}
	holder := core.New(c, core.WithTTL(time.Minute), core.WithFair())
	defer holder.Close()
	waiter := core.New(c, core.WithTTL(time.Minute), core.WithWait(time.Minute), core.WithFair())
	defer waiter.Close()
	var leases []*core.Lease
	for i := range n {
		lease, err := holder.Acquire(ctx, fmt.Sprintf("order:%d", i))
		if err != nil {
			return res, err
		}
		leases = append(leases, lease)
	}
	b0, k0, err := keyMemory(ctx, c)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	waitErrs := make([]error, n)
	defer func() {
		for _, l := range leases {
			_ = l.Release(ctx)
		}
		wg.Wait()
		cancel()
		err = errors.Join(append([]error{err}, waitErrs...)...)
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := waiter.Acquire(wctx, fmt.Sprintf("order:%d", i))
			if err == nil {
				err = lease.Release(ctx)
			}
			waitErrs[i] = err
		}()
	}
	// Every waiter listed in the store, or give up after 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; {
		queued := 0
		for i := range n {
			k, err := queuedWaiters(ctx, c, holder, fmt.Sprintf("order:%d", i))
			if err != nil {
				return res, err
			}
			queued += k
		}
		if queued >= n {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("scale: %d of %d fair waiters queued after 30s", queued, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b1, k1, err := keyMemory(ctx, c)
	if err != nil {
		return res, err
	}
	return MemoryResult{Impl: "reqlock+fair", What: "fair waiter", Bytes: float64(b1-b0) / float64(n), Keys: float64(k1-k0) / float64(n)}, nil
}

// queuedWaiters is how many waiters the store lists for name: from
// Locker.Inspect, or, on a store without it, the size of the fair queue
// (the sorted set redisscript.QueueKey of the lock key).
func queuedWaiters(ctx context.Context, c *redis.Client, l *core.Locker, name string) (int, error) {
	st, err := l.Inspect(ctx, name)
	if err == nil {
		return len(st.Waiters), nil
	}
	if !errors.Is(err, core.ErrNoInspector) {
		return 0, err
	}
	key, err := l.Key(name)
	if err != nil {
		return 0, err
	}
	n, err := c.ZCard(ctx, redisscript.QueueKey(key)).Result()
	return int(n), err
}
