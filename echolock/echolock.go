package echolock

import (
	"context"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns an Echo middleware that locks the name key derives from each
// request while the next handler serves it. See the package documentation
// for its answers and for where it goes.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) echo.MiddlewareFunc {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			param := func(name string) string { return unescaped(c.Param(name)) }
			src := &keyfunc.HTTPSource{Request: c.Request(), Pattern: c.Path(), PathParam: param, MaxBody: flow.MaxBody()}
			parent := c.Request().Context()
			flow.Serve(parent, c, src, func(ctx context.Context) {
				c.SetRequest(c.Request().WithContext(ctx))
				// Middleware before this one, and Echo's error handler,
				// get their own context back, not the lease's, which is
				// cancelled once the lock is released; also on a panic.
				defer func() { c.SetRequest(c.Request().WithContext(parent)) }()
				err = next(c)
			})
			return err
		}
	}
}

// Check reports what New would panic with: every invalid option, a nil
// Locker or key, a Locker whose Err is not nil. The error is prefixed with
// "echolock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newFlow(l, key, opts)
	return err
}

func newFlow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[echo.Context], error) {
	cfg := &config{}
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("echolock", l, key, &cfg.Config, adapter.Protocol[echo.Context]{Answer: answer})
}

// Lease returns the lease the middleware holds for c's request, or nil. It
// is in c.Request().Context(), which is what to pass on to the Locker and
// to service functions.
func Lease(c echo.Context) *core.Lease {
	return core.LeaseFromContext(c.Request().Context())
}

// answer writes the default answer to a failure.
func answer(c echo.Context, f adapter.Failure) {
	if f.RetryAfter != "" {
		c.Response().Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Message == "" {
		_ = c.NoContent(f.Status)
		return
	}
	_ = c.JSON(f.Status, map[string]string{"error": f.Message})
}

// unescaped returns a path parameter unescaped. Echo gives it as it is in
// the request's path, escaped when the path has escapes ("a%3Ab"), so that
// two spellings of one value would otherwise get two lock names; a value
// that does not unescape is kept as it is.
func unescaped(v string) string {
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
