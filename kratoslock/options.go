package kratoslock

import (
	"context"
	"time"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures the middleware. An invalid one makes Server panic (see
// Check).
//
// Per-request settings win over per-middleware ones, which win over the
// Locker's. The TTL of a lock is WithTTLFunc's result when positive, else a
// TTL set on the request's context by an earlier middleware
// (core.ContextWithTTL), else WithTTL's, else the Locker's (core.WithTTL).
// The wait budget is one set on the request's context
// (core.ContextWithWait), else WithWait's, else the Locker's
// (core.WithWait).
type Option func(*config)

type config = adapter.RPCConfig

// WithTTL sets the TTL of the locks the middleware takes, instead of the
// Locker's; 0 keeps the Locker's. A per-request TTL (WithTTLFunc, or
// core.ContextWithTTL set by an earlier middleware) overrides it. A TTL
// outside [1ms, core.MaxTTL] is invalid.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.SetTTL(ttl) } }

// WithTTLFunc sets a per-request TTL: f's result when positive, else the TTL
// on the request's context (core.ContextWithTTL), WithTTL's or the Locker's.
// operation is the request's (see the package documentation).
func WithTTLFunc(f func(ctx context.Context, operation string) time.Duration) Option {
	return func(c *config) { c.SetTTLFunc(f) }
}

// WithWait sets the wait budget of the middleware, instead of the Locker's
// (core.WithWait): how long a request waits for a busy name before it fails
// with 409 (Aborted). 0 means one attempt, no waiting; a negative wait is
// invalid. The request's deadline (Kratos's server timeout, or the gRPC
// caller's) cuts it; a wait set on the request's context by an earlier
// middleware (core.ContextWithWait) overrides it. It bounds the waiting for
// another holder only: a Redis call in flight ends at the Locker's I/O
// timeout, so a stalled Redis gives 503 (or fails open), never 409.
func WithWait(wait time.Duration) Option { return func(c *config) { c.SetWait(wait) } }

// WithRetryAfter sets the Retry-After reply header of the default busy
// error, in whole seconds rounded up (default 1 s).
func WithRetryAfter(d time.Duration) Option { return func(c *config) { c.SetRetryAfter(d) } }

// WithFailOpen runs the handler without a lock when Redis is unavailable
// (core.ErrStorage only), instead of failing with 503 (Unavailable);
// LeaseFromContext then returns nil. The storage error is dropped: use
// WithFailOpenHook to see it. Choose it only for operations where a
// duplicate run is cheaper than an outage.
func WithFailOpen() Option { return func(c *config) { c.SetFailOpen() } }

// WithFailOpenHook is WithFailOpen, and calls f with the request's context
// and the storage error before the handler runs unlocked, to log or count
// the requests that ran without a lock.
func WithFailOpenHook(f func(ctx context.Context, err error)) Option {
	return func(c *config) { c.SetFailOpenHook(f) }
}

// WithErrorHandler replaces the error mapping: f receives every failure to
// lock a request (err wraps the sentinel of its kind) and returns the error
// the request fails with, typically a Kratos *errors.Error. ToError is the
// default, and is used when f returns nil: a failure to lock never lets the
// handler run (only WithFailOpen does, when Redis is unavailable).
func WithErrorHandler(f func(ctx context.Context, err error) error) Option {
	return func(c *config) { c.SetErrorHandler(f) }
}

// WithShared takes the names of every request shared (core.Shared), the
// read side of a read-write lock: such requests run together, and never
// beside a request that holds one of the names exclusively (another
// middleware's, or another service's); a waiting exclusive request goes
// first, so writers do not starve. A middleware has one lock mode:
// WithShared, WithPermits, WithSharedMethods and WithSharedIf exclude each
// other.
func WithShared() Option { return func(c *config) { c.SetShared() } }

// WithPermits lets up to n requests hold each of the names at once
// (core.Permits), each in its own slot, 0 to n-1, that the handler reads
// from LeaseFromContext(ctx).Slot(): a hot item's stock split in n
// segments, or a concurrency cap per tenant. n must be between 1 and
// core.MaxPermits. Every user of a name must agree on n: a request with
// another n fails with 500 (core.ErrModeMismatch), never let in beyond the
// smaller n.
func WithPermits(n int) Option { return func(c *config) { c.SetPermits(n) } }

// WithSharedMethods names the read operations: their requests take the
// names shared, requests of the other operations exclusively, so that
// reads of a resource run together and a write runs alone (Redisson's
// RReadWriteLock, Curator's InterProcessReadWriteLock, per request).
// Operations are written as the transport's Operation gives them, the same
// for HTTP and gRPC with the generated handlers ("/orders.v1.Orders/Get";
// the generated code's Operation... constants). Give the reads and the
// writes of a resource the same key.
func WithSharedMethods(operations ...string) Option {
	return func(c *config) { c.SetSharedMethods(operations...) }
}

// WithSharedIf takes the names shared for requests for which f returns
// true, and exclusively for the others: WithSharedMethods with a rule of
// your own (the transport, and for HTTP the request's method, are in ctx:
// transport.FromServerContext). operation is the request's.
func WithSharedIf(f func(ctx context.Context, operation string) bool) Option {
	return func(c *config) { c.SetSharedIf(f) }
}

// WithMaxNames bounds the names one request's key may yield (a key of
// keyfunc.All or keyfunc.Templates, or with a "[*]" field naming the items
// of a repeated field: see keyfunc.Func.Names), between 1 and 1024;
// default keyfunc.DefaultMaxNames (64). A request whose key yields more
// fails with 400 (InvalidArgument).
func WithMaxNames(n int) Option { return func(c *config) { c.SetMaxNames(n) } }

// WithRequestIDHeader names the header (HTTP transport) or metadata key
// (gRPC transport) whose value is the request id recorded in the holder of
// the locks this middleware takes (core.Holder.RequestID, which
// core.ParseHolder reads back from a lease's token and reqlock show
// prints); default "X-Request-Id" (case-insensitive). A request without it
// (or with an empty one) gives the trace-id of its W3C traceparent instead,
// else no request id: then the Locker's core.WithRequestID source, if any,
// gives one. "" reads no request id header (the traceparent still counts).
// An id that an earlier middleware put on the context
// (core.ContextWithRequestID) wins over all of these. The value is cut to
// 128 bytes and stripped of unprintable characters.
func WithRequestIDHeader(name string) Option { return func(c *config) { c.SetRequestIDHeader(name) } }
