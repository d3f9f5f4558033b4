package fiberlock

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures the middleware. An invalid one makes New panic (see
// Check).
//
// Per-request settings win over per-route ones, which win over the
// Locker's. The TTL of a lock is WithTTLFunc's result when positive, else a
// TTL set on the request context by an earlier middleware
// (core.ContextWithTTL on c.UserContext()), else WithTTL's, else the
// Locker's (core.WithTTL). The wait budget is one set on the request context
// (core.ContextWithWait), else WithWait's, else the Locker's (core.WithWait).
type Option func(*config)

type config struct {
	adapter.Config[*fiber.Ctx]
}

// WithTTL sets the TTL of the locks this middleware takes (per route),
// instead of the Locker's; 0 keeps the Locker's. A per-request TTL
// (WithTTLFunc, or core.ContextWithTTL set by an earlier middleware)
// overrides it. A TTL outside [1ms, core.MaxTTL] is invalid.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.SetTTL(ttl) } }

// WithTTLFunc sets a per-request TTL: f's result when positive, else the
// TTL on the request context (core.ContextWithTTL), WithTTL's or the
// Locker's. Use it for requests known to be slow.
func WithTTLFunc(f func(c *fiber.Ctx) time.Duration) Option {
	return func(c *config) { c.SetTTLFunc(f) }
}

// WithWait sets the wait budget of this route, instead of the Locker's
// (core.WithWait): how long a request waits for a busy name before it is
// answered 409. It may be longer or shorter than the Locker's; 0 means one
// attempt, no waiting; a negative wait is invalid. The request's deadline
// cuts it; a wait set on the request context by an earlier middleware
// (core.ContextWithWait) overrides it. It bounds the waiting for another
// holder only: a Redis call in flight ends at the Locker's I/O timeout, so a
// stalled Redis is answered 503 (or fails open), never 409.
func WithWait(wait time.Duration) Option { return func(c *config) { c.SetWait(wait) } }

// WithRetryAfter sets the Retry-After header of the default busy answer, in
// whole seconds rounded up (default 1 s).
func WithRetryAfter(d time.Duration) Option { return func(c *config) { c.SetRetryAfter(d) } }

// WithFailOpen runs the handler without a lock when Redis is unavailable
// (core.ErrStorage only), instead of answering 503; Lease(c) then returns
// nil. WithFailOpenHook also reports the storage error. Choose it only for
// routes where a duplicate run is cheaper than an outage.
func WithFailOpen() Option { return func(c *config) { c.SetFailOpen() } }

// WithFailOpenHook is WithFailOpen, and calls f with the storage error
// before the handler runs unlocked, to log or count the requests that ran
// without a lock. f must not write the response.
func WithFailOpenHook(f func(c *fiber.Ctx, err error)) Option {
	return func(c *config) { c.SetFailOpenHook(f) }
}

// WithErrorHandler replaces the answers to every failure except a gone
// client: f writes the response (c.Status(...).JSON(...), say); the
// middleware does not call the next handler, and f must not either (a
// c.Next in f runs the route's handler without the lock); nothing is
// returned to Fiber's ErrorHandler. err wraps the sentinel of
// its kind (keyfunc.ErrMissing, core.ErrTimeout, core.ErrStorage...). A busy
// name goes to the busy handler if one is set.
func WithErrorHandler(f func(c *fiber.Ctx, err error)) Option {
	return func(c *config) { c.SetErrorHandler(f) }
}

// WithBusyHandler replaces the answer to a name that stayed busy for the
// whole wait budget (err wraps core.ErrTimeout): f writes the response; the
// middleware does not call the next handler, and f must not either.
func WithBusyHandler(f func(c *fiber.Ctx, err error)) Option {
	return func(c *config) { c.SetBusyHandler(f) }
}

// WithSkip passes requests for which f returns true on to the handler
// without a lock (say, requests with a dry-run query parameter).
func WithSkip(f func(c *fiber.Ctx) bool) Option { return func(c *config) { c.SetSkip(f) } }

// WithMaxBody bounds the body parsed to find a JSON field (default
// keyfunc.DefaultMaxBody); a larger body is answered 400. Fiber has read the
// whole body already, up to its own limit (fiber.Config's BodyLimit).
func WithMaxBody(n int64) Option { return func(c *config) { c.SetMaxBody(n) } }

// WithShared takes the route's names shared (core.Shared), the read side of
// a read-write lock: its requests run together, and never beside a request
// that holds one of the names exclusively (another route's, or another
// service's); a waiting exclusive request goes first, so writers do not
// starve. A route has one lock mode: WithShared, WithPermits,
// WithSharedReads and WithSharedIf exclude each other.
func WithShared() Option { return func(c *config) { c.SetShared() } }

// WithPermits lets up to n requests hold each of the route's names at once
// (core.Permits), each in its own slot, 0 to n-1, that the handler reads
// from fiberlock.Lease(c).Slot(): a hot item's stock split in n segments, or a
// concurrency cap per tenant. n must be between 1 and core.MaxPermits.
// Every user of a name must agree on n: a request with another n is
// refused (500, core.ErrModeMismatch), never let in beyond the smaller n.
func WithPermits(n int) Option { return func(c *config) { c.SetPermits(n) } }

// WithSharedReads takes the names shared for GET and HEAD requests and
// exclusively for the other methods: reads of a resource run together, a
// write runs alone (Redisson's RReadWriteLock, Curator's
// InterProcessReadWriteLock, per request). Give the reads and the writes of
// a resource the same key: app.Get and app.Put of "/orders/:id" each with
// fiberlock.New(locker, key, fiberlock.WithSharedReads()), or one handler for all
// methods (app.All).
func WithSharedReads() Option {
	return func(c *config) { c.SetSharedReads(func(c *fiber.Ctx) string { return c.Method() }) }
}

// WithSharedIf takes the names shared for requests for which f returns
// true, and exclusively for the others: WithSharedReads with a rule of your
// own.
func WithSharedIf(f func(c *fiber.Ctx) bool) Option { return func(c *config) { c.SetSharedIf(f) } }

// WithMaxNames bounds the names one request's key may yield (a key of
// keyfunc.All or keyfunc.Templates, or with a "[*]" field naming the items
// of a JSON array: see keyfunc.Func.Names), between 1 and 1024; default
// keyfunc.DefaultMaxNames (64). A request whose key yields more is
// answered 400.
func WithMaxNames(n int) Option { return func(c *config) { c.SetMaxNames(n) } }

// WithRequestIDHeader names the header whose value is the request id
// recorded in the holder of the locks this middleware takes
// (core.Holder.RequestID, which core.ParseHolder reads back from a lease's
// token and reqlock show prints); default "X-Request-Id". A request without
// it (or with an empty one) gives the trace-id of its W3C traceparent
// header instead, else no request id: then the Locker's core.WithRequestID
// source, if any, gives one. "" reads no request id header (the traceparent
// still counts). An id that an earlier middleware put on the context
// (core.ContextWithRequestID) wins over all of these. The value is cut to
// 128 bytes and stripped of unprintable characters (control characters,
// say).
func WithRequestIDHeader(name string) Option { return func(c *config) { c.SetRequestIDHeader(name) } }
