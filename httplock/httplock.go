package httplock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns a middleware that locks the name (or names) key derives from
// each request while next serves it. See the package documentation for its
// answers, its lock modes, and where it goes in chi and gorilla/mux.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) func(http.Handler) http.Handler {
	cfg := &config{}
	flow := adapter.Must(cfg.flow(l, key, opts))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// An empty route says that routing has not run only where the
			// route comes from the same router as the parameters: ServeMux's
			// r.Pattern, or WithRoute.
			src := &source{HTTPSource: keyfunc.HTTPSource{Request: r, Pattern: r.Pattern, MaxBody: flow.MaxBody()},
				routeTells: cfg.pathParam == nil || cfg.route != nil}
			if cfg.route != nil {
				src.Pattern = cfg.route(r)
			}
			if cfg.pathParam != nil {
				src.PathParam = func(name string) string { return cfg.pathParam(r, name) }
			}
			flow.Serve(r.Context(), exchange{w, r}, src, func(ctx context.Context) {
				next.ServeHTTP(w, r.WithContext(ctx)) // a copy: the caller's r keeps its own context
			})
		})
	}
}

// Check reports what New would panic with: every invalid option, a nil
// Locker or key, a Locker whose Err is not nil. The error is prefixed with
// "httplock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := (&config{}).flow(l, key, opts)
	return err
}

func (cfg *config) flow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[exchange], error) {
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("httplock", l, key, &cfg.Config, adapter.Protocol[exchange]{Answer: answer, Explain: explain})
}

// Lease returns the lease the middleware holds for r, or nil.
// One lease covers all the names of a key of several (Lease.Names); its
// Mode and, under WithPermits, its Slot tell how the request holds them.
func Lease(r *http.Request) *core.Lease {
	return core.LeaseFromContext(r.Context())
}

// exchange is one request and its response, as the options' functions see
// them.
type exchange struct {
	w http.ResponseWriter
	r *http.Request
}

// answer writes the default answer to a failure.
func answer(x exchange, f adapter.Failure) {
	if errors.Is(f.Err, ErrRouteUnknown) { // the server's set-up mistake: say which
		f.Status, f.Message = http.StatusInternalServerError, f.Err.Error()
	}
	if f.RetryAfter != "" {
		x.w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Message == "" {
		x.w.WriteHeader(f.Status)
		return
	}
	x.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	x.w.WriteHeader(f.Status)
	_ = json.NewEncoder(x.w).Encode(map[string]string{"error": f.Message})
}

// ErrRouteUnknown is wrapped by the error of a request whose name needs its
// route or a path parameter while the route is not known: the middleware
// runs before the router has matched the request, as with a top-level r.Use
// on a chi router or a middleware around a whole ServeMux. That is the
// server's set-up mistake, not the client's, so the error does not wrap
// keyfunc.ErrMissing: the default answer is 500, with the error's text
// (which names the part the key needs), and a WithErrorHandler gets the
// error to answer as it likes. A request whose route is known and lacks a
// part is still the client's (400, keyfunc.ErrMissing).
//
// It is caught when a request comes, not at start-up: the same middleware
// is rightly given to r.Use inside r.Route, and a key that needs neither the
// route nor a path parameter works before routing too.
var ErrRouteUnknown = errors.New("httplock: the middleware runs before routing, so the route and its path parameters are not known yet: " +
	"with chi, add it with r.With(...) or inside r.Route/r.Group, not with a top-level r.Use; " +
	"with ServeMux, wrap the handlers you register, not the mux")

// source is the Source of a request, which notes the first part that the
// key asked for, and did not get, while the route is not known.
type source struct {
	keyfunc.HTTPSource
	routeTells bool   // an empty Pattern means that routing has not run
	unrouted   string // "the route", `path parameter "id"`; "" when routing was not missed
}

// Route returns the route template, noting when it is not known.
func (s *source) Route() string {
	if s.Pattern == "" && s.routeTells && s.unrouted == "" {
		s.unrouted = "the route"
	}
	return s.Pattern
}

// Param returns the path parameter called name, noting when it is missing
// while the route is not known.
func (s *source) Param(name string) (string, error) {
	v, err := s.HTTPSource.Param(name)
	if v == "" && err == nil && s.Pattern == "" && s.routeTells && s.unrouted == "" {
		s.unrouted = fmt.Sprintf("path parameter %q", name)
	}
	return v, err
}

// explain turns a missing part that the route would have given into the
// server's mistake: an error wrapping ErrRouteUnknown, not keyfunc.ErrMissing.
func explain(s keyfunc.Source, err error) error {
	if src, ok := s.(*source); ok && src.unrouted != "" && errors.Is(err, keyfunc.ErrMissing) {
		return fmt.Errorf("%w (the key needs %s)", ErrRouteUnknown, src.unrouted)
	}
	return err
}
