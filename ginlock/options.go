package ginlock

import (
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures the middleware.
type Option func(*config)

type config struct {
	adapter.Config
	ttlFunc func(*gin.Context) time.Duration
	onError func(*gin.Context, error)
	onBusy  func(*gin.Context, error)
	skip    func(*gin.Context) bool
	maxBody int64
}

// WithTTL sets the TTL of the locks this middleware takes (per route),
// instead of the Locker's. A TTL set earlier with core.ContextWithTTL is
// overridden too.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.TTL = ttl }
}

// WithTTLFunc sets a per-request TTL: f's result when positive, else the
// per-route or Locker's TTL. Use it for requests known to be slow.
func WithTTLFunc(f func(c *gin.Context) time.Duration) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("ginlock: WithTTLFunc: nil function")
		}
		c.ttlFunc = f
	}
}

// WithWait sets the wait budget of this route: how long a request waits for
// a busy name before it is answered 409. It can shorten the Locker's budget
// (core.WithWait), not lengthen it.
func WithWait(wait time.Duration) Option {
	return func(c *config) { c.Wait = wait }
}

// WithRetryAfter sets the Retry-After header of the default busy answer, in
// whole seconds rounded up (default 1 s).
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.RetryAfter = d }
}

// WithFailOpen runs the handler without a lock when Redis is unavailable,
// instead of answering 503. The storage error is attached to the gin context
// (c.Error), and Lease(c) returns nil. Choose it only for routes where a
// duplicate run is cheaper than an outage.
func WithFailOpen() Option {
	return func(c *config) { c.FailOpen = true }
}

// WithErrorHandler replaces the answers to every failure except a gone
// client: f must write the response and abort the chain (c.Abort). err wraps
// the sentinel of its kind (keyfunc.ErrMissing, core.ErrTimeout,
// core.ErrStorage...). A busy name goes to the busy handler if one is set.
func WithErrorHandler(f func(c *gin.Context, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("ginlock: WithErrorHandler: nil function")
		}
		c.onError = f
	}
}

// WithBusyHandler replaces the answer to a name that stayed busy for the
// whole wait budget (err wraps core.ErrTimeout): f must write the response and
// abort the chain.
func WithBusyHandler(f func(c *gin.Context, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("ginlock: WithBusyHandler: nil function")
		}
		c.onBusy = f
	}
}

// WithSkip passes requests for which f returns true on to the handler
// without a lock (say, GET requests on a route group).
func WithSkip(f func(c *gin.Context) bool) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("ginlock: WithSkip: nil function")
		}
		c.skip = f
	}
}

// WithMaxBody bounds the body read to find a JSON field (default
// keyfunc.DefaultMaxBody); a larger body is answered 400.
func WithMaxBody(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			c.Invalid("ginlock: WithMaxBody(%d): must be positive", n)
		}
		c.maxBody = n
	}
}
