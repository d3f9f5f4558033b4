package echo5lock_test

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

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echo5lock"
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

func ok(c *echo.Context) error { return c.String(http.StatusOK, "done") }

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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error { x.Handle(c.Param("id")); return nil })
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
	h := router(func(next echo.HandlerFunc) echo.HandlerFunc { return next }, func(c *echo.Context) error {
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
	h := router(echo5lock.New(e.Locker, key), func(c *echo.Context) error { ran.Store(true); return nil })
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
	h := router(echo5lock.New(e.Locker, keyfunc.Field("id")), ok)
	if w := do(h, context.Background(), "/orders/1", "{not json"); w.Code != http.StatusBadRequest {
		t.Fatalf("status %d", w.Code)
	}
	h = router(echo5lock.New(e.Locker, keyfunc.Field("id"), echo5lock.WithMaxBody(4)), ok)
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
	h := router(echo5lock.New(e.Locker, orderKey, echo5lock.WithWait(30*time.Millisecond), echo5lock.WithRetryAfter(1500*time.Millisecond)),
		func(c *echo.Context) error { ran.Store(true); return nil })
	w := do(h, context.Background(), "/orders/"+id, "")
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "2" || ran.Load() {
		t.Fatalf("status %d, Retry-After %q, handler ran: %v", w.Code, w.Header().Get("Retry-After"), ran.Load())
	}
	if msg := errorBody(t, w); strings.Contains(msg, id) {
		t.Fatalf("the answer leaks the lock name: %q", msg)
	}

	var busy error
	h = router(echo5lock.New(e.Locker, orderKey, echo5lock.WithWait(time.Millisecond), echo5lock.WithBusyHandler(func(c *echo.Context, err error) {
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
	handler := func(c *echo.Context) error {
		ran.Add(1)
		lease.Store(echo5lock.Lease(c))
		return c.NoContent(http.StatusOK)
	}
	w := do(router(echo5lock.New(e.Locker, orderKey), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	w = do(router(echo5lock.New(e.Locker, orderKey, echo5lock.WithFailOpen()), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || lease.Load() != nil {
		t.Fatalf("fail-open: status %d, handler ran %d, lease %v", w.Code, ran.Load(), lease.Load())
	}
	var got error
	w = do(router(echo5lock.New(e.Locker, orderKey, echo5lock.WithErrorHandler(func(c *echo.Context, err error) {
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
	handler := func(c *echo.Context) error { ran.Add(1); return c.NoContent(http.StatusOK) }
	w := do(router(echo5lock.New(l, orderKey, echo5lock.WithWait(20*time.Millisecond)), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	var seen error
	mw := echo5lock.New(l, orderKey, echo5lock.WithWait(20*time.Millisecond), echo5lock.WithFailOpenHook(func(c *echo.Context, err error) { seen = err }))
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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error { ran.Store(true); return nil })
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(h, ctx, "/orders/"+id, "") }()
	cancel() // the client goes away while the request waits for the lock
	w := <-done
	if w.Code != echo5lock.StatusClientClosedRequest || w.Body.Len() != 0 || ran.Load() {
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
		opts []echo5lock.Option
		want []string
	}{
		"negative wait":   {e.Locker, orderKey, []echo5lock.Option{echo5lock.WithWait(-time.Second)}, []string{"WithWait(-1s)"}},
		"nil option":      {e.Locker, orderKey, []echo5lock.Option{nil}, []string{"option 0 is nil"}},
		"nil key":         {e.Locker, nil, nil, []string{"key Func is nil"}},
		"nil locker":      {nil, orderKey, nil, []string{"Locker is nil"}},
		"broken locker":   {broken, orderKey, nil, []string{"Locker is unusable", "Redis client is nil"}},
		"nil handlers":    {e.Locker, orderKey, []echo5lock.Option{echo5lock.WithErrorHandler(nil), echo5lock.WithBusyHandler(nil), echo5lock.WithTTLFunc(nil), echo5lock.WithFailOpenHook(nil)}, []string{"WithErrorHandler: nil function", "WithBusyHandler: nil function", "WithTTLFunc: nil function", "WithFailOpenHook: nil function"}},
		"several at once": {nil, nil, []echo5lock.Option{echo5lock.WithTTL(-1), echo5lock.WithSkip(nil), echo5lock.WithMaxBody(0), echo5lock.WithRetryAfter(-1)}, []string{"Locker is nil", "key Func is nil", "WithTTL(-1ns)", "WithSkip: nil function", "WithMaxBody(0)", "WithRetryAfter(-1ns)"}},
	} {
		err := echo5lock.Check(tc.l, tc.key, tc.opts...)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "echo5lock: ") {
			t.Errorf("%s: Check: %v, want an echo5lock error wrapping ErrInvalidOption", name, err)
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
			echo5lock.New(tc.l, tc.key, tc.opts...)
		}()
	}
	if err := echo5lock.Check(e.Locker, orderKey, echo5lock.WithWait(0), echo5lock.WithTTL(time.Second)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

// TestBadKeyFuncIs500: a key Func that can only fail (keyfunc reports its
// bad arguments through it) is a set-up mistake seen per request.
func TestBadKeyFuncIs500(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var ran atomic.Bool
	w := do(router(echo5lock.New(e.Locker, keyfunc.Param("")), func(c *echo.Context) error { ran.Store(true); return nil }), context.Background(), "/orders/1", "")
	if w.Code != http.StatusInternalServerError || ran.Load() || errorBody(t, w) != "reqlock: internal error" {
		t.Fatalf("status %d %s, handler ran %v", w.Code, w.Body, ran.Load())
	}
}

func TestSkip(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(echo5lock.New(e.Locker, orderKey, echo5lock.WithSkip(func(c *echo.Context) bool { return c.QueryParam("dry") != "" })), ok)
	if w := do(h, context.Background(), "/orders/1?dry=1", ""); w.Code != http.StatusOK || e.RT.N.Load() != 0 {
		t.Fatalf("skipped request: status %d, %d Redis calls", w.Code, e.RT.N.Load())
	}
}

// TestBodyStillReadableByHandler: a JSON body read for a {field.X} key is put
// back, and the handler binds it with c.Bind.
func TestBodyStillReadableByHandler(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(echo5lock.New(e.Locker, keyfunc.Join(keyfunc.Const("order"), keyfunc.Field("order.id"))), func(c *echo.Context) error {
		var in struct {
			Order struct{ ID, Note string }
		}
		if err := c.Bind(&in); err != nil {
			return c.String(http.StatusBadRequest, err.Error())
		}
		return c.String(http.StatusOK, fmt.Sprintf("%s %s locked as %s", in.Order.ID, in.Order.Note, echo5lock.Lease(c).Name()))
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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error {
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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "no such order")
	})
	var heldThen atomic.Bool
	h.HTTPErrorHandler = func(c *echo.Context, err error) {
		heldThen.Store(e.Exists(t, "order:"+id))
		echo.DefaultHTTPErrorHandler(false)(c, err)
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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error {
		ctx := c.Request().Context()
		// Someone deletes the lock (an operator, a failover); Extend finds it gone.
		e.Client.Del(ctx, echo5lock.Lease(c).Key())
		if err := echo5lock.Lease(c).Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
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
	h = router(echo5lock.New(e.Locker, orderKey, echo5lock.WithTTL(50*time.Millisecond)), func(c *echo.Context) error {
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
	handler := func(c *echo.Context) error {
		pttl = e.Client.PTTL(c.Request().Context(), echo5lock.Lease(c).Key()).Val()
		return nil
	}
	slow := echo5lock.WithTTLFunc(func(c *echo.Context) time.Duration {
		if c.QueryParam("slow") != "" {
			return 2 * time.Hour
		}
		return 0
	})
	cases := []struct {
		ctxTTL time.Duration // set by an earlier middleware with core.ContextWithTTL
		opts   []echo5lock.Option
		path   string
		min    time.Duration
		max    time.Duration
	}{
		{0, nil, "/orders/1", 5 * time.Second, 10 * time.Second},
		{0, []echo5lock.Option{echo5lock.WithTTL(time.Minute)}, "/orders/2", 55 * time.Second, time.Minute},
		{0, []echo5lock.Option{echo5lock.WithTTL(time.Minute), slow}, "/orders/3?slow=1", 119 * time.Minute, 2 * time.Hour},
		{0, []echo5lock.Option{echo5lock.WithTTL(time.Minute), slow}, "/orders/4", 55 * time.Second, time.Minute},
		{time.Hour, []echo5lock.Option{echo5lock.WithTTL(time.Minute)}, "/orders/5", 59 * time.Minute, time.Hour},
		{time.Hour, []echo5lock.Option{echo5lock.WithTTL(time.Minute), slow}, "/orders/6?slow=1", 119 * time.Minute, 2 * time.Hour},
	}
	for _, tc := range cases {
		lock := echo5lock.New(e.Locker, orderKey, tc.opts...)
		mw := func(next echo.HandlerFunc) echo.HandlerFunc {
			locked := lock(next)
			return func(c *echo.Context) error {
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
		t.Fatalf("Request.Route = %q, not the route template", routes.Last())
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
	h := router(echo5lock.New(e.Locker, orderKey), func(c *echo.Context) error {
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
	answer := func(c *echo.Context, err error) { _ = c.JSON(http.StatusTeapot, map[string]string{"error": "custom"}) }
	for name, tc := range map[string]struct {
		mw   echo.MiddlewareFunc
		path string
	}{
		"busy handler":             {echo5lock.New(e.Locker, orderKey, echo5lock.WithWait(time.Millisecond), echo5lock.WithBusyHandler(answer)), "/orders/" + id},
		"error handler, busy":      {echo5lock.New(e.Locker, orderKey, echo5lock.WithWait(time.Millisecond), echo5lock.WithErrorHandler(answer)), "/orders/" + id},
		"error handler, no tenant": {echo5lock.New(e.Locker, keyfunc.Header("X-Tenant"), echo5lock.WithErrorHandler(answer)), "/orders/1"},
		"error handler, bad key":   {echo5lock.New(e.Locker, keyfunc.Param(""), echo5lock.WithErrorHandler(answer)), "/orders/1"},
	} {
		var ran atomic.Bool
		w := do(router(tc.mw, func(c *echo.Context) error { ran.Store(true); return nil }), context.Background(), tc.path, "")
		if w.Code != http.StatusTeapot || ran.Load() {
			t.Errorf("%s: status %d, handler ran: %v", name, w.Code, ran.Load())
		}
	}
}

// TestOuterMiddlewareKeepsItsContext: after next returns, a middleware before
// echo5lock finds the request context it had, not the lease's, which is
// cancelled once the lock is released; also when the handler panics.
func TestOuterMiddlewareKeepsItsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	for name, h := range map[string]echo.HandlerFunc{"handler returns": ok, "handler panics": func(*echo.Context) error { panic("bug") }} {
		var before, after context.Context
		var inside *core.Lease
		r := echo.New()
		r.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) (err error) {
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
		r.POST("/orders/:id", func(c *echo.Context) error { inside = echo5lock.Lease(c); return h(c) }, echo5lock.New(e.Locker, orderKey))
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
// needs them is a set-up mistake, answered 500 with a message that says so.
func TestWhereItGoes(t *testing.T) {
	var routes adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(routes.Handler()))
	handler := func(c *echo.Context) error { return c.String(http.StatusOK, echo5lock.Lease(c).Name()) }
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
		tc.wire(r, echo5lock.New(e.Locker, orderKey))
		w := do(r, context.Background(), "/orders/7", "")
		if w.Code != tc.code || (tc.code == http.StatusOK && (w.Body.String() != tc.name || routes.Last() != tc.path)) {
			t.Errorf("%s: status %d %s, route label %q; want %d %q %q", name, w.Code, w.Body, routes.Last(), tc.code, tc.name, tc.path)
		}
		if tc.code == http.StatusInternalServerError && errorBody(t, w) != misplaced {
			t.Errorf("%s: %s", name, w.Body)
		}
	}
	// Under e.Use, a request that matches no route is locked too: here its
	// key lacks the parameter, and its 404 becomes a 400 (routed: not the
	// answer to e.Pre).
	r := echo.New()
	r.Use(echo5lock.New(e.Locker, orderKey))
	r.POST("/orders/:id", handler)
	if w := do(r, context.Background(), "/nowhere", ""); w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), `param "id"`) {
		t.Errorf("e.Use, no route: status %d %s", w.Code, w.Body)
	}
	// So is, under a group's prefix, a request that matches none of the
	// group's routes: Echo gives the group catch-all 404 routes.
	r = echo.New()
	r.Group("/orders", echo5lock.New(e.Locker, orderKey)).POST("/:id", handler)
	if w := do(r, context.Background(), "/orders/", ""); w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), `param "id"`) {
		t.Errorf("group, no route: status %d %s", w.Code, w.Body)
	}
}

// misplaced is the answer to a key that reads the route or a path parameter
// before routing.
const misplaced = "echo5lock: the middleware runs before routing (registered with e.Pre?); register it with e.Use, a group or a route"

// TestPreIsASetUpMistake: in e.Pre, a key that reads the route template or a
// path parameter is answered 500 with a message that names the
// misplacement, not 400 as a bad request would be, without a Redis call
// and without running the handler; the error handler gets ErrBeforeRouting.
// A key of headers only works there, and WithSkip still passes requests on.
func TestPreIsASetUpMistake(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	pre := func(mw echo.MiddlewareFunc, h echo.HandlerFunc) *echo.Echo {
		r := echo.New()
		r.Pre(mw)
		r.POST("/orders/:id", h)
		return r
	}
	custom := keyfunc.Func(func(s keyfunc.Source) (string, error) { // a hand-written key that labels by route
		return "order@" + s.Route(), nil
	})
	for name, key := range map[string]keyfunc.Func{
		"param":             orderKey,
		"route":             must(keyfunc.Template("{route}")),
		"header then param": must(keyfunc.Template("{header.X-Tenant}:{param.id}")),
		"custom Func":       custom,
	} {
		var ran atomic.Bool
		e.RT.N.Store(0)
		w := do(pre(echo5lock.New(e.Locker, key), func(c *echo.Context) error { ran.Store(true); return nil }), context.Background(), "/orders/7", "", "X-Tenant", "acme")
		if w.Code != http.StatusInternalServerError || errorBody(t, w) != misplaced || ran.Load() || e.RT.N.Load() != 0 {
			t.Errorf("%s: status %d %s, handler ran %v, %d Redis calls", name, w.Code, w.Body, ran.Load(), e.RT.N.Load())
		}
	}

	var got error
	mw := echo5lock.New(e.Locker, orderKey, echo5lock.WithErrorHandler(func(c *echo.Context, err error) {
		got = err
		_ = c.NoContent(http.StatusTeapot)
	}))
	if w := do(pre(mw, ok), context.Background(), "/orders/7", ""); w.Code != http.StatusTeapot ||
		!errors.Is(got, echo5lock.ErrBeforeRouting) || !errors.Is(got, keyfunc.ErrUnsupported) || got.Error() != misplaced {
		t.Errorf("error handler: status %d, err %v", w.Code, got)
	}

	tenant := must(keyfunc.Template("tenant:{header.X-Tenant}"))
	h := pre(echo5lock.New(e.Locker, tenant), func(c *echo.Context) error { return c.String(http.StatusOK, echo5lock.Lease(c).Name()) })
	if w := do(h, context.Background(), "/orders/7", "", "X-Tenant", "acme"); w.Code != http.StatusOK || w.Body.String() != "tenant:acme" {
		t.Errorf("header key in e.Pre: status %d %s", w.Code, w.Body)
	}

	e.RT.N.Store(0)
	skip := echo5lock.WithSkip(func(c *echo.Context) bool { return c.QueryParam("dry") != "" })
	if w := do(pre(echo5lock.New(e.Locker, orderKey, skip), ok), context.Background(), "/orders/7?dry=1", ""); w.Code != http.StatusOK || e.RT.N.Load() != 0 {
		t.Errorf("skipped in e.Pre: status %d %s, %d Redis calls", w.Code, w.Body, e.RT.N.Load())
	}
}

// TestKeyParts: every kind of key part is read from an Echo request; a path
// parameter is named by its value unescaped once, however the path spells
// it. Echo gives "a%3Ab" for the first path (from the URL's RawPath), "a:b"
// for the second; "%41" for /orders/%2541 (no RawPath: from the decoded
// path, not to be decoded again into "A") and "%25%34%31" for the next.
func TestKeyParts(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	key := must(keyfunc.Template("{route}|{param.id}|{query.page}|{header.X-Tenant}|{field.order.n}"))
	h := router(echo5lock.New(e.Locker, key), func(c *echo.Context) error { return c.String(http.StatusOK, echo5lock.Lease(c).Name()) })
	for _, tc := range []struct{ path, want string }{
		{"/orders/a%3Ab?page=3", "/orders/%3Aid|a%3Ab|3|acme|12.5"},
		{"/orders/a:b?page=%33", "/orders/%3Aid|a%3Ab|3|acme|12.5"},
		{"/orders/%2541?page=3", "/orders/%3Aid|%2541|3|acme|12.5"},
		{"/orders/%25%34%31?page=3", "/orders/%3Aid|%2541|3|acme|12.5"},
		{"/orders/A?page=3", "/orders/%3Aid|A|3|acme|12.5"},
	} {
		w := do(h, context.Background(), tc.path, `{"order":{"n":12.50}}`, "X-Tenant", "acme")
		if w.Code != http.StatusOK || w.Body.String() != tc.want {
			t.Errorf("%s: status %d, name %q, want %q", tc.path, w.Code, w.Body, tc.want)
		}
	}
}
