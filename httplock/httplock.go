package httplock

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = adapter.StatusClientClosedRequest

// New returns a middleware that locks the name key derives from each request
// while next serves it. See the package documentation for its answers.
//
// New panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) func(http.Handler) http.Handler {
	cfg := &config{}
	flow := adapter.Must(cfg.flow(l, key, opts))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			src := &keyfunc.HTTPSource{Request: r, Pattern: r.Pattern, MaxBody: flow.MaxBody()}
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
