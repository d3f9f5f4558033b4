package ginlock

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status recorded, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns a gin middleware that locks the name (or names) key derives
// from each request for the rest of the chain. See the package
// documentation for its answers and its lock modes.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) gin.HandlerFunc {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(c *gin.Context) {
		src := &source{HTTPSource: keyfunc.HTTPSource{Request: c.Request, Pattern: c.FullPath(), MaxBody: flow.MaxBody()}, c: c}
		parent := c.Request.Context()
		flow.Serve(parent, c, src, func(ctx context.Context) {
			c.Request = c.Request.WithContext(ctx)
			// Middleware before this one gets its own context back, not the
			// lease's, which is cancelled once the lock is released; also
			// when a handler panics.
			defer func() { c.Request = c.Request.WithContext(parent) }()
			c.Next()
		})
	}
}

// source is the keyfunc.Source of a gin request: an HTTPSource whose path
// parameters are gin's. It is one allocation, where an HTTPSource with
// PathParam set to the method value c.Param was two.
type source struct {
	keyfunc.HTTPSource
	c *gin.Context
}

// Param returns the gin path parameter called name.
func (s *source) Param(name string) (string, error) { return s.c.Param(name), nil }

// Check reports what New would panic with: every invalid option, a nil
// Locker or key, a Locker whose Err is not nil. The error is prefixed with
// "ginlock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newFlow(l, key, opts)
	return err
}

func newFlow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[*gin.Context], error) {
	cfg := &config{}
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("ginlock", l, key, &cfg.Config, adapter.Protocol[*gin.Context]{
		Answer: answer,
		// The chain is aborted before any answer, so that a custom handler
		// cannot run it unlocked, whatever it does.
		Refuse: func(c *gin.Context, err error) { c.Abort(); _ = c.Error(err) },
		Note:   func(c *gin.Context, err error) { _ = c.Error(err) },
	})
}

// Lease returns the lease the middleware holds for c's request, or nil.
// One lease covers all the names of a key of several (Lease.Names); its
// Mode and, under WithPermits, its Slot tell how the request holds them.
func Lease(c *gin.Context) *core.Lease {
	return core.LeaseFromContext(c.Request.Context())
}

// answer writes the default answer to a failure.
func answer(c *gin.Context, f adapter.Failure) {
	if f.RetryAfter != "" {
		c.Header("Retry-After", f.RetryAfter)
	}
	if f.Message == "" {
		c.AbortWithStatus(f.Status)
		return
	}
	c.AbortWithStatusJSON(f.Status, gin.H{"error": f.Message})
}
