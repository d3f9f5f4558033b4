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

// WithShared takes the names of every intercepted call shared
// (core.Shared), the read side of a read-write lock: such calls run
// together, and never beside a call that holds one of the names
// exclusively (another interceptor's, or another service's); a waiting
// exclusive call goes first, so writers do not starve. An interceptor has
// one lock mode: WithShared, WithPermits, WithSharedMethods and
// WithSharedIf exclude each other.
func WithShared() Option { return func(c *config) { c.SetShared() } }

// WithPermits lets up to n calls hold each of the names at once
// (core.Permits), each in its own slot, 0 to n-1, that the handler reads
// from LeaseFromContext(ctx).Slot(): a hot item's stock split in n
// segments, or a concurrency cap per tenant. n must be between 1 and
// core.MaxPermits. Every user of a name must agree on n: a call with
// another n fails with CodeInternal (core.ErrModeMismatch), never let in
// beyond the smaller n.
func WithPermits(n int) Option { return func(c *config) { c.SetPermits(n) } }

// WithSharedMethods names the read methods, by procedure: their calls take
// the names shared, calls of the other procedures exclusively, so that
// reads of a resource run together and a write runs alone (Redisson's
// RReadWriteLock, Curator's InterProcessReadWriteLock, per call).
// Procedures are written as Spec().Procedure gives them
// ("/orders.v1.Orders/Get"; the generated code's ...Procedure constants).
// Give the reads and the writes of a resource the same key.
func WithSharedMethods(procedures ...string) Option {
	return func(c *config) { c.SetSharedMethods(procedures...) }
}

// WithSharedIf takes the names shared for calls for which f returns true,
// and exclusively for the others: WithSharedMethods with a rule of your
// own. procedure is the call's.
func WithSharedIf(f func(ctx context.Context, procedure string) bool) Option {
	return func(c *config) { c.SetSharedIf(f) }
}

// WithMaxNames bounds the names one call's key may yield (a key of
// keyfunc.All or keyfunc.Templates, or with a "[*]" field naming the items
// of a repeated field: see keyfunc.Func.Names), between 1 and 1024;
// default keyfunc.DefaultMaxNames (64). A call whose key yields more fails
// with CodeInvalidArgument.
func WithMaxNames(n int) Option { return func(c *config) { c.SetMaxNames(n) } }

// WithRequestIDHeader names the header whose value is the request id
// recorded in the holder of the locks this interceptor takes
// (core.Holder.RequestID, which core.ParseHolder reads back from a lease's
// token and reqlock show prints); default "X-Request-Id". A call without it
// (or with an empty one) gives the trace-id of its W3C traceparent header
// instead, else no request id: then the Locker's core.WithRequestID source,
// if any, gives one. "" reads no request id header (the traceparent still
// counts). An id that an earlier middleware put on the context
// (core.ContextWithRequestID) wins over all of these. The value is cut to
// 128 bytes and stripped of unprintable characters.
func WithRequestIDHeader(name string) Option { return func(c *config) { c.SetRequestIDHeader(name) } }
