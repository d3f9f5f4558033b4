package echolock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echolock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

var orderKey = must(keyfunc.Template("order:{param.id}"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// router serves POST /orders/:id through mw then h, with Echo's Recover
// middleware first.
func router(mw echo.MiddlewareFunc, h echo.HandlerFunc) *echo.Echo {
	e := echo.New()
	e.Use(middleware.Recover())
	e.POST("/orders/:id", h, mw)
	return e
}

func do(h http.Handler, ctx context.Context, path, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func ok(c echo.Context) error { return c.String(http.StatusOK, "done") }

func errorBody(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", w.Body, err)
	}
	return body.Error
}

// TestOneOrderAtATimeOrdersInParallel: requests for one order never overlap,
// requests for different orders run at the same time (adaptertest.Exclusion).
func TestOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error { x.Handle(c.Param("id")); return nil })
	x.Run(t, func(order string) error {
		if w := do(h, context.Background(), "/orders/"+order, ""); w.Code != http.StatusOK {
			return fmt.Errorf("status %d %s", w.Code, w.Body)
		}
		return nil
	})
}

// TestDetectorSeesOverlapsWithoutTheMiddleware is the control of the test
// above: without the middleware, two requests for one order meet at a barrier
// inside the handler, and the detector reports it.
func TestDetectorSeesOverlapsWithoutTheMiddleware(t *testing.T) {
	var o redistest.Overlap
	meet := adaptertest.NewBarrier(2)
	h := router(func(next echo.HandlerFunc) echo.HandlerFunc { return next }, func(c echo.Context) error {
		defer o.Enter()()
		meet.Arrive(10 * time.Second)
		return nil
	})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); do(h, context.Background(), "/orders/1", "") }()
	}
	wg.Wait()
	if o.Overlaps() != 1 {
		t.Fatalf("overlaps = %d, want 1", o.Overlaps())
	}
}

func TestMissingPartIs400(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	key := must(keyfunc.Template("order:{param.id}:{header.X-Tenant}"))
	var ran atomic.Bool
	h := router(echolock.New(e.Locker, key), func(c echo.Context) error { ran.Store(true); return nil })
	w := do(h, context.Background(), "/orders/1", "")
	if w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), `header "X-Tenant"`) || ran.Load() {
		t.Fatalf("status %d, body %s, handler ran: %v", w.Code, w.Body, ran.Load())
	}
	if e.RT.N.Load() != 0 {
		t.Fatalf("a request without a name made %d Redis calls", e.RT.N.Load())
	}
}

func TestUnreadableBodyIs400(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(echolock.New(e.Locker, keyfunc.Field("id")), ok)
	if w := do(h, context.Background(), "/orders/1", "{not json"); w.Code != http.StatusBadRequest {
		t.Fatalf("status %d", w.Code)
	}
	h = router(echolock.New(e.Locker, keyfunc.Field("id"), echolock.WithMaxBody(4)), ok)
	if w := do(h, context.Background(), "/orders/1", `{"id":"1"}`); w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), "larger than 4 bytes") {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
}

func TestBusyIs409WithRetryAfter(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	var ran atomic.Bool
	h := router(echolock.New(e.Locker, orderKey, echolock.WithWait(30*time.Millisecond), echolock.WithRetryAfter(1500*time.Millisecond)),
		func(c echo.Context) error { ran.Store(true); return nil })
	w := do(h, context.Background(), "/orders/"+id, "")
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "2" || ran.Load() {
		t.Fatalf("status %d, Retry-After %q, handler ran: %v", w.Code, w.Header().Get("Retry-After"), ran.Load())
	}
	if msg := errorBody(t, w); strings.Contains(msg, id) {
		t.Fatalf("the answer leaks the lock name: %q", msg)
	}

	var busy error
	h = router(echolock.New(e.Locker, orderKey, echolock.WithWait(time.Millisecond), echolock.WithBusyHandler(func(c echo.Context, err error) {
		busy = err
		_ = c.NoContent(http.StatusTooManyRequests)
	})), ok)
	if w := do(h, context.Background(), "/orders/"+id, ""); w.Code != http.StatusTooManyRequests || !errors.Is(busy, core.ErrTimeout) {
		t.Fatalf("busy handler: status %d, err %v", w.Code, busy)
	}
}

func TestRedisDownIs503OrFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	e := adaptertest.NewEnv(t, srv, core.WithIOTimeout(300*time.Millisecond))
	srv.Stop()
	var lease atomic.Pointer[core.Lease]
	var ran atomic.Int64
	handler := func(c echo.Context) error {
		ran.Add(1)
		lease.Store(echolock.Lease(c))
		return c.NoContent(http.StatusOK)
	}
	w := do(router(echolock.New(e.Locker, orderKey), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	w = do(router(echolock.New(e.Locker, orderKey, echolock.WithFailOpen()), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || lease.Load() != nil {
		t.Fatalf("fail-open: status %d, handler ran %d, lease %v", w.Code, ran.Load(), lease.Load())
	}
	var got error
	w = do(router(echolock.New(e.Locker, orderKey, echolock.WithErrorHandler(func(c echo.Context, err error) {
		got = err
		_ = c.NoContent(http.StatusBadGateway)
	})), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusBadGateway || !errors.Is(got, core.ErrStorage) {
		t.Fatalf("error handler: status %d, err %v", w.Code, got)
	}
}

// TestStalledRedisIs503OrFailOpen: a Redis that accepts connections but
// never replies is unavailable, not busy, even with a per-route wait shorter
// than the I/O timeout; fail-open then runs the handler and reports the
// storage error to its hook.
func TestStalledRedisIs503OrFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	var ran atomic.Int64
	handler := func(c echo.Context) error { ran.Add(1); return c.NoContent(http.StatusOK) }
	w := do(router(echolock.New(l, orderKey, echolock.WithWait(20*time.Millisecond)), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	var seen error
	mw := echolock.New(l, orderKey, echolock.WithWait(20*time.Millisecond), echolock.WithFailOpenHook(func(c echo.Context, err error) { seen = err }))
	w = do(router(mw, handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: status %d, handler ran %d, hook got %v", w.Code, ran.Load(), seen)
	}
}

func TestClientGoneIs499WithoutBody(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error { ran.Store(true); return nil })
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(h, ctx, "/orders/"+id, "") }()
	cancel() // the client goes away while the request waits for the lock
	w := <-done
	if w.Code != echolock.StatusClientClosedRequest || w.Body.Len() != 0 || ran.Load() {
		t.Fatalf("status %d, body %q, handler ran: %v", w.Code, w.Body, ran.Load())
	}
}

// TestInvalidSetupPanicsAtNew: a wrong set-up fails once, when the
// middleware is built, with an error that names every problem; Check returns
// it without panicking.
func TestInvalidSetupPanicsAtNew(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	broken := core.New(nil)
	for name, tc := range map[string]struct {
		l    *core.Locker
		key  keyfunc.Func
		opts []echolock.Option
		want []string
	}{
		"negative wait":   {e.Locker, orderKey, []echolock.Option{echolock.WithWait(-time.Second)}, []string{"WithWait(-1s)"}},
		"nil option":      {e.Locker, orderKey, []echolock.Option{nil}, []string{"option 0 is nil"}},
		"nil key":         {e.Locker, nil, nil, []string{"key Func is nil"}},
		"nil locker":      {nil, orderKey, nil, []string{"Locker is nil"}},
		"broken locker":   {broken, orderKey, nil, []string{"Locker is unusable", "Redis client is nil"}},
		"nil handlers":    {e.Locker, orderKey, []echolock.Option{echolock.WithErrorHandler(nil), echolock.WithBusyHandler(nil), echolock.WithTTLFunc(nil), echolock.WithFailOpenHook(nil)}, []string{"WithErrorHandler: nil function", "WithBusyHandler: nil function", "WithTTLFunc: nil function", "WithFailOpenHook: nil function"}},
		"several at once": {nil, nil, []echolock.Option{echolock.WithTTL(-1), echolock.WithSkip(nil), echolock.WithMaxBody(0), echolock.WithRetryAfter(-1)}, []string{"Locker is nil", "key Func is nil", "WithTTL(-1ns)", "WithSkip: nil function", "WithMaxBody(0)", "WithRetryAfter(-1ns)"}},
	} {
		err := echolock.Check(tc.l, tc.key, tc.opts...)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "echolock: ") {
			t.Errorf("%s: Check: %v, want an echolock error wrapping ErrInvalidOption", name, err)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", name, err, want)
			}
		}
		func() {
			defer func() {
				if p, ok := recover().(error); !ok || p.Error() != err.Error() {
					t.Errorf("%s: New panicked with %v, want %v", name, p, err)
				}
			}()
			echolock.New(tc.l, tc.key, tc.opts...)
		}()
	}
	if err := echolock.Check(e.Locker, orderKey, echolock.WithWait(0), echolock.WithTTL(time.Second)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

// TestBadKeyFuncIs500: a key Func that can only fail (keyfunc reports its
// bad arguments through it) is a set-up mistake seen per request.
func TestBadKeyFuncIs500(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var ran atomic.Bool
	w := do(router(echolock.New(e.Locker, keyfunc.Param("")), func(c echo.Context) error { ran.Store(true); return nil }), context.Background(), "/orders/1", "")
	if w.Code != http.StatusInternalServerError || ran.Load() || errorBody(t, w) != "reqlock: internal error" {
		t.Fatalf("status %d %s, handler ran %v", w.Code, w.Body, ran.Load())
	}
}

func TestSkip(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(echolock.New(e.Locker, orderKey, echolock.WithSkip(func(c echo.Context) bool { return c.QueryParam("dry") != "" })), ok)
	if w := do(h, context.Background(), "/orders/1?dry=1", ""); w.Code != http.StatusOK || e.RT.N.Load() != 0 {
		t.Fatalf("skipped request: status %d, %d Redis calls", w.Code, e.RT.N.Load())
	}
}

// TestBodyStillReadableByHandler: a JSON body read for a {field.X} key is put
// back, and the handler binds it with c.Bind.
func TestBodyStillReadableByHandler(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(echolock.New(e.Locker, keyfunc.Join(keyfunc.Const("order"), keyfunc.Field("order.id"))), func(c echo.Context) error {
		var in struct {
			Order struct{ ID, Note string }
		}
		if err := c.Bind(&in); err != nil {
			return c.String(http.StatusBadRequest, err.Error())
		}
		return c.String(http.StatusOK, fmt.Sprintf("%s %s locked as %s", in.Order.ID, in.Order.Note, echolock.Lease(c).Name()))
	})
	w := do(h, context.Background(), "/orders/x", `{"order":{"id":"A:1","note":"hello"}}`, "Content-Type", "application/json")
	if want := "A:1 hello locked as order:A%3A1"; w.Code != http.StatusOK || w.Body.String() != want {
		t.Fatalf("status %d, body %q, want %q", w.Code, w.Body, want)
	}
}

func TestReleasedAfterPanic(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var heldInside atomic.Bool
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error {
		heldInside.Store(e.Exists(t, "order:"+id))
		panic("handler bug")
	})
	if w := do(h, context.Background(), "/orders/"+id, ""); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", w.Code)
	}
	if !heldInside.Load() || e.Exists(t, "order:"+id) {
		t.Fatalf("held inside the handler: %v; still held after the panic: %v", heldInside.Load(), e.Exists(t, "order:"+id))
	}
}

// TestHandlerErrorGoesToEcho: an error the handler returns reaches Echo's
// HTTPErrorHandler, after the lock is released.
func TestHandlerErrorGoesToEcho(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "no such order")
	})
	var heldThen atomic.Bool
	h.HTTPErrorHandler = func(err error, c echo.Context) {
		heldThen.Store(e.Exists(t, "order:"+id))
		h.DefaultHTTPErrorHandler(err, c)
	}
	w := do(h, context.Background(), "/orders/"+id, "")
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "no such order") || heldThen.Load() {
		t.Fatalf("status %d %s, still held in the error handler: %v", w.Code, w.Body, heldThen.Load())
	}
}

func TestLostLeaseCancelsRequestContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var cause error
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error {
		ctx := c.Request().Context()
		// Someone deletes the lock (an operator, a failover); Extend finds it gone.
		e.Client.Del(ctx, echolock.Lease(c).Key())
		if err := echolock.Lease(c).Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("extend: %v", err)
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	do(h, context.Background(), "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("request context not cancelled with ErrNotHeld: cause %v", cause)
	}

	// The same when the TTL runs out under a slow handler.
	cause = nil
	h = router(echolock.New(e.Locker, orderKey, echolock.WithTTL(50*time.Millisecond)), func(c echo.Context) error {
		select {
		case <-c.Request().Context().Done():
			cause = context.Cause(c.Request().Context())
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	do(h, context.Background(), "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("TTL ran out: cause %v", cause)
	}
}

func TestTTLOptionsAndRouteLabel(t *testing.T) {
	var routes adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(routes.Handler()))
	var pttl time.Duration
	handler := func(c echo.Context) error {
		pttl = e.Client.PTTL(c.Request().Context(), echolock.Lease(c).Key()).Val()
		return nil
	}
	slow := echolock.WithTTLFunc(func(c echo.Context) time.Duration {
		if c.QueryParam("slow") != "" {
			return 2 * time.Hour
		}
		return 0
	})
	cases := []struct {
		ctxTTL time.Duration // set by an earlier middleware with core.ContextWithTTL
		opts   []echolock.Option
		path   string
		min    time.Duration
		max    time.Duration
	}{
		{0, nil, "/orders/1", 5 * time.Second, 10 * time.Second},
		{0, []echolock.Option{echolock.WithTTL(time.Minute)}, "/orders/2", 55 * time.Second, time.Minute},
		{0, []echolock.Option{echolock.WithTTL(time.Minute), slow}, "/orders/3?slow=1", 119 * time.Minute, 2 * time.Hour},
		{0, []echolock.Option{echolock.WithTTL(time.Minute), slow}, "/orders/4", 55 * time.Second, time.Minute},
		{time.Hour, []echolock.Option{echolock.WithTTL(time.Minute)}, "/orders/5", 59 * time.Minute, time.Hour},
		{time.Hour, []echolock.Option{echolock.WithTTL(time.Minute), slow}, "/orders/6?slow=1", 119 * time.Minute, 2 * time.Hour},
	}
	for _, tc := range cases {
		lock := echolock.New(e.Locker, orderKey, tc.opts...)
		mw := func(next echo.HandlerFunc) echo.HandlerFunc {
			locked := lock(next)
			return func(c echo.Context) error {
				if tc.ctxTTL > 0 {
					c.SetRequest(c.Request().WithContext(core.ContextWithTTL(c.Request().Context(), tc.ctxTTL)))
				}
				return locked(c)
			}
		}
		if w := do(router(mw, handler), context.Background(), tc.path, ""); w.Code != http.StatusOK || pttl < tc.min || pttl > tc.max {
			t.Errorf("%s (context TTL %v): status %d, PTTL %v, want in [%v, %v]", tc.path, tc.ctxTTL, w.Code, pttl, tc.min, tc.max)
		}
	}
	if routes.Last() != "/orders/:id" {
		t.Fatalf("AcquireCall.Route = %q, not the route template", routes.Last())
	}
}

// TestReentrantInHandler: a service function called by the handler with the
// request context locks the same order again; it gets a nested lease at
// once, without a Redis call, and the order stays locked until the request
// ends.
func TestReentrantInHandler(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(50*time.Millisecond))
	id := adaptertest.Uniq(t)
	pay := func(ctx context.Context, order string) error { // the service layer, unaware of HTTP
		lease, err := e.Locker.Acquire(ctx, "order:"+order)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
	var calls int64
	var stillHeld bool
	h := router(echolock.New(e.Locker, orderKey), func(c echo.Context) error {
		before := e.RT.N.Load()
		if err := pay(c.Request().Context(), c.Param("id")); err != nil {
			return err
		}
		calls = e.RT.N.Load() - before
		stillHeld = e.Exists(t, "order:"+c.Param("id"))
		return c.NoContent(http.StatusOK)
	})
	if w := do(h, context.Background(), "/orders/"+id, ""); w.Code != http.StatusOK {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	if calls != 0 || !stillHeld || e.Exists(t, "order:"+id) {
		t.Fatalf("nested acquire+release made %d Redis calls; held after the nested release: %v; held after the request: %v",
			calls, stillHeld, e.Exists(t, "order:"+id))
	}
}

// TestCustomHandlersNeverRunTheHandlerUnlocked: busy and error handlers
// answer; the next handler never runs without the lock.
func TestCustomHandlersNeverRunTheHandlerUnlocked(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	answer := func(c echo.Context, err error) { _ = c.JSON(http.StatusTeapot, map[string]string{"error": "custom"}) }
	for name, tc := range map[string]struct {
		mw   echo.MiddlewareFunc
		path string
	}{
		"busy handler":             {echolock.New(e.Locker, orderKey, echolock.WithWait(time.Millisecond), echolock.WithBusyHandler(answer)), "/orders/" + id},
		"error handler, busy":      {echolock.New(e.Locker, orderKey, echolock.WithWait(time.Millisecond), echolock.WithErrorHandler(answer)), "/orders/" + id},
		"error handler, no tenant": {echolock.New(e.Locker, keyfunc.Header("X-Tenant"), echolock.WithErrorHandler(answer)), "/orders/1"},
		"error handler, bad key":   {echolock.New(e.Locker, keyfunc.Param(""), echolock.WithErrorHandler(answer)), "/orders/1"},
	} {
		var ran atomic.Bool
		w := do(router(tc.mw, func(c echo.Context) error { ran.Store(true); return nil }), context.Background(), tc.path, "")
		if w.Code != http.StatusTeapot || ran.Load() {
			t.Errorf("%s: status %d, handler ran: %v", name, w.Code, ran.Load())
		}
	}
}

// TestOuterMiddlewareKeepsItsContext: after next returns, a middleware before
// echolock finds the request context it had, not the lease's, which is
// cancelled once the lock is released; also when the handler panics.
func TestOuterMiddlewareKeepsItsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	for name, h := range map[string]echo.HandlerFunc{"handler returns": ok, "handler panics": func(echo.Context) error { panic("bug") }} {
		var before, after context.Context
		var inside *core.Lease
		r := echo.New()
		r.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) (err error) {
				before = c.Request().Context()
				defer func() {
					after = c.Request().Context()
					if recover() != nil {
						err = c.NoContent(http.StatusInternalServerError)
					}
				}()
				return next(c)
			}
		})
		r.POST("/orders/:id", func(c echo.Context) error { inside = echolock.Lease(c); return h(c) }, echolock.New(e.Locker, orderKey))
		do(r, context.Background(), "/orders/"+adaptertest.Uniq(t), "")
		if inside == nil || after != before || after.Err() != nil || core.LeaseFromContext(after) != nil {
			t.Errorf("%s: locked inside: %v; after next, the context is the one before: %v (err %v, carries a lease: %v)",
				name, inside != nil, after == before, after.Err(), core.LeaseFromContext(after) != nil)
		}
	}
}

// TestWhereItGoes: Echo routes before it runs the middleware given to e.Use,
// to a group or to a route, so the route template and path parameters are
// known there; e.Pre runs before routing, where they are not, and a key that
// needs them is answered 500 with an error naming the misplacement: the
// server's mistake, not the client's.
func TestWhereItGoes(t *testing.T) {
	var routes adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(routes.Handler()))
	handler := func(c echo.Context) error { return c.String(http.StatusOK, echolock.Lease(c).Name()) }
	for name, tc := range map[string]struct {
		wire       func(*echo.Echo, echo.MiddlewareFunc)
		code       int
		name, path string
	}{
		"e.Use": {func(r *echo.Echo, mw echo.MiddlewareFunc) { r.Use(mw); r.POST("/orders/:id", handler) }, http.StatusOK, "order:7", "/orders/:id"},
		"group": {func(r *echo.Echo, mw echo.MiddlewareFunc) { r.Group("/orders", mw).POST("/:id", handler) }, http.StatusOK, "order:7", "/orders/:id"},
		"route": {func(r *echo.Echo, mw echo.MiddlewareFunc) { r.POST("/orders/:id", handler, mw) }, http.StatusOK, "order:7", "/orders/:id"},
		"e.Pre": {func(r *echo.Echo, mw echo.MiddlewareFunc) { r.Pre(mw); r.POST("/orders/:id", handler) }, http.StatusInternalServerError, "", ""},
	} {
		r := echo.New()
		tc.wire(r, echolock.New(e.Locker, orderKey))
		w := do(r, context.Background(), "/orders/7", "")
		if w.Code != tc.code || (tc.code == http.StatusOK && (w.Body.String() != tc.name || routes.Last() != tc.path)) {
			t.Errorf("%s: status %d %s, route label %q; want %d %q %q", name, w.Code, w.Body, routes.Last(), tc.code, tc.name, tc.path)
		}
		if tc.code == http.StatusInternalServerError {
			want := "echolock: the middleware runs before routing (registered with e.Pre?); register it with e.Use, a group or a route"
			if got := errorBody(t, w); got != want {
				t.Errorf("%s: the 500 says %q; want %q", name, got, want)
			}
		}
	}
	// Under e.Use, a request that matches no route is locked too: here its
	// key lacks the parameter, and its 404 becomes a 400 (the middleware is
	// not misplaced: the request has no route).
	r := echo.New()
	r.Use(echolock.New(e.Locker, orderKey))
	r.POST("/orders/:id", handler)
	if w := do(r, context.Background(), "/nowhere", ""); w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "before routing") {
		t.Errorf("e.Use, no route: status %d %s", w.Code, w.Body)
	}
}

// TestPreMisplacement: in e.Pre, a {route} key is misplaced too (500); a
// custom error handler gets ErrBeforeRouting, which wraps
// keyfunc.ErrUnsupported, not keyfunc.ErrMissing (the client's fault). A
// key that needs neither the route nor a path parameter works in e.Pre, and
// its missing part is the client's (400). Behind an e.Host router, the
// router of the request's host tells that the request has a route.
func TestPreMisplacement(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	pre := func(mw echo.MiddlewareFunc) *echo.Echo {
		r := echo.New()
		r.Pre(mw)
		r.POST("/orders/:id", func(c echo.Context) error { return c.String(http.StatusOK, echolock.Lease(c).Name()) })
		return r
	}
	w := do(pre(echolock.New(e.Locker, keyfunc.Route())), context.Background(), "/orders/7", "")
	if w.Code != http.StatusInternalServerError || errorBody(t, w) != echolock.ErrBeforeRouting.Error() {
		t.Errorf("{route} in e.Pre: status %d %s; want 500 naming the misplacement", w.Code, w.Body)
	}

	var got error
	custom := echolock.WithErrorHandler(func(c echo.Context, err error) { got = err; _ = c.NoContent(http.StatusTeapot) })
	if w := do(pre(echolock.New(e.Locker, orderKey, custom)), context.Background(), "/orders/7", ""); w.Code != http.StatusTeapot {
		t.Errorf("custom error handler: status %d", w.Code)
	}
	if !errors.Is(got, echolock.ErrBeforeRouting) || !errors.Is(got, keyfunc.ErrUnsupported) || errors.Is(got, keyfunc.ErrMissing) {
		t.Errorf("the error handler got %v; want ErrBeforeRouting (keyfunc.ErrUnsupported), not keyfunc.ErrMissing", got)
	}

	tenantKey := must(keyfunc.Template("tenant:{header.X-Tenant}"))
	if w := do(pre(echolock.New(e.Locker, tenantKey)), context.Background(), "/orders/7", "", "X-Tenant", "acme"); w.Code != http.StatusOK || w.Body.String() != "tenant:acme" {
		t.Errorf("a header key in e.Pre: status %d %q; want 200 tenant:acme", w.Code, w.Body)
	}
	if w := do(pre(echolock.New(e.Locker, tenantKey)), context.Background(), "/orders/7", ""); w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "before routing") {
		t.Errorf("a missing header in e.Pre: status %d %s; want 400, not blamed on routing", w.Code, w.Body)
	}

	hosts := echo.New()
	hosts.Pre(echolock.New(e.Locker, orderKey))
	hosts.Host("example.com").POST("/orders/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	w = do(hosts, context.Background(), "http://example.com/orders/7", "")
	if w.Code != http.StatusInternalServerError || !strings.Contains(errorBody(t, w), "registered with e.Pre?") {
		t.Errorf("e.Pre with an e.Host router: status %d %s; want 500 naming the misplacement", w.Code, w.Body)
	}
}

// TestKeyParts: every kind of key part is read from an Echo request; a path
// parameter is named by its unescaped value, however the path spells it
// (Echo gives "a%3Ab" for the first path, "a:b" for the second).
func TestKeyParts(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	key := must(keyfunc.Template("{route}|{param.id}|{query.page}|{header.X-Tenant}|{field.order.n}"))
	h := router(echolock.New(e.Locker, key), func(c echo.Context) error { return c.String(http.StatusOK, echolock.Lease(c).Name()) })
	for _, tc := range []struct{ path, want string }{
		{"/orders/a%3Ab?page=3", "/orders/%3Aid|a%3Ab|3|acme|12.5"},
		{"/orders/a:b?page=%33", "/orders/%3Aid|a%3Ab|3|acme|12.5"},
		{"/orders/%2541?page=3", "/orders/%3Aid|%2541|3|acme|12.5"},     // "%41", not "A"
		{"/orders/%25%34%31?page=3", "/orders/%3Aid|%2541|3|acme|12.5"}, // the same value
		{"/orders/A?page=3", "/orders/%3Aid|A|3|acme|12.5"},
	} {
		w := do(h, context.Background(), tc.path, `{"order":{"n":12.50}}`, "X-Tenant", "acme")
		if w.Code != http.StatusOK || w.Body.String() != tc.want {
			t.Errorf("%s: status %d, name %q, want %q", tc.path, w.Code, w.Body, tc.want)
		}
	}
}
