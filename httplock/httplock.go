package httplock

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the status written, without a body, when the
// client went away while the request waited for its lock (nginx's 499).
const StatusClientClosedRequest = 499

// New returns a middleware that locks the name key derives from each request
// while next serves it. See the package documentation for its answers. An
// invalid option, a nil Locker or a nil key makes every request fail with 500
// and an error wrapping core.ErrInvalidOption.
func New(l *core.Locker, key keyfunc.Func, opts ...Option) func(http.Handler) http.Handler {
	cfg := &config{Config: adapter.Config{RetryAfter: adapter.DefaultRetryAfter}}
	for i, opt := range opts {
		if opt == nil {
			cfg.Invalid("httplock: option %d is nil", i)
			continue
		}
		opt(cfg)
	}
	setupErr := cfg.Check("httplock", l, key)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cfg.skip != nil && cfg.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			if setupErr != nil {
				cfg.fail(w, r, setupErr)
				return
			}
			route := r.Pattern
			if cfg.route != nil {
				route = cfg.route(r)
			}
			src := &keyfunc.HTTPSource{Request: r, Pattern: route, MaxBody: cfg.maxBody}
			if cfg.pathParam != nil {
				src.PathParam = func(name string) string { return cfg.pathParam(r, name) }
			}
			name, err := key(src)
			if err != nil {
				cfg.fail(w, r, err)
				return
			}
			var ttl time.Duration
			if cfg.ttlFunc != nil {
				ttl = cfg.ttlFunc(r)
			}
			lease, err := cfg.Acquire(r.Context(), l, name, route, ttl)
			if err != nil {
				if cfg.FailOpen && adapter.Classify(err) == adapter.Unavailable {
					if cfg.onFailOpen != nil {
						cfg.onFailOpen(r, err)
					}
					next.ServeHTTP(w, r)
					return
				}
				cfg.fail(w, r, err)
				return
			}
			ctx, stop := adapter.Hold(r.Context(), lease)
			defer func() { // also when next panics
				stop()
				_ = lease.Release(ctx) // on failure the lock expires with its TTL
			}()
			// next gets a copy of r: the caller's r keeps its own context.
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// Lease returns the lease the middleware holds for r, or nil.
func Lease(r *http.Request) *core.Lease {
	return core.LeaseFromContext(r.Context())
}

// fail answers a request whose lock could not be taken. The next handler is
// never called from here: a custom handler cannot make it run unlocked.
func (cfg *config) fail(w http.ResponseWriter, r *http.Request, err error) {
	kind := adapter.Classify(err)
	switch {
	case kind == adapter.Canceled:
		w.WriteHeader(StatusClientClosedRequest)
	case kind == adapter.Busy && cfg.onBusy != nil:
		cfg.onBusy(w, r, err)
	case cfg.onError != nil:
		cfg.onError(w, r, err)
	default:
		status, msg := adapter.HTTPStatus(kind, err)
		if kind == adapter.Busy {
			w.Header().Set("Retry-After", strconv.Itoa(cfg.RetryAfterSeconds()))
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
}
