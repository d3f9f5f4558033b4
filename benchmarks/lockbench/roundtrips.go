package lockbench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// RoundTrips counts Redis round trips: as a go-redis hook, one per command
// or pipeline sent; countedRueidis adds those of a rueidis client. The
// commands of a go-redis PubSub do not pass the hooks: the runner adds the
// SUBSCRIBE and UNSUBSCRIBE calls Redis counted.
type RoundTrips struct{ n atomic.Int64 }

// Add counts n round trips made outside go-redis.
func (c *RoundTrips) Add(n int64) { c.n.Add(n) }

// Load returns the round trips counted.
func (c *RoundTrips) Load() int64 { return c.n.Load() }

// DialHook implements redis.Hook.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setup(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !setup(cmd) {
				c.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// setup reports the commands with which go-redis sets up a new connection
// (they pass the client's hooks too): not the lock's round trips, and paid
// by every go-redis client alike. The locks under test send none of them.
func setup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client", "readonly":
		return true
	}
	return false
}

// countedRueidis counts the round trips of a rueidis client: one per call
// of Do or DoCache, and one per DoMulti or DoMultiCache, which pipeline.
type countedRueidis struct {
	rueidis.Client
	rt *RoundTrips
}

func (c countedRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.rt.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c countedRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.rt.Add(1)
	return c.Client.DoMulti(ctx, multi...)
}

func (c countedRueidis) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.rt.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}

func (c countedRueidis) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.rt.Add(1)
	return c.Client.DoMultiCache(ctx, multi...)
}
