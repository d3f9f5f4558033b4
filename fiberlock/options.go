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
