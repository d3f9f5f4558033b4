package connectlock

import (
	"context"
	"time"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures the interceptor. An invalid one makes NewInterceptor
// panic (see Check).
//
// Per-call settings win over per-procedure ones, which win over the
// Locker's. The TTL of a lock is WithTTLFunc's result when positive, else a
// TTL set on the call's context by an earlier interceptor
// (core.ContextWithTTL), else WithTTL's, else the Locker's (core.WithTTL).
// The wait budget is one set on the call's context (core.ContextWithWait),
// else WithWait's, else the Locker's (core.WithWait).
type Option func(*config)

type config = adapter.RPCConfig

// WithTTL sets the TTL of the locks the interceptor takes, instead of the
// Locker's; 0 keeps the Locker's. A per-call TTL (WithTTLFunc, or
// core.ContextWithTTL set by an earlier interceptor) overrides it. A TTL
// outside [1ms, core.MaxTTL] is invalid.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.SetTTL(ttl) } }

// WithTTLFunc sets a per-call TTL: f's result when positive, else the TTL
// on the call's context (core.ContextWithTTL), WithTTL's or the Locker's.
// procedure is the call's, such as "/orders.v1.Orders/Pay".
func WithTTLFunc(f func(ctx context.Context, procedure string) time.Duration) Option {
	return func(c *config) { c.SetTTLFunc(f) }
}

// WithWait sets the wait budget of the intercepted calls, instead of the
// Locker's (core.WithWait): how long a call waits for a busy name before it
// fails with CodeAborted. 0 means one attempt, no waiting; a negative wait is
// invalid. The caller's deadline cuts it; a wait set on the call's context by
// an earlier interceptor (core.ContextWithWait) overrides it. It bounds the
// waiting for another holder only: a Redis call in flight ends at the
// Locker's I/O timeout, so a stalled Redis gives CodeUnavailable (or fails
// open), never CodeAborted.
func WithWait(wait time.Duration) Option { return func(c *config) { c.SetWait(wait) } }

// WithFailOpen runs the handler without a lock when Redis is unavailable
// (core.ErrStorage only), instead of failing with CodeUnavailable;
// LeaseFromContext then returns nil. The storage error is dropped: use
// WithFailOpenHook to see it. Choose it only for procedures where a
// duplicate run is cheaper than an outage.
func WithFailOpen() Option { return func(c *config) { c.SetFailOpen() } }

// WithFailOpenHook is WithFailOpen, and calls f with the call's context and
// the storage error before the handler runs unlocked, to log or count the
// calls that ran without a lock.
func WithFailOpenHook(f func(ctx context.Context, err error)) Option {
	return func(c *config) { c.SetFailOpenHook(f) }
}

// WithErrorHandler replaces the code mapping: f receives every failure to
// lock a call (err wraps the sentinel of its kind) and returns the error the
// call fails with, typically a *connect.Error. ToError is the default, and
// is used when f returns nil: a failure to lock never lets the handler run
// (only WithFailOpen does, when Redis is unavailable).
func WithErrorHandler(f func(ctx context.Context, err error) error) Option {
	return func(c *config) { c.SetErrorHandler(f) }
}
