package echolock

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns an Echo middleware that locks the name (or names) key
// derives from each request while the next handler serves it. See the
// package documentation for its answers, its lock modes and where it goes.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) echo.MiddlewareFunc {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			param := func(name string) string { return unescaped(c.Param(name), c.Request()) }
			src := &source{HTTPSource: keyfunc.HTTPSource{Request: c.Request(), Pattern: c.Path(), PathParam: param, MaxBody: flow.MaxBody()}, c: c}
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
	return adapter.NewFlow("echolock", l, key, &cfg.Config, adapter.Protocol[echo.Context]{Answer: answer, Explain: explain})
}

// Lease returns the lease the middleware holds for c's request, or nil. It
// is in c.Request().Context(), which is what to pass on to the Locker and
// to service functions.
// One lease covers all the names of a key of several (Lease.Names); its
// Mode and, under WithPermits, its Slot tell how the request holds them.
func Lease(c echo.Context) *core.Lease {
	return core.LeaseFromContext(c.Request().Context())
}

// answer writes the default answer to a failure.
func answer(c echo.Context, f adapter.Failure) {
	if errors.Is(f.Err, ErrBeforeRouting) {
		// A set-up mistake like a bad key Func (500), but one that the
		// answer may name: it tells nothing about the request or the lock.
		f.Status, f.Message = http.StatusInternalServerError, ErrBeforeRouting.Error()
	}
	if f.RetryAfter != "" {
		c.Response().Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Message == "" {
		_ = c.NoContent(f.Status)
		return
	}
	_ = c.JSON(f.Status, map[string]string{"error": f.Message})
}

// unescaped returns a path parameter value unescaped once, so that two
// spellings of one value ("a%3Ab", "a:b") get one lock name. Echo's router
// takes the values from r.URL.RawPath, escaped as the client spelled them,
// when the request has one (RawPath is set only when the path's escaping
// is not the default), and from the decoded r.URL.Path otherwise: only the
// former are unescaped, for a value such as "%41" (/orders/%2541) must not
// become "A". A value that does not unescape is kept as it is.
func unescaped(v string, r *http.Request) string {
	if r.URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// ErrBeforeRouting is the error of a request whose key reads the route
// template or a path parameter while the middleware runs before routing (it
// was registered with e.Pre), where neither is known yet: c.Path() and
// c.Param are still empty, although the request matches a route. It is a
// set-up mistake, not a bad request: the request is answered 500 with this
// message, or the error goes to WithErrorHandler. It wraps
// keyfunc.ErrUnsupported, not keyfunc.ErrMissing. echo5lock has the same.
//
// It is caught when a request comes, not at start-up: Echo gives e.Pre no
// way to tell its middleware where it stands, and a key that needs neither
// the route nor a path parameter works in e.Pre too. A request that
// matches no route at all lacks the parameter as under e.Use (400): Echo v4
// does not tell e.Pre from e.Use for it.
var ErrBeforeRouting error = beforeRoutingError{}

type beforeRoutingError struct{}

func (beforeRoutingError) Error() string {
	return "echolock: the middleware runs before routing (registered with e.Pre?); register it with e.Use, a group or a route"
}

func (beforeRoutingError) Unwrap() error { return keyfunc.ErrUnsupported }

// source is the Source of an Echo request, which notes whether the key asked
// for the route or a path parameter, and did not get it, while no route is
// set on c.
type source struct {
	keyfunc.HTTPSource
	c     echo.Context
	early bool
}

// Route returns the route template, noting when it is not known.
func (s *source) Route() string {
	s.early = s.early || s.Pattern == ""
	return s.Pattern
}

// Param returns the path parameter called name, noting when it is missing
// while no route is set.
func (s *source) Param(name string) (string, error) {
	v, err := s.HTTPSource.Param(name)
	s.early = s.early || (v == "" && s.Pattern == "")
	return v, err
}

// explain fails with ErrBeforeRouting when the key lacked the route or a
// path parameter because the middleware runs before routing.
func explain(s keyfunc.Source, err error) error {
	if src, ok := s.(*source); ok && src.early && errors.Is(err, keyfunc.ErrMissing) && beforeRouting(src.c) {
		return ErrBeforeRouting
	}
	return err
}

// beforeRouting reports whether the middleware runs before Echo has routed
// c's request: no route is set on c (c.Path() is ""), yet Echo's router has
// one for the request. Under e.Use, c.Path() is "" only for a request that
// matches no route, and the router finds none for it either. (Echo v5 tells
// the two apart by c.RouteInfo(); v4 has no such record.)
func beforeRouting(c echo.Context) bool {
	e := c.Echo()
	if c.Path() != "" || e == nil {
		return false
	}
	r := c.Request()
	router := e.Router()
	if hosts := e.Routers(); len(hosts) > 0 { // e.Host routers, as Echo picks them
		if hr, ok := hosts[r.Host]; ok {
			router = hr
		}
	}
	probe := e.NewContext(r, nil) // Find writes its match into the context: not c's
	router.Find(r.Method, echo.GetPath(r), probe)
	return probe.Path() != ""
}
