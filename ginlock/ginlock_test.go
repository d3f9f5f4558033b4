package ginlock_test

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

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
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

// router serves POST /orders/:id through mw then h.
func router(mw, h gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
	r.POST("/orders/:id", mw, h)
	return r
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

func ok(c *gin.Context) { c.String(http.StatusOK, "done") }

// TestOneOrderAtATimeOrdersInParallel: requests for one order never overlap,
// requests for different orders run at the same time (adaptertest.Exclusion).
func TestOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
	h := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) { x.Handle(c.Param("id")) })
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
	h := router(func(c *gin.Context) { c.Next() }, func(c *gin.Context) {
		defer o.Enter()()
		meet.Arrive(10 * time.Second)
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

func errorBody(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", w.Body, err)
	}
	return body.Error
}

func TestMissingPartIs400(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	key := must(keyfunc.Template("order:{param.id}:{header.X-Tenant}"))
	var ran atomic.Bool
	h := router(ginlock.New(e.Locker, key), func(c *gin.Context) { ran.Store(true) })
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
	h := router(ginlock.New(e.Locker, keyfunc.Field("id")), ok)
	if w := do(h, context.Background(), "/orders/1", "{not json"); w.Code != http.StatusBadRequest {
		t.Fatalf("status %d", w.Code)
	}
	h = router(ginlock.New(e.Locker, keyfunc.Field("id"), ginlock.WithMaxBody(4)), ok)
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
	h := router(ginlock.New(e.Locker, orderKey, ginlock.WithWait(30*time.Millisecond), ginlock.WithRetryAfter(1500*time.Millisecond)),
		func(c *gin.Context) { ran.Store(true) })
	w := do(h, context.Background(), "/orders/"+id, "")
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "2" || ran.Load() {
		t.Fatalf("status %d, Retry-After %q, handler ran: %v", w.Code, w.Header().Get("Retry-After"), ran.Load())
	}
	if msg := errorBody(t, w); strings.Contains(msg, id) {
		t.Fatalf("the answer leaks the lock name: %q", msg)
	}

	var busy error
	h = router(ginlock.New(e.Locker, orderKey, ginlock.WithWait(time.Millisecond), ginlock.WithBusyHandler(func(c *gin.Context, err error) {
		busy = err
		c.AbortWithStatus(http.StatusTooManyRequests)
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
	handler := func(c *gin.Context) {
		ran.Add(1)
		lease.Store(ginlock.Lease(c))
		c.Status(http.StatusOK)
	}
	w := do(router(ginlock.New(e.Locker, orderKey), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	w = do(router(ginlock.New(e.Locker, orderKey, ginlock.WithFailOpen()), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || lease.Load() != nil {
		t.Fatalf("fail-open: status %d, handler ran %d, lease %v", w.Code, ran.Load(), lease.Load())
	}
	var got error
	w = do(router(ginlock.New(e.Locker, orderKey, ginlock.WithErrorHandler(func(c *gin.Context, err error) {
		got = err
		c.AbortWithStatus(http.StatusBadGateway)
	})), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusBadGateway || !errors.Is(got, core.ErrStorage) {
		t.Fatalf("error handler: status %d, err %v", w.Code, got)
	}
}

func TestClientGoneAbortsWithoutBody(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	h := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) { ran.Store(true) })
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(h, ctx, "/orders/"+id, "") }()
	cancel() // the client goes away while the request waits for the lock
	w := <-done
	if w.Code != ginlock.StatusClientClosedRequest || w.Body.Len() != 0 || ran.Load() {
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
		opts []ginlock.Option
		want []string
	}{
		"negative wait":   {e.Locker, orderKey, []ginlock.Option{ginlock.WithWait(-time.Second)}, []string{"WithWait(-1s)"}},
		"nil option":      {e.Locker, orderKey, []ginlock.Option{nil}, []string{"option 0 is nil"}},
		"nil key":         {e.Locker, nil, nil, []string{"key Func is nil"}},
		"nil locker":      {nil, orderKey, nil, []string{"Locker is nil"}},
		"broken locker":   {broken, orderKey, nil, []string{"Locker is unusable", "Redis client is nil"}},
		"several at once": {nil, nil, []ginlock.Option{ginlock.WithTTL(-1), ginlock.WithSkip(nil), ginlock.WithMaxBody(0)}, []string{"Locker is nil", "key Func is nil", "WithTTL(-1ns)", "WithSkip: nil function", "WithMaxBody(0)"}},
	} {
		err := ginlock.Check(tc.l, tc.key, tc.opts...)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "ginlock: ") {
			t.Errorf("%s: Check: %v, want a ginlock error wrapping ErrInvalidOption", name, err)
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
			ginlock.New(tc.l, tc.key, tc.opts...)
		}()
	}
	if err := ginlock.Check(e.Locker, orderKey, ginlock.WithWait(0), ginlock.WithTTL(time.Second)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

// TestBadKeyFuncIs500: a key Func that can only fail (keyfunc reports its
// bad arguments through it) is a set-up mistake seen per request.
func TestBadKeyFuncIs500(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var ran atomic.Bool
	w := do(router(ginlock.New(e.Locker, keyfunc.Param("")), func(c *gin.Context) { ran.Store(true) }), context.Background(), "/orders/1", "")
	if w.Code != http.StatusInternalServerError || ran.Load() || errorBody(t, w) != "reqlock: internal error" {
		t.Fatalf("status %d %s, handler ran %v", w.Code, w.Body, ran.Load())
	}
}

func TestSkip(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(ginlock.New(e.Locker, orderKey, ginlock.WithSkip(func(c *gin.Context) bool { return c.Query("dry") != "" })), ok)
	if w := do(h, context.Background(), "/orders/1?dry=1", ""); w.Code != http.StatusOK || e.RT.N.Load() != 0 {
		t.Fatalf("skipped request: status %d, %d Redis calls", w.Code, e.RT.N.Load())
	}
}

func TestBodyStillReadableByHandler(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := router(ginlock.New(e.Locker, keyfunc.Join(keyfunc.Const("order"), keyfunc.Field("order.id"))), func(c *gin.Context) {
		var in struct {
			Order struct{ ID, Note string }
		}
		if err := c.ShouldBindJSON(&in); err != nil {
			c.String(http.StatusBadRequest, err.Error())
			return
		}
		c.String(http.StatusOK, "%s %s locked as %s", in.Order.ID, in.Order.Note, ginlock.Lease(c).Name())
	})
	w := do(h, context.Background(), "/orders/x", `{"order":{"id":"A:1","note":"hello"}}`)
	if want := "A:1 hello locked as order:A%3A1"; w.Code != http.StatusOK || w.Body.String() != want {
		t.Fatalf("status %d, body %q, want %q", w.Code, w.Body, want)
	}
}

func TestReleasedAfterPanic(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var heldInside atomic.Bool
	h := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) {
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

func TestLostLeaseCancelsRequestContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var cause error
	h := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) {
		ctx := c.Request.Context()
		// Someone deletes the lock (an operator, a failover); Extend finds it gone.
		e.Client.Del(ctx, ginlock.Lease(c).Key())
		if err := ginlock.Lease(c).Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("extend: %v", err)
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
	})
	do(h, context.Background(), "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("request context not cancelled with ErrNotHeld: cause %v", cause)
	}

	// The same when the TTL runs out under a slow handler.
	cause = nil
	h = router(ginlock.New(e.Locker, orderKey, ginlock.WithTTL(50*time.Millisecond)), func(c *gin.Context) {
		select {
		case <-c.Request.Context().Done():
			cause = context.Cause(c.Request.Context())
		case <-time.After(10 * time.Second):
		}
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
	handler := func(c *gin.Context) { pttl = e.Client.PTTL(c, ginlock.Lease(c).Key()).Val() }
	slow := ginlock.WithTTLFunc(func(c *gin.Context) time.Duration {
		if c.Query("slow") != "" {
			return 2 * time.Hour
		}
		return 0
	})
	cases := []struct {
		ctxTTL time.Duration // set by an earlier middleware with core.ContextWithTTL
		opts   []ginlock.Option
		path   string
		min    time.Duration
		max    time.Duration
	}{
		{0, nil, "/orders/1", 5 * time.Second, 10 * time.Second},
		{0, []ginlock.Option{ginlock.WithTTL(time.Minute)}, "/orders/2", 55 * time.Second, time.Minute},
		{0, []ginlock.Option{ginlock.WithTTL(time.Minute), slow}, "/orders/3?slow=1", 119 * time.Minute, 2 * time.Hour},
		{0, []ginlock.Option{ginlock.WithTTL(time.Minute), slow}, "/orders/4", 55 * time.Second, time.Minute},
		{time.Hour, []ginlock.Option{ginlock.WithTTL(time.Minute)}, "/orders/5", 59 * time.Minute, time.Hour},
		{time.Hour, []ginlock.Option{ginlock.WithTTL(time.Minute), slow}, "/orders/6?slow=1", 119 * time.Minute, 2 * time.Hour},
	}
	for _, tc := range cases {
		lock := ginlock.New(e.Locker, orderKey, tc.opts...)
		mw := func(c *gin.Context) {
			if tc.ctxTTL > 0 {
				c.Request = c.Request.WithContext(core.ContextWithTTL(c.Request.Context(), tc.ctxTTL))
			}
			lock(c)
		}
		if w := do(router(mw, handler), context.Background(), tc.path, ""); w.Code != http.StatusOK || pttl < tc.min || pttl > tc.max {
			t.Errorf("%s (context TTL %v): status %d, PTTL %v, want in [%v, %v]", tc.path, tc.ctxTTL, w.Code, pttl, tc.min, tc.max)
		}
	}
	if routes.Last() != "/orders/:id" {
		t.Fatalf("AcquireCall.Route = %q, not the route template", routes.Last())
	}
}

// TestReentrantInHandler: a service function called by the handler locks the
// same order again; it gets a nested lease at once, without a Redis call or a
// deadlock, and the order stays locked until the request ends.
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
	h := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) {
		before := e.RT.N.Load()
		if err := pay(c.Request.Context(), c.Param("id")); err != nil {
			c.String(http.StatusInternalServerError, err.Error())
			return
		}
		calls = e.RT.N.Load() - before
		stillHeld = e.Exists(t, "order:"+c.Param("id"))
		c.Status(http.StatusOK)
	})
	if w := do(h, context.Background(), "/orders/"+id, ""); w.Code != http.StatusOK {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	if calls != 0 || !stillHeld || e.Exists(t, "order:"+id) {
		t.Fatalf("nested acquire+release made %d Redis calls; held after the nested release: %v; held after the request: %v",
			calls, stillHeld, e.Exists(t, "order:"+id))
	}
	// Without the middleware's context the same call is busy: the test above
	// did rely on reentrancy.
	e.Hold(t, "order:"+id)
	if err := pay(context.Background(), id); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a second holder without the context: %v", err)
	}
}

// TestCustomHandlersNeverRunTheChainUnlocked: busy and error handlers that
// answer but forget c.Abort() still stop the chain: the handler never runs
// without the lock.
func TestCustomHandlersNeverRunTheChainUnlocked(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+id)
	answer := func(c *gin.Context, err error) { c.JSON(http.StatusTeapot, gin.H{"error": "custom"}) } // no c.Abort()
	next := func(c *gin.Context, err error) { c.Status(http.StatusTeapot); c.Next() }                 // a mistake
	for name, tc := range map[string]struct {
		mw   gin.HandlerFunc
		path string
	}{
		"busy handler":             {ginlock.New(e.Locker, orderKey, ginlock.WithWait(time.Millisecond), ginlock.WithBusyHandler(answer)), "/orders/" + id},
		"error handler, busy":      {ginlock.New(e.Locker, orderKey, ginlock.WithWait(time.Millisecond), ginlock.WithErrorHandler(answer)), "/orders/" + id},
		"error handler calls Next": {ginlock.New(e.Locker, orderKey, ginlock.WithWait(time.Millisecond), ginlock.WithErrorHandler(next)), "/orders/" + id},
		"error handler, no tenant": {ginlock.New(e.Locker, keyfunc.Header("X-Tenant"), ginlock.WithErrorHandler(answer)), "/orders/1"},
		"error handler, bad key":   {ginlock.New(e.Locker, keyfunc.Param(""), ginlock.WithErrorHandler(answer)), "/orders/1"},
	} {
		var ran atomic.Bool
		w := do(router(tc.mw, func(c *gin.Context) { ran.Store(true) }), context.Background(), tc.path, "")
		if w.Code != http.StatusTeapot || ran.Load() {
			t.Errorf("%s: status %d, handler ran: %v", name, w.Code, ran.Load())
		}
	}
}

// TestOuterMiddlewareKeepsItsContext: after c.Next() returns, a middleware
// before ginlock (an audit log, a metrics push) finds the request context it
// had, not the lease's, which is cancelled once the lock is released.
func TestOuterMiddlewareKeepsItsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	for name, h := range map[string]gin.HandlerFunc{"handler returns": ok, "handler panics": func(*gin.Context) { panic("bug") }} {
		var before, after context.Context
		var inside *core.Lease
		r := gin.New()
		r.Use(func(c *gin.Context) {
			before = c.Request.Context()
			defer func() {
				after = c.Request.Context()
				if recover() != nil {
					c.AbortWithStatus(http.StatusInternalServerError)
				}
			}()
			c.Next()
		})
		r.POST("/orders/:id", ginlock.New(e.Locker, orderKey), func(c *gin.Context) { inside = ginlock.Lease(c); h(c) })
		do(r, context.Background(), "/orders/"+adaptertest.Uniq(t), "")
		if inside == nil || after != before || after.Err() != nil || core.LeaseFromContext(after) != nil {
			t.Errorf("%s: locked inside: %v; after Next, the context is the one before: %v (err %v, carries a lease: %v)",
				name, inside != nil, after == before, after.Err(), core.LeaseFromContext(after) != nil)
		}
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
	handler := func(c *gin.Context) { ran.Add(1); c.Status(http.StatusOK) }
	w := do(router(ginlock.New(l, orderKey, ginlock.WithWait(20*time.Millisecond)), handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	var seen error
	mw := ginlock.New(l, orderKey, ginlock.WithWait(20*time.Millisecond), ginlock.WithFailOpenHook(func(c *gin.Context, err error) { seen = err }))
	w = do(router(mw, handler), context.Background(), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: status %d, handler ran %d, hook got %v", w.Code, ran.Load(), seen)
	}
}

// TestReentrancyNeedsTheRequestContext: the lease is in c.Request.Context().
// A *gin.Context passed as the context forwards it only when the engine has
// ContextWithFallback; otherwise the nested Acquire waits for the request's
// own lock and times out.
func TestReentrancyNeedsTheRequestContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Millisecond))
	for _, fallback := range []bool{true, false} {
		var err error
		var calls int64
		r := router(ginlock.New(e.Locker, orderKey), func(c *gin.Context) {
			before := e.RT.N.Load()
			var lease *core.Lease
			if lease, err = e.Locker.Acquire(c, "order:"+c.Param("id")); err == nil {
				err = lease.Release(c)
			}
			calls = e.RT.N.Load() - before
		})
		r.ContextWithFallback = fallback
		do(r, context.Background(), "/orders/"+adaptertest.Uniq(t), "")
		if fallback && (err != nil || calls != 0) {
			t.Errorf("with ContextWithFallback: %v after %d Redis calls, want a nested lease without one", err, calls)
		}
		if !fallback && !errors.Is(err, core.ErrTimeout) {
			t.Errorf("without ContextWithFallback: %v, want ErrTimeout (the lease is not found through c)", err)
		}
	}
}
