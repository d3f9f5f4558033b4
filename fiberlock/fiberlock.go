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

// New returns a Fiber handler that locks the name key derives from each
// request while the handlers after it (c.Next) serve it. Give it to the
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
func Lease(c *fiber.Ctx) *core.Lease {
	return core.LeaseFromContext(c.UserContext())
}

// answer writes the default answer to a failure.
func answer(c *fiber.Ctx, f adapter.Failure) {
	if f.RetryAfter != "" {
		c.Set(fiber.HeaderRetryAfter, f.RetryAfter)
	}
	c.Status(f.Status)
	if f.Message != "" {
		_ = c.JSON(fiber.Map{"error": f.Message})
	}
}

// ErrRouteUnknown is wrapped, with keyfunc.ErrMissing, by the error of a
// request whose name needs a path parameter that the route running the
// middleware does not have: with app.Use or a group's middleware, Fiber runs
// it as a route of its own, before the route with the parameter matches.
// The 400 answer says so.
var ErrRouteUnknown = errors.New("fiberlock: the path parameter is not one of the route running the middleware: with app.Use or Group, the final route is not matched yet; pass the middleware to the route: app.Post(path, fiberlock.New(...), handler)")

// source is the Source of a Fiber request. Its values are copies: Fiber's
// own are valid only until the handler returns.
type source struct {
	c    *fiber.Ctx
	body keyfunc.JSONBody
}

func (s *source) Route() string { return s.c.Route().Path }

func (s *source) Param(name string) (string, error) {
	v := s.c.Params(name)
	if v == "" && !slices.Contains(s.c.Route().Params, name) {
		return "", fmt.Errorf("%w: %w", keyfunc.ErrMissing, ErrRouteUnknown)
	}
	// Fiber gives it escaped, as it is in the path, unless its UnescapePath
	// is set: two spellings of one value ("a:b", "a%3Ab") get one name.
	if u, err := url.PathUnescape(v); err == nil {
		v = u
	}
	return strings.Clone(v), nil
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
