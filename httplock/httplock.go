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

// New returns a middleware that locks the name key derives from each request
// while next serves it. See the package documentation for its answers, and
// for where it goes in chi and gorilla/mux.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) func(http.Handler) http.Handler {
	cfg := &config{}
	flow := adapter.Must(cfg.flow(l, key, opts))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			src := &source{HTTPSource: keyfunc.HTTPSource{Request: r, Pattern: r.Pattern, MaxBody: flow.MaxBody()}}
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
	if key != nil {
		key = explained(key)
	}
	return adapter.NewFlow("httplock", l, key, &cfg.Config, adapter.Protocol[exchange]{Answer: answer})
}

// Lease returns the lease the middleware holds for r, or nil.
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

// ErrRouteUnknown is wrapped, with keyfunc.ErrMissing, by the error of a
// request whose name needs its route or a path parameter while the route is
// not known: the middleware runs before the router has matched the request,
// as with chi's r.Use or a middleware around a whole ServeMux. The 400
// answer says so.
var ErrRouteUnknown = errors.New("httplock: the route is not known yet: with chi, use r.With(...) or r.Route(...) instead of r.Use(...); with ServeMux, wrap the handlers you register, not the mux")

// source is the Source of a request, which notes whether a route or path
// parameter was asked for while the route is not known.
type source struct {
	keyfunc.HTTPSource
	unrouted bool
}

// Route returns the route template, noting when it is not known.
func (s *source) Route() string {
	s.unrouted = s.unrouted || s.Pattern == ""
	return s.Pattern
}

// Param returns the path parameter called name, noting when it is missing
// while the route is not known.
func (s *source) Param(name string) (string, error) {
	v, err := s.HTTPSource.Param(name)
	s.unrouted = s.unrouted || (v == "" && s.Pattern == "")
	return v, err
}

// explained adds ErrRouteUnknown to a missing part that the route would
// have given.
func explained(key keyfunc.Func) keyfunc.Func {
	return func(s keyfunc.Source) (string, error) {
		name, err := key(s)
		if src, ok := s.(*source); ok && src.unrouted && errors.Is(err, keyfunc.ErrMissing) {
			err = fmt.Errorf("%w: %w", err, ErrRouteUnknown)
		}
		return name, err
	}
}
