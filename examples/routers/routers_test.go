package routers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	gorilla "github.com/gorilla/mux"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// The recipes of the package documentation, on the real routers: chi and
// gorilla/mux keep the route template and the path parameters in their own
// request context, which WithRoute and WithPathParam read.

// chiOptions are the chi recipe's options.
func chiOptions(opts ...httplock.Option) []httplock.Option {
	return append(opts,
		httplock.WithRoute(func(r *http.Request) string { return chi.RouteContext(r.Context()).RoutePattern() }),
		httplock.WithPathParam(chi.URLParam))
}

// muxOptions are the gorilla/mux recipe's options.
func muxOptions(opts ...httplock.Option) []httplock.Option {
	return append(opts,
		httplock.WithRoute(func(r *http.Request) string {
			tpl, _ := gorilla.CurrentRoute(r).GetPathTemplate()
			return tpl
		}),
		httplock.WithPathParam(func(r *http.Request, name string) string { return gorilla.Vars(r)[name] }))
}

// routeLabels returns a Locker whose acquires record their route label.
func routeLabels(t *testing.T, opts ...core.Option) (*adaptertest.Env, *adaptertest.Routes) {
	routes := &adaptertest.Routes{}
	return adaptertest.NewEnv(t, nil, append(opts, core.WithHandlers(routes.Handler()))...), routes
}

// lockedAs answers the name the request was locked under.
func lockedAs(w http.ResponseWriter, r *http.Request) {
	if l := httplock.Lease(r); l != nil {
		fmt.Fprint(w, l.Name())
	}
}

// TestChiWith: r.With(httplock.New(...)) runs after chi has routed the
// request: the name comes from the path parameter, the route template labels
// the acquire, and requests for one order never overlap while different
// orders run at once.
func TestChiWith(t *testing.T) {
	adaptertest.LeakCheck(t)
	e, label := routeLabels(t, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b"}, 6)
	lock := httplock.New(e.Locker, orderKey, chiOptions()...)

	r := chi.NewRouter()
	r.With(lock).Post("/orders/{id}", lockedAs)
	r.With(lock).Post("/orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) { x.Handle(chi.URLParam(r, "id")) })
	if w := do(r, context.Background(), "/orders/42", ""); w.Code != http.StatusOK || w.Body.String() != "order:42" {
		t.Fatalf("status %d, body %q", w.Code, w.Body)
	}
	if label.Last() != "/orders/{id}" {
		t.Fatalf("route label %q", label.Last())
	}
	x.Run(t, func(order string) error {
		if w := do(r, context.Background(), "/orders/"+order+"/pay", ""); w.Code != http.StatusOK {
			return fmt.Errorf("status %d %s", w.Code, w.Body)
		}
		return nil
	})
}

// TestChiRoute: in r.Route("/orders/{id}", ...), r.Use runs once the outer
// pattern has matched, so {id} is known there too.
func TestChiRoute(t *testing.T) {
	e, label := routeLabels(t)
	r := chi.NewRouter()
	r.Route("/orders/{id}", func(r chi.Router) {
		r.Use(httplock.New(e.Locker, orderKey, chiOptions()...))
		r.Post("/pay", lockedAs)
	})
	if w := do(r, context.Background(), "/orders/7/pay", ""); w.Code != http.StatusOK || w.Body.String() != "order:7" {
		t.Fatalf("status %d, body %q", w.Code, w.Body)
	}
	if label.Last() != "/orders/{id}/*" { // the pattern chi has matched so far
		t.Fatalf("route label %q", label.Last())
	}
}

// TestChiUseIsExplained: chi's top-level r.Use runs before routing, so the
// route and its parameters are not known yet and a key that needs them fails
// on every request. That is the server's mistake: 500, with an answer that
// says why and what to do instead, not 400. A WithErrorHandler gets an error
// wrapping ErrRouteUnknown and not keyfunc.ErrMissing (the client's fault).
// The same middleware in r.With, r.Group or r.Route locks the request.
func TestChiUseIsExplained(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	for name, tc := range map[string]struct {
		key   keyfunc.Func
		needs string
	}{
		"param": {orderKey, `path parameter "id"`},
		"route": {keyfunc.Route(), "the route"},
	} {
		var got error
		for _, custom := range []bool{false, true} {
			opts := chiOptions()
			if custom {
				opts = append(opts, httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
					got = err
					w.WriteHeader(http.StatusTeapot)
				}))
			}
			var ran atomic.Bool
			r := chi.NewRouter()
			r.Use(httplock.New(e.Locker, tc.key, opts...)) // the pitfall
			r.Post("/orders/{id}/pay", func(http.ResponseWriter, *http.Request) { ran.Store(true) })
			w := do(r, context.Background(), "/orders/42/pay", "")
			want := http.StatusInternalServerError
			if custom {
				want = http.StatusTeapot
			}
			if w.Code != want || ran.Load() {
				t.Fatalf("%s (custom error handler: %v): status %d, handler ran %v; want %d", name, custom, w.Code, ran.Load(), want)
			}
			if custom {
				continue
			}
			var body struct{ Error string }
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			for _, want := range []string{
				"httplock: the middleware runs before routing, so the route and its path parameters are not known yet",
				"with chi, add it with r.With(...) or inside r.Route/r.Group, not with a top-level r.Use",
				"(the key needs " + tc.needs + ")",
			} {
				if !strings.Contains(body.Error, want) {
					t.Errorf("%s: the 500 says %q; want it to say %q", name, body.Error, want)
				}
			}
		}
		if !errors.Is(got, httplock.ErrRouteUnknown) || errors.Is(got, keyfunc.ErrMissing) {
			t.Errorf("%s: the error handler got %v; want ErrRouteUnknown, not keyfunc.ErrMissing", name, got)
		}
	}

	// Placed after routing, the same middleware and key lock the request.
	lock := httplock.New(e.Locker, orderKey, chiOptions()...)
	for name, wire := range map[string]func(r chi.Router){
		"r.With":  func(r chi.Router) { r.With(lock).Post("/orders/{id}/pay", lockedAs) },
		"r.Group": func(r chi.Router) { r.Group(func(r chi.Router) { r.Use(lock); r.Post("/orders/{id}/pay", lockedAs) }) },
		"r.Route": func(r chi.Router) {
			r.Route("/orders/{id}", func(r chi.Router) { r.Use(lock); r.Post("/pay", lockedAs) })
		},
	} {
		r := chi.NewRouter()
		wire(r)
		if w := do(r, context.Background(), "/orders/42/pay", ""); w.Code != http.StatusOK || w.Body.String() != "order:42" {
			t.Errorf("%s: status %d, body %q; want 200 order:42", name, w.Code, w.Body)
		}
	}
}

// TestWrappedServeMuxIsExplained: the same pitfall with a ServeMux wrapped
// whole, whose Request.Pattern is set for the handlers it calls only: 500,
// and the answer says to wrap the registered handlers.
func TestWrappedServeMuxIsExplained(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	m := http.NewServeMux()
	m.HandleFunc("POST /orders/{id}", lockedAs)
	w := do(httplock.New(e.Locker, orderKey)(m), context.Background(), "/orders/42", "")
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "wrap the handlers you register, not the mux") {
		t.Fatalf("status %d, body %s", w.Code, w.Body)
	}
}

// TestRouteUnknownOnlyWhenItMatters: a key that needs neither the route nor
// a path parameter works before routing, and a missing header is not blamed
// on the route.
func TestRouteUnknownOnlyWhenItMatters(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	r := chi.NewRouter()
	r.Use(httplock.New(e.Locker, must(keyfunc.Template("tenant:{header.X-Tenant}")), chiOptions()...))
	r.Post("/orders/{id}/pay", lockedAs)
	w := do(r, context.Background(), "/orders/42/pay", "")
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "route is not known") {
		t.Fatalf("missing header: status %d, body %s", w.Code, w.Body)
	}
	req := httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil)
	req.Header.Set("X-Tenant", "acme")
	w = httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != http.StatusOK || w.Body.String() != "tenant:acme" {
		t.Fatalf("header key under r.Use: status %d, body %q", w.Code, w.Body)
	}
}

// TestGorillaMux: gorilla/mux matches the route before it calls the handler
// and its middleware (Router.Use), so wrapping a route's handler and Use on
// a subrouter both work.
func TestGorillaMux(t *testing.T) {
	adaptertest.LeakCheck(t)
	e, label := routeLabels(t, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	lock := httplock.New(e.Locker, orderKey, muxOptions()...)

	r := gorilla.NewRouter()
	r.Handle("/orders/{id}/pay", lock(http.HandlerFunc(lockedAs))).Methods(http.MethodPost)
	if w := do(r, context.Background(), "/orders/42/pay", ""); w.Code != http.StatusOK || w.Body.String() != "order:42" {
		t.Fatalf("wrapped handler: status %d, body %q", w.Code, w.Body)
	}
	if label.Last() != "/orders/{id}/pay" {
		t.Fatalf("route label %q", label.Last())
	}

	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b"}, 6)
	sub := r.PathPrefix("/v2/orders").Subrouter()
	sub.Use(lock)
	sub.HandleFunc("/{id}", func(w http.ResponseWriter, r *http.Request) { x.Handle(gorilla.Vars(r)["id"]) }).Methods(http.MethodPost)
	x.Run(t, func(order string) error {
		if w := do(r, context.Background(), "/v2/orders/"+order, ""); w.Code != http.StatusOK {
			return fmt.Errorf("status %d %s", w.Code, w.Body)
		}
		return nil
	})
	if label.Last() != "/v2/orders/{id}" {
		t.Fatalf("subrouter route label %q", label.Last())
	}
}
