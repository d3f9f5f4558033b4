package fiberlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// request context (c.UserContext()) was cancelled while the request waited
// for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns a Fiber handler that locks the name (or names) key derives
// from each request while the handlers after it (c.Next) serve it. Give it to the
// route, before the route's handler: app.Post(path, fiberlock.New(...),
// handler); not to app.Use (see the package documentation).
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) fiber.Handler {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(c *fiber.Ctx) (err error) {
		parent := c.UserContext()
		flow.Serve(parent, c, &source{c: c, body: keyfunc.JSONBody{MaxBody: flow.MaxBody()}}, func(ctx context.Context) {
			c.SetUserContext(ctx)
			// Handlers before this one get their own context back, not the
			// lease's, which is cancelled once the lock is released; also
			// on a panic.
			defer c.SetUserContext(parent)
			err = c.Next()
		})
		return err
	}
}

// Check reports what New would panic with: every invalid option, a nil
// Locker or key, a Locker whose Err is not nil. The error is prefixed with
// "fiberlock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newFlow(l, key, opts)
	return err
}

func newFlow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[*fiber.Ctx], error) {
	cfg := &config{}
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("fiberlock", l, key, &cfg.Config, adapter.Protocol[*fiber.Ctx]{Answer: answer})
}

// Lease returns the lease the middleware holds for c's request, or nil. It
// is in c.UserContext(), which is what to pass on to the Locker and to
// service functions.
// One lease covers all the names of a key of several (Lease.Names); its
// Mode and, under WithPermits, its Slot tell how the request holds them.
func Lease(c *fiber.Ctx) *core.Lease {
	return core.LeaseFromContext(c.UserContext())
}

// answer writes the default answer to a failure.
func answer(c *fiber.Ctx, f adapter.Failure) {
	if errors.Is(f.Err, ErrRouteUnknown) { // the server's set-up mistake: say which
		f.Status, f.Message = fiber.StatusInternalServerError, f.Err.Error()
	}
	if f.RetryAfter != "" {
		c.Set(fiber.HeaderRetryAfter, f.RetryAfter)
	}
	c.Status(f.Status)
	if f.Message != "" {
		_ = c.JSON(fiber.Map{"error": f.Message})
	}
}

// ErrRouteUnknown is the error of a request whose name needs a path
// parameter while the middleware runs before any route of the request has
// matched: it was given to app.Use or to a group's middleware
// (app.Group(prefix, lock), Group.Use), which Fiber runs as routes of their
// own, whose parameters are those of their own prefix, before the route with
// the parameter. That is a set-up mistake, not a bad request: it is answered
// 500 with this message (the error does not wrap keyfunc.ErrMissing), or
// goes to WithErrorHandler. A route that the middleware is given to and
// that has no such parameter is answered 400 (keyfunc.ErrMissing, naming the
// route): the key does not fit it.
//
// It is caught when a request comes, not at start-up: Fiber does not tell a
// handler where it is registered, and a key that needs no path parameter
// works in app.Use too.
var ErrRouteUnknown = errors.New("fiberlock: the middleware was registered with app.Use (or as a group's middleware), " +
	"where Fiber runs it before the request's route and its path parameters are known; " +
	"register it on the route instead: app.Post(path, fiberlock.New(...), handler)")

// source is the Source of a Fiber request. Its values are copies: Fiber's
// own are valid only until the handler returns.
type source struct {
	c    *fiber.Ctx
	body keyfunc.JSONBody
}

func (s *source) Route() string { return s.c.Route().Path }

func (s *source) Param(name string) (string, error) {
	v := s.c.Params(name)
	if v == "" && !hasParam(s.c, name) {
		if useRoute(s.c) {
			// app.Use or a group's middleware: the request's route has
			// not matched yet.
			return "", ErrRouteUnknown
		}
		// The route has no such parameter: the key does not fit it.
		return "", fmt.Errorf("%w: the route %q running the middleware has no path parameter %q",
			keyfunc.ErrMissing, s.c.Route().Path, name)
	}
	// Fiber gives it escaped, as it is in the path, unless its UnescapePath
	// is set: two spellings of one value ("a:b", "a%3Ab") get one name.
	// Once only: with UnescapePath, "a%2541" is already "a%41".
	if strings.IndexByte(v, '%') >= 0 && !s.c.App().Config().UnescapePath {
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
	}
	return strings.Clone(v), nil
}

// hasParam reports whether the route running the middleware has a path
// parameter called name, matched as c.Params matches it ("*" is "*1",
// case-insensitive unless fiber.Config's CaseSensitive is set).
func hasParam(c *fiber.Ctx, name string) bool {
	if name == "*" || name == "+" {
		name += "1"
	}
	caseSensitive := c.App().Config().CaseSensitive
	return slices.ContainsFunc(c.Route().Params, func(p string) bool {
		return p == name || (!caseSensitive && strings.EqualFold(p, name))
	})
}

// useRoute reports whether the route running the middleware was registered
// by app.Use or as a group's middleware. Fiber v2 keeps that flag
// unexported (and has no Ctx.Matched, as v3 has), but app.GetRoutes(true)
// leaves those routes out, and each route it returns is a copy that shares
// its Handlers array with the route it copies. Called only for a request
// that is about to be refused.
func useRoute(c *fiber.Ctx) bool {
	hs := c.Route().Handlers
	if len(hs) == 0 {
		return false
	}
	for _, r := range c.App().GetRoutes(true) {
		if len(r.Handlers) > 0 && &r.Handlers[0] == &hs[0] {
			return false
		}
	}
	return true
}

func (s *source) Query(name string) (string, error) { return strings.Clone(s.c.Query(name)), nil }

func (s *source) Header(name string) (string, error) { return strings.Clone(s.c.Get(name)), nil }

// Field reads the body Fiber has buffered (up to its BodyLimit), parsed once.
func (s *source) Field(path string) (string, error) {
	if s.body.Body == nil {
		s.body.Body = s.c.Body()
	}
	return s.body.Field(path)
}

var _ keyfunc.ArraySource = (*source)(nil)

// Fields reads the items of a JSON array of the body, for a key with a
// "[*]" field path (keyfunc.ArraySource): every item of the array, parsed
// once with the rest of the body.
func (s *source) Fields(path string) ([]string, error) {
	if s.body.Body == nil {
		s.body.Body = s.c.Body()
	}
	return s.body.Fields(path)
}
