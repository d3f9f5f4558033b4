package grpclock

import (
	"context"
	"time"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures an interceptor.
type Option func(*config)

type config struct {
	adapter.Config
	ttlFunc func(ctx context.Context, fullMethod string) time.Duration
	onError func(ctx context.Context, err error) error
}

// WithTTL sets the TTL of the locks the interceptor takes, instead of the
// Locker's.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.TTL = ttl }
}

// WithTTLFunc sets a per-call TTL: f's result when positive, else the
// WithTTL or Locker's TTL.
func WithTTLFunc(f func(ctx context.Context, fullMethod string) time.Duration) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("grpclock: WithTTLFunc: nil function")
		}
		c.ttlFunc = f
	}
}

// WithWait sets the wait budget of the intercepted methods: how long a call
// waits for a busy name before it fails with Aborted. It can shorten the
// Locker's budget, not lengthen it; the caller's deadline cuts it too.
func WithWait(wait time.Duration) Option {
	return func(c *config) { c.Wait = wait }
}

// WithFailOpen runs the handler without a lock when Redis is unavailable,
// instead of failing with Unavailable; LeaseFromContext then returns nil.
func WithFailOpen() Option {
	return func(c *config) { c.FailOpen = true }
}

// WithErrorHandler replaces the status mapping: f receives every failure to
// lock a call (err wraps the sentinel of its kind) and returns the error the
// call fails with, typically a status error. ToStatus is the default.
func WithErrorHandler(f func(ctx context.Context, err error) error) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("grpclock: WithErrorHandler: nil function")
		}
		c.onError = f
	}
}
