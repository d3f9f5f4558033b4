package httplock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

var orderKey, _ = keyfunc.Template("order:{param.id}")

// mux serves POST /orders/{id} with h behind mw, and recovers panics.
func mux(mw func(http.Handler) http.Handler, h http.HandlerFunc) http.Handler {
	m := http.NewServeMux()
	m.Handle("POST /orders/{id}", mw(h))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		m.ServeHTTP(w, r)
	})
}

func do(h http.Handler, ctx context.Context, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body)))
	return w
}

func TestOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b"}, 6)
	h := mux(httplock.New(e.Locker, orderKey), func(w http.ResponseWriter, r *http.Request) { x.Handle(r.PathValue("id")) })
	x.Run(t, func(order string) error {
		if w := do(h, context.Background(), "/orders/"+order, ""); w.Code != http.StatusOK {
			return fmt.Errorf("status %d %s", w.Code, w.Body)
		}
		return nil
	})
}

func TestAnswers(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	down := redistest.Start(t)
	dead := adaptertest.NewEnv(t, down, core.WithIOTimeout(300*time.Millisecond))
	down.Stop()
	gone, cancel := context.WithCancel(context.Background())
	cancel()

	var ran atomic.Int64
	handler := func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if httplock.Lease(r) != nil {
			io.WriteString(w, "locked")
		}
	}
	tenantKey, _ := keyfunc.Template("order:{param.id}:{header.X-Tenant}")
	for _, tc := range []struct {
		name   string
		mw     func(http.Handler) http.Handler
		ctx    context.Context
		path   string
		status int
		ran    bool
		body   string // in the JSON error, or the exact body
	}{
		{"missing part", httplock.New(e.Locker, tenantKey), nil, "/orders/1", 400, false, `header "X-Tenant"`},
		{"busy", httplock.New(e.Locker, orderKey, httplock.WithWait(20*time.Millisecond), httplock.WithRetryAfter(3*time.Second)), nil, "/orders/" + id, 409, false, "busy"},
		{"redis down", httplock.New(dead.Locker, orderKey), nil, "/orders/1", 503, false, "unavailable"},
		{"fail open", httplock.New(dead.Locker, orderKey, httplock.WithFailOpen()), nil, "/orders/1", 200, true, ""},
		{"client gone", httplock.New(e.Locker, orderKey), gone, "/orders/" + id, 499, false, ""},
		{"bad key func", httplock.New(e.Locker, keyfunc.Param("")), nil, "/orders/1", 500, false, "internal error"},
		{"locked", httplock.New(e.Locker, orderKey), nil, "/orders/free" + id, 200, true, "locked"},
	} {
		ran.Store(0)
		ctx := tc.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		w := do(mux(tc.mw, handler), ctx, tc.path, "")
		body := w.Body.String()
		if w.Code >= 400 && w.Body.Len() > 0 {
			var e struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Errorf("%s: body %q is not a JSON error", tc.name, body)
			}
			body = e.Error
		}
		if w.Code != tc.status || (ran.Load() == 1) != tc.ran || !strings.Contains(body, tc.body) || (tc.body == "" && body != "") {
			t.Errorf("%s: status %d, handler ran %d, body %q; want %d, %v, %q", tc.name, w.Code, ran.Load(), body, tc.status, tc.ran, tc.body)
		}
		if tc.name == "busy" && w.Header().Get("Retry-After") != "3" {
			t.Errorf("busy: Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
}

func TestCustomHandlersAndPathParam(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	var busy, other error
	mw := httplock.New(e.Locker, orderKey, httplock.WithWait(time.Millisecond),
		httplock.WithBusyHandler(func(w http.ResponseWriter, r *http.Request, err error) { busy = err; w.WriteHeader(429) }),
		httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) { other = err; w.WriteHeader(422) }),
		httplock.WithPathParam(func(r *http.Request, name string) string { return r.URL.Query().Get(name) }))
	h := mux(mw, func(http.ResponseWriter, *http.Request) {})
	if w := do(h, context.Background(), "/orders/x?id="+id, ""); w.Code != 429 || !errors.Is(busy, core.ErrTimeout) {
		t.Errorf("busy handler: %d %v", w.Code, busy)
	}
	if w := do(h, context.Background(), "/orders/x", ""); w.Code != 422 || !errors.Is(other, keyfunc.ErrMissing) {
		t.Errorf("error handler: %d %v", w.Code, other)
	}
	skip := mux(httplock.New(e.Locker, orderKey, httplock.WithSkip(func(*http.Request) bool { return true })), func(http.ResponseWriter, *http.Request) {})
	if w := do(skip, context.Background(), "/orders/"+id, ""); w.Code != 200 {
		t.Errorf("skip: %d", w.Code)
	}
}

func TestBodyPanicLostLeaseAndRoute(t *testing.T) {
	adaptertest.LeakCheck(t)
	var route adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(route.Handler()))
	id := adaptertest.Uniq(t)

	// The body read for the name is the handler's too.
	h := mux(httplock.New(e.Locker, keyfunc.Field("id")), func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|%s", httplock.Lease(r).Name(), b)
	})
	if w := do(h, context.Background(), "/orders/1", `{"id":"`+id+`"}`); w.Body.String() != keyfunc.Escape(id)+`|{"id":"`+id+`"}` {
		t.Fatalf("body: %q", w.Body)
	}
	if route.Last() != "POST /orders/{id}" {
		t.Fatalf("AcquireCall.Route = %q", route.Last())
	}

	// Released after a panic.
	h = mux(httplock.New(e.Locker, orderKey), func(http.ResponseWriter, *http.Request) { panic("bug") })
	if w := do(h, context.Background(), "/orders/"+id, ""); w.Code != 500 || e.Exists(t, "order:"+id) {
		t.Fatalf("after a panic: status %d, still held %v", w.Code, e.Exists(t, "order:"+id))
	}

	// The request context ends when the TTL runs out.
	var cause error
	h = mux(httplock.New(e.Locker, orderKey, httplock.WithTTL(50*time.Millisecond)), func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cause = context.Cause(r.Context())
		case <-time.After(10 * time.Second):
		}
	})
	do(h, context.Background(), "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("lost lease: cause %v", cause)
	}
}

// TestCustomHandlersNeverCallNext: the busy and error handlers answer, and the
// next handler does not run, whatever they write (here: nothing at all).
func TestCustomHandlersNeverCallNext(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	silent := func(http.ResponseWriter, *http.Request, error) {}
	for name, tc := range map[string]struct {
		mw   func(http.Handler) http.Handler
		path string
	}{
		"busy handler":             {httplock.New(e.Locker, orderKey, httplock.WithWait(0), httplock.WithBusyHandler(silent)), "/orders/" + id},
		"error handler, busy":      {httplock.New(e.Locker, orderKey, httplock.WithWait(0), httplock.WithErrorHandler(silent)), "/orders/" + id},
		"error handler, no tenant": {httplock.New(e.Locker, keyfunc.Header("X-Tenant"), httplock.WithErrorHandler(silent)), "/orders/1"},
		"error handler, bad key":   {httplock.New(e.Locker, keyfunc.Param(""), httplock.WithErrorHandler(silent)), "/orders/1"},
	} {
		var ran atomic.Bool
		do(mux(tc.mw, func(http.ResponseWriter, *http.Request) { ran.Store(true) }), context.Background(), tc.path, "")
		if ran.Load() {
			t.Errorf("%s: the next handler ran", name)
		}
	}
}

// TestCallerKeepsItsRequestContext: the handler that called the middleware
// keeps its own request, whose context is not the lease's and is not
// cancelled when the lock is released.
func TestCallerKeepsItsRequestContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	var inside *core.Lease
	lock := mux(httplock.New(e.Locker, orderKey), func(w http.ResponseWriter, r *http.Request) { inside = httplock.Lease(r) })
	var after context.Context
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lock.ServeHTTP(w, r)
		after = r.Context()
	})
	do(outer, context.Background(), "/orders/"+adaptertest.Uniq(t), "")
	if inside == nil || after.Err() != nil || core.LeaseFromContext(after) != nil {
		t.Fatalf("locked inside: %v; the caller's context after: err %v, carries a lease: %v", inside != nil, after.Err(), core.LeaseFromContext(after) != nil)
	}
}

// TestWithRouteForOtherRouters: a router that sets no Request.Pattern (chi,
// gorilla/mux) gives the route with WithRoute and path parameters with
// WithPathParam; the route is the {route} part and the telemetry label.
func TestWithRouteForOtherRouters(t *testing.T) {
	var label adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(label.Handler()))
	key := must(keyfunc.Template("{route}|{param.id}"))
	mw := httplock.New(e.Locker, key,
		httplock.WithRoute(func(*http.Request) string { return "/orders/{id}" }),
		httplock.WithPathParam(func(r *http.Request, name string) string { return strings.TrimPrefix(r.URL.Path, "/orders/") }))
	var name string
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { name = httplock.Lease(r).Name() }))
	do(h, context.Background(), "/orders/7", "") // no ServeMux: r.Pattern is ""
	if name != "/orders/%7Bid%7D|7" || label.Last() != "/orders/{id}" {
		t.Fatalf("name %q, route label %q", name, label.Last())
	}
}

// TestStalledRedisIs503OrFailOpen: a Redis that accepts connections but
// never replies is unavailable, not busy, even with a per-route wait shorter
// than the I/O timeout; fail-open then calls next and reports the storage
// error to its hook.
func TestStalledRedisIs503OrFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	var ran atomic.Int64
	handler := func(http.ResponseWriter, *http.Request) { ran.Add(1) }
	w := do(mux(httplock.New(l, orderKey, httplock.WithWait(20*time.Millisecond)), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	var seen error
	mw := httplock.New(l, orderKey, httplock.WithWait(20*time.Millisecond), httplock.WithFailOpenHook(func(r *http.Request, err error) { seen = err }))
	w = do(mux(mw, handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: status %d, handler ran %d, hook got %v", w.Code, ran.Load(), seen)
	}
}

// TestTTLPrecedence: WithTTLFunc, then core.ContextWithTTL set by an earlier
// middleware, then WithTTL, then the Locker's.
func TestTTLPrecedence(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var pttl time.Duration
	handler := func(w http.ResponseWriter, r *http.Request) {
		pttl = e.Client.PTTL(r.Context(), httplock.Lease(r).Key()).Val()
	}
	slow := httplock.WithTTLFunc(func(r *http.Request) time.Duration {
		if r.URL.Query().Get("slow") != "" {
			return 2 * time.Hour
		}
		return 0
	})
	for _, tc := range []struct {
		ctxTTL   time.Duration
		path     string
		min, max time.Duration
	}{
		{0, "/orders/1", 55 * time.Second, time.Minute},
		{time.Hour, "/orders/2", 59 * time.Minute, time.Hour},
		{time.Hour, "/orders/3?slow=1", 119 * time.Minute, 2 * time.Hour},
	} {
		ctx := context.Background()
		if tc.ctxTTL > 0 {
			ctx = core.ContextWithTTL(ctx, tc.ctxTTL)
		}
		do(mux(httplock.New(e.Locker, orderKey, httplock.WithTTL(time.Minute), slow), handler), ctx, tc.path, "")
		if pttl < tc.min || pttl > tc.max {
			t.Errorf("%s (context TTL %v): PTTL %v, want in [%v, %v]", tc.path, tc.ctxTTL, pttl, tc.min, tc.max)
		}
	}
}

// TestInvalidSetupPanicsAtNew: a wrong set-up fails once, when the
// middleware is built, with an error that names every problem; Check returns
// it without panicking.
func TestInvalidSetupPanicsAtNew(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	opts := []httplock.Option{httplock.WithWait(-time.Second), httplock.WithRoute(nil), httplock.WithPathParam(nil), nil,
		httplock.WithTTLFunc(nil), httplock.WithErrorHandler(nil), httplock.WithRetryAfter(-1)}
	err := httplock.Check(e.Locker, nil, opts...)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "httplock: ") {
		t.Fatalf("Check: %v, want an httplock error wrapping ErrInvalidOption", err)
	}
	for _, want := range []string{"WithWait(-1s)", "WithRoute: nil function", "WithPathParam: nil function", "option 3 is nil",
		"WithTTLFunc: nil function", "WithErrorHandler: nil function", "WithRetryAfter(-1ns)", "key Func is nil"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	defer func() {
		if p, ok := recover().(error); !ok || p.Error() != err.Error() {
			t.Fatalf("New panicked with %v, want %v", p, err)
		}
	}()
	httplock.New(e.Locker, nil, opts...)
	t.Fatal("New did not panic")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBeforeRoutingIs500: a middleware around a whole ServeMux runs before
// the mux has matched the request, so Request.Pattern and the path
// parameters are not set yet. A key that needs them fails on every request:
// the server's mistake, answered 500 with an error that names it and the
// part the key needs, not 400. The same middleware on the registered handler
// works, and a part missing from a routed request is still the client's
// (400).
func TestBeforeRoutingIs500(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var ran atomic.Int64
	handler := func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if l := httplock.Lease(r); l != nil {
			io.WriteString(w, l.Name())
		}
	}
	routed := func(mw func(http.Handler) http.Handler) http.Handler { // the middleware on the handler: right
		m := http.NewServeMux()
		m.Handle("POST /orders/{id}", mw(http.HandlerFunc(handler)))
		return m
	}
	wrapped := func(mw func(http.Handler) http.Handler) http.Handler { // the middleware around the mux: wrong
		m := http.NewServeMux()
		m.HandleFunc("POST /orders/{id}", handler)
		return mw(m)
	}
	errorJSON := func(w *httptest.ResponseRecorder) string {
		var body struct{ Error string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q is not a JSON error: %v", w.Body, err)
		}
		return body.Error
	}
	for name, tc := range map[string]struct {
		key   keyfunc.Func
		needs string
	}{
		"param": {orderKey, `path parameter "id"`},
		"route": {keyfunc.Route(), "the route"},
	} {
		ran.Store(0)
		w := do(wrapped(httplock.New(e.Locker, tc.key)), context.Background(), "/orders/42", "")
		msg := ""
		if w.Code == http.StatusInternalServerError {
			msg = errorJSON(w)
		}
		if w.Code != http.StatusInternalServerError || ran.Load() != 0 ||
			!strings.Contains(msg, "the middleware runs before routing") ||
			!strings.Contains(msg, "wrap the handlers you register, not the mux") ||
			!strings.Contains(msg, "not with a top-level r.Use") ||
			!strings.Contains(msg, "(the key needs "+tc.needs+")") {
			t.Errorf("%s, around the mux: status %d, handler ran %d, body %s; want 500 naming the misplacement and %s", name, w.Code, ran.Load(), w.Body, tc.needs)
		}
		if w := do(routed(httplock.New(e.Locker, tc.key)), context.Background(), "/orders/"+adaptertest.Uniq(t), ""); w.Code != http.StatusOK || ran.Load() != 1 {
			t.Errorf("%s, on the handler: status %d %s, handler ran %d; want 200", name, w.Code, w.Body, ran.Load())
		}
	}

	// WithErrorHandler gets the error: it wraps ErrRouteUnknown, and not
	// keyfunc.ErrMissing, which would mean the client's fault.
	var got error
	custom := httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	})
	if w := do(wrapped(httplock.New(e.Locker, orderKey, custom)), context.Background(), "/orders/42", ""); w.Code != http.StatusTeapot {
		t.Errorf("custom error handler: status %d", w.Code)
	}
	if !errors.Is(got, httplock.ErrRouteUnknown) || errors.Is(got, keyfunc.ErrMissing) {
		t.Errorf("the error handler got %v; want ErrRouteUnknown and not keyfunc.ErrMissing", got)
	}

	// A key that needs neither the route nor a path parameter works around
	// the mux; a part missing from it is the client's (400), not routing's.
	tenantKey := must(keyfunc.Template("tenant:{header.X-Tenant}"))
	w := do(wrapped(httplock.New(e.Locker, tenantKey)), context.Background(), "/orders/42", "")
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "before routing") {
		t.Errorf("a missing header around the mux: status %d %s; want 400, not blamed on routing", w.Code, w.Body)
	}
	// Routed, a request that lacks a part of the key is the client's (400).
	tenantOrder := must(keyfunc.Template("order:{param.id}:{header.X-Tenant}"))
	w = do(routed(httplock.New(e.Locker, tenantOrder)), context.Background(), "/orders/42", "")
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "before routing") {
		t.Errorf("a missing header on the handler: status %d %s; want 400", w.Code, w.Body)
	}
}

// TestEmptyParamOfAnotherRouterIs400: with WithPathParam but no WithRoute
// (gorilla/mux's or chi's parameters, no route template), an empty route
// says nothing about routing: a parameter the router left empty is the
// client's (400), not a misplacement (500).
func TestEmptyParamOfAnotherRouterIs400(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	empty := httplock.WithPathParam(func(*http.Request, string) string { return "" })
	h := httplock.New(e.Locker, orderKey, empty)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran without its lock")
	}))
	if w := do(h, context.Background(), "/orders/", ""); w.Code != http.StatusBadRequest {
		t.Errorf("status %d %s, want 400", w.Code, w.Body)
	}
}
