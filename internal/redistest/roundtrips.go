package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts the round trips a client makes:
// one per command and one per pipeline. Add it with client.AddHook and read
// or reset N.
type RoundTrips struct{ N atomic.Int64 }

// DialHook passes through: dialling is not counted.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.N.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.N.Add(1)
		return next(ctx, cmds)
	}
}
