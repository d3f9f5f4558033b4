package httplock

import (
	"net/http"
	"time"

	"github.com/reqlock/reqlock/internal/adapter"
)

// Option configures the middleware.
type Option func(*config)

type config struct {
	adapter.Config
	ttlFunc   func(*http.Request) time.Duration
	onError   func(http.ResponseWriter, *http.Request, error)
	onBusy    func(http.ResponseWriter, *http.Request, error)
	skip      func(*http.Request) bool
	pathParam func(r *http.Request, name string) string
	maxBody   int64
}

// WithTTL sets the TTL of the locks this middleware takes, instead of the
// Locker's.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.TTL = ttl }
}

// WithTTLFunc sets a per-request TTL: f's result when positive, else the
// WithTTL or Locker's TTL.
func WithTTLFunc(f func(r *http.Request) time.Duration) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("httplock: WithTTLFunc: nil function")
		}
		c.ttlFunc = f
	}
}

// WithWait sets the wait budget of these routes: how long a request waits
// for a busy name before it is answered 409. It can shorten the Locker's
// budget, not lengthen it.
func WithWait(wait time.Duration) Option {
	return func(c *config) { c.Wait = wait }
}

// WithRetryAfter sets the Retry-After header of the default busy answer, in
// whole seconds rounded up (default 1 s).
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.RetryAfter = d }
}

// WithFailOpen calls the next handler without a lock when Redis is
// unavailable, instead of answering 503; Lease then returns nil.
func WithFailOpen() Option {
	return func(c *config) { c.FailOpen = true }
}

// WithErrorHandler replaces the answers to every failure except a gone
// client; err wraps the sentinel of its kind. A busy name goes to the busy
// handler if one is set.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("httplock: WithErrorHandler: nil function")
		}
		c.onError = f
	}
}

// WithBusyHandler replaces the answer to a name that stayed busy for the
// whole wait budget (err wraps core.ErrTimeout).
func WithBusyHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("httplock: WithBusyHandler: nil function")
		}
		c.onBusy = f
	}
}

// WithSkip passes requests for which f returns true to the next handler
// without a lock.
func WithSkip(f func(r *http.Request) bool) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("httplock: WithSkip: nil function")
		}
		c.skip = f
	}
}

// WithPathParam reads path parameters with f instead of Request.PathValue,
// for routers that keep them elsewhere (chi.URLParam, mux.Vars).
func WithPathParam(f func(r *http.Request, name string) string) Option {
	return func(c *config) {
		if f == nil {
			c.Invalid("httplock: WithPathParam: nil function")
		}
		c.pathParam = f
	}
}

// WithMaxBody bounds the body read to find a JSON field (default
// keyfunc.DefaultMaxBody); a larger body is answered 400.
func WithMaxBody(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			c.Invalid("httplock: WithMaxBody(%d): must be positive", n)
		}
		c.maxBody = n
	}
}
