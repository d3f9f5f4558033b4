package ginlock

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status recorded, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = 499

// New returns a gin middleware that locks the name key derives from each
// request for the rest of the chain. See the package documentation for its
// answers. An invalid option, a nil Locker or a nil key makes every request
// fail with 500 and an error wrapping core.ErrInvalidOption; check the
// Locker's own options with its Err at start-up.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) gin.HandlerFunc {
	cfg := &config{Config: adapter.Config{RetryAfter: adapter.DefaultRetryAfter}}
	for i, opt := range opts {
		if opt == nil {
			cfg.Invalid("ginlock: option %d is nil", i)
			continue
		}
		opt(cfg)
	}
	setupErr := cfg.Check("ginlock", l, key)
	return func(c *gin.Context) {
		if cfg.skip != nil && cfg.skip(c) {
			c.Next()
			return
		}
		if setupErr != nil {
			cfg.fail(c, setupErr)
			return
		}
		src := &keyfunc.HTTPSource{Request: c.Request, Pattern: c.FullPath(), PathParam: c.Param, MaxBody: cfg.maxBody}
		name, err := key(src)
		if err != nil {
			cfg.fail(c, err)
			return
		}
		var ttl time.Duration
		if cfg.ttlFunc != nil {
			ttl = cfg.ttlFunc(c)
		}
		parent := c.Request.Context()
		lease, err := cfg.Acquire(parent, l, name, c.FullPath(), ttl)
		if err != nil {
			if cfg.FailOpen && adapter.Classify(err) == adapter.Unavailable {
				_ = c.Error(err)
				if cfg.onFailOpen != nil {
					cfg.onFailOpen(c, err)
				}
				c.Next()
				return
			}
			cfg.fail(c, err)
			return
		}
		ctx, stop := adapter.Hold(parent, lease)
		c.Request = c.Request.WithContext(ctx)
		defer func() { // also when a handler panics
			stop()
			// Middleware before this one gets its own context back, not the
			// lease's, which is cancelled now.
			c.Request = c.Request.WithContext(parent)
			if err := lease.Release(ctx); err != nil {
				_ = c.Error(err)
			}
		}()
		c.Next()
	}
}

// Lease returns the lease the middleware holds for c's request, or nil.
func Lease(c *gin.Context) *core.Lease {
	return core.LeaseFromContext(c.Request.Context())
}

// fail answers a request whose lock could not be taken, and aborts the
// chain whatever a custom handler did: the handler must not run unlocked.
func (cfg *config) fail(c *gin.Context, err error) {
	defer c.Abort()
	_ = c.Error(err)
	kind := adapter.Classify(err)
	switch {
	case kind == adapter.Canceled:
		c.AbortWithStatus(StatusClientClosedRequest)
	case kind == adapter.Busy && cfg.onBusy != nil:
		cfg.onBusy(c, err)
	case cfg.onError != nil:
		cfg.onError(c, err)
	default:
		cfg.answer(c, kind, err)
	}
}

// answer writes the default answer of a failure of kind.
func (cfg *config) answer(c *gin.Context, kind adapter.Outcome, err error) {
	status, msg := adapter.HTTPStatus(kind, err)
	if kind == adapter.Busy {
		c.Header("Retry-After", strconv.Itoa(cfg.RetryAfterSeconds()))
	}
	c.AbortWithStatusJSON(status, gin.H{"error": msg})
}
