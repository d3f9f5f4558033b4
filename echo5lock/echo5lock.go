package echo5lock

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v5"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// ErrBeforeRouting is the error of a request whose key reads the route
// template or a path parameter while the middleware runs before routing
// (it was registered with e.Pre), where neither is known yet. It is a set-up
// mistake, not a bad request: the request is answered 500 with this
// message. It wraps keyfunc.ErrUnsupported.
var ErrBeforeRouting error = beforeRoutingError{}

type beforeRoutingError struct{}

func (beforeRoutingError) Error() string {
	return "echo5lock: the middleware runs before routing (registered with e.Pre?); register it with e.Use, a group or a route"
}

func (beforeRoutingError) Unwrap() error { return keyfunc.ErrUnsupported }

// New returns an Echo v5 middleware that locks the name (or names) key
// derives from each request while the next handler serves it. See the
// package documentation for its answers, its lock modes and where it goes.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) echo.MiddlewareFunc {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) (err error) {
			src := &source{
				HTTPSource: keyfunc.HTTPSource{Request: c.Request(), Pattern: c.Path(), MaxBody: flow.MaxBody()},
				c:          c,
				unrouted:   unrouted(c),
			}
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
// "echo5lock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newFlow(l, key, opts)
	return err
}

func newFlow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[*echo.Context], error) {
	cfg := &config{}
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("echo5lock", l, key, &cfg.Config, adapter.Protocol[*echo.Context]{Answer: answer, Explain: explain})
}

// Lease returns the lease the middleware holds for c's request, or nil. It
// is in c.Request().Context(), which is what to pass on to the Locker and
// to service functions.
// One lease covers all the names of a key of several (Lease.Names); its
// Mode and, under WithPermits, its Slot tell how the request holds them.
func Lease(c *echo.Context) *core.Lease {
	return core.LeaseFromContext(c.Request().Context())
}

// answer writes the default answer to a failure.
func answer(c *echo.Context, f adapter.Failure) {
	if f.RetryAfter != "" {
		c.Response().Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Message == "" {
		_ = c.NoContent(f.Status)
		return
	}
	msg := f.Message
	if errors.Is(f.Err, ErrBeforeRouting) {
		// A set-up mistake like a bad key Func (500), but one that the
		// answer may name: it tells nothing about the request or the lock.
		msg = ErrBeforeRouting.Error()
	}
	_ = c.JSON(f.Status, map[string]string{"error": msg})
}

// unrouted reports whether Echo has not routed c's request yet: the
// middleware runs in e.Pre. The router sets the route of every request it
// has routed, also of one that matched no route (named
// echo.NotFoundRouteName or echo.MethodNotAllowedRouteName).
func unrouted(c *echo.Context) bool {
	if c.Path() != "" {
		return false
	}
	ri := c.RouteInfo()
	return ri.Name == "" && ri.Method == "" && ri.Path == "" && len(ri.Parameters) == 0
}

// source is the keyfunc.Source of an Echo request: an HTTPSource whose path
// parameters are Echo's, unescaped once, and which notes whether the key
// asked for the route or a path parameter before routing.
type source struct {
	keyfunc.HTTPSource
	c        *echo.Context
	unrouted bool // the middleware runs before routing (e.Pre)
	early    bool // the key asked for the route or a parameter while unrouted
}

func (s *source) Route() string {
	if s.unrouted {
		s.early = true
	}
	return s.Pattern
}

func (s *source) Param(name string) (string, error) {
	if s.unrouted {
		s.early = true
		return "", ErrBeforeRouting
	}
	return unescaped(s.c.Param(name), s.Request), nil
}

// explain fails with ErrBeforeRouting when the key asked for the route
// template or a path parameter before routing, whatever it made of the
// answer ("" for the route).
func explain(s keyfunc.Source, err error) error {
	if src, ok := s.(*source); ok && src.early {
		return ErrBeforeRouting
	}
	return err
}

// unescaped returns a path parameter value unescaped once, so that two
// spellings of one value ("a:b", "a%3Ab") get one lock name. Echo's default
// router takes the values from r.URL.RawPath, escaped as the client spelled
// them, when the request has one (RawPath is set only when the path's
// escaping is not the default one), and from the decoded r.URL.Path
// otherwise: only the former are unescaped, for a value such as "%41"
// (/orders/%2541) must not become "A". A value that does not unescape is
// kept as it is.
func unescaped(v string, r *http.Request) string {
	if r.URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
