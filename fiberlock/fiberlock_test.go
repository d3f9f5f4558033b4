package fiberlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberrecover "github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/fiberlock"
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

func newApp() *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberrecover.New())
	return app
}

// router serves POST /orders/:id through mw then h, after Fiber's recover
// middleware.
func router(mw, h fiber.Handler) *fiber.App {
	app := newApp()
	app.Post("/orders/:id", mw, h)
	return app
}

// response is what a client got.
type response struct {
	Code   int
	Body   string
	Header http.Header
}

// do sends a request to app in process (app.Test, no timeout).
func do(app *fiber.App, path, body string, header ...string) (response, error) {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	resp, err := app.Test(r, -1)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, string(b), resp.Header}, err
}

func mustDo(t *testing.T, app *fiber.App, path, body string, header ...string) response {
	t.Helper()
	w, err := do(app, path, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// uniq is adaptertest.Uniq as one path segment.
func uniq(t *testing.T) string {
	return strings.NewReplacer("#", "-", "/", "-").Replace(adaptertest.Uniq(t))
}

func ok(c *fiber.Ctx) error { return c.SendString("done") }

func errorBody(t *testing.T, w response) string {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal([]byte(w.Body), &body); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", w.Body, err)
	}
	return body.Error
}

// withContext is a middleware before the lock that gives the request the
// context ctx (as a timeout or tracing middleware would).
func withContext(ctx func(context.Context) context.Context) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.SetUserContext(ctx(c.UserContext()))
		return c.Next()
	}
}

// TestOneOrderAtATimeOrdersInParallel: requests for one order never overlap,
// requests for different orders run at the same time (adaptertest.Exclusion).
func TestOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
	app := router(fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error { x.Handle(c.Params("id")); return nil })
	x.Run(t, func(order string) error {
		w, err := do(app, "/orders/"+order, "")
		if err == nil && w.Code != http.StatusOK {
			err = fmt.Errorf("status %d %s", w.Code, w.Body)
		}
		return err
	})
}

// TestDetectorSeesOverlapsWithoutTheMiddleware is the control of the test
// above: without the middleware, two requests for one order meet at a barrier
// inside the handler, and the detector reports it.
func TestDetectorSeesOverlapsWithoutTheMiddleware(t *testing.T) {
	var o redistest.Overlap
	meet := adaptertest.NewBarrier(2)
	app := router(func(c *fiber.Ctx) error { return c.Next() }, func(c *fiber.Ctx) error {
		defer o.Enter()()
		meet.Arrive(10 * time.Second)
		return nil
	})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = do(app, "/orders/1", "") }()
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
	app := router(fiberlock.New(e.Locker, key), func(c *fiber.Ctx) error { ran.Store(true); return nil })
	w := mustDo(t, app, "/orders/1", "")
	if w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), `header "X-Tenant"`) || ran.Load() {
		t.Fatalf("status %d, body %s, handler ran: %v", w.Code, w.Body, ran.Load())
	}
	if strings.Contains(w.Body, "route running the middleware") {
		t.Fatalf("a missing header is explained as a routing mistake: %s", w.Body)
	}
	if e.RT.N.Load() != 0 {
		t.Fatalf("a request without a name made %d Redis calls", e.RT.N.Load())
	}
}

func TestUnreadableBodyIs400(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	app := router(fiberlock.New(e.Locker, keyfunc.Field("id")), ok)
	if w := mustDo(t, app, "/orders/1", "{not json"); w.Code != http.StatusBadRequest {
		t.Fatalf("status %d", w.Code)
	}
	app = router(fiberlock.New(e.Locker, keyfunc.Field("id"), fiberlock.WithMaxBody(4)), ok)
	if w := mustDo(t, app, "/orders/1", `{"id":"1"}`); w.Code != http.StatusBadRequest || !strings.Contains(errorBody(t, w), "larger than 4 bytes") {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
}

func TestBusyIs409WithRetryAfter(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	e.Hold(t, "order:"+id)
	var ran atomic.Bool
	app := router(fiberlock.New(e.Locker, orderKey, fiberlock.WithWait(30*time.Millisecond), fiberlock.WithRetryAfter(1500*time.Millisecond)),
		func(c *fiber.Ctx) error { ran.Store(true); return nil })
	w := mustDo(t, app, "/orders/"+id, "")
	if w.Code != http.StatusConflict || w.Header.Get("Retry-After") != "2" || ran.Load() {
		t.Fatalf("status %d, Retry-After %q, handler ran: %v", w.Code, w.Header.Get("Retry-After"), ran.Load())
	}
	if msg := errorBody(t, w); strings.Contains(msg, id) {
		t.Fatalf("the answer leaks the lock name: %q", msg)
	}

	var busy error
	app = router(fiberlock.New(e.Locker, orderKey, fiberlock.WithWait(time.Millisecond), fiberlock.WithBusyHandler(func(c *fiber.Ctx, err error) {
		busy = err
		c.Status(http.StatusTooManyRequests)
	})), ok)
	if w := mustDo(t, app, "/orders/"+id, ""); w.Code != http.StatusTooManyRequests || !errors.Is(busy, core.ErrTimeout) {
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
	handler := func(c *fiber.Ctx) error {
		ran.Add(1)
		lease.Store(fiberlock.Lease(c))
		return c.SendStatus(http.StatusOK)
	}
	w := mustDo(t, router(fiberlock.New(e.Locker, orderKey), handler), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	w = mustDo(t, router(fiberlock.New(e.Locker, orderKey, fiberlock.WithFailOpen()), handler), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || lease.Load() != nil {
		t.Fatalf("fail-open: status %d, handler ran %d, lease %v", w.Code, ran.Load(), lease.Load())
	}
	var got error
	w = mustDo(t, router(fiberlock.New(e.Locker, orderKey, fiberlock.WithErrorHandler(func(c *fiber.Ctx, err error) {
		got = err
		c.Status(http.StatusBadGateway)
	})), handler), "/orders/1", "")
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
	handler := func(c *fiber.Ctx) error { ran.Add(1); return c.SendStatus(http.StatusOK) }
	w := mustDo(t, router(fiberlock.New(l, orderKey, fiberlock.WithWait(20*time.Millisecond)), handler), "/orders/1", "")
	if w.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("fail-closed: status %d, handler ran %d", w.Code, ran.Load())
	}
	var seen error
	mw := fiberlock.New(l, orderKey, fiberlock.WithWait(20*time.Millisecond), fiberlock.WithFailOpenHook(func(c *fiber.Ctx, err error) { seen = err }))
	w = mustDo(t, router(mw, handler), "/orders/1", "")
	if w.Code != http.StatusOK || ran.Load() != 1 || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: status %d, handler ran %d, hook got %v", w.Code, ran.Load(), seen)
	}
}

// TestCancelledContextIs499WithoutBody: fasthttp does not tell a handler
// that its client went away; when a middleware before the lock cancels the
// request context while the request waits, the answer is a bare 499.
func TestCancelledContextIs499WithoutBody(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second))
	id := uniq(t)
	e.Hold(t, "order:"+id)
	var ran atomic.Bool
	app := newApp()
	app.Post("/orders/:id", withContext(func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel) // the client goes away while the request waits
		return ctx
	}), fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error { ran.Store(true); return nil })
	w := mustDo(t, app, "/orders/"+id, "")
	if w.Code != fiberlock.StatusClientClosedRequest || w.Body != "" || ran.Load() {
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
		opts []fiberlock.Option
		want []string
	}{
		"negative wait": {e.Locker, orderKey, []fiberlock.Option{fiberlock.WithWait(-time.Second)}, []string{"WithWait(-1s)"}},
		"nil option":    {e.Locker, orderKey, []fiberlock.Option{nil}, []string{"option 0 is nil"}},
		"nil key":       {e.Locker, nil, nil, []string{"key Func is nil"}},
		"nil locker":    {nil, orderKey, nil, []string{"Locker is nil"}},
		"broken locker": {broken, orderKey, nil, []string{"Locker is unusable", "Redis client is nil"}},
		"nil handlers": {e.Locker, orderKey, []fiberlock.Option{fiberlock.WithErrorHandler(nil), fiberlock.WithBusyHandler(nil), fiberlock.WithTTLFunc(nil), fiberlock.WithFailOpenHook(nil)},
			[]string{"WithErrorHandler: nil function", "WithBusyHandler: nil function", "WithTTLFunc: nil function", "WithFailOpenHook: nil function"}},
		"several at once": {nil, nil, []fiberlock.Option{fiberlock.WithTTL(-1), fiberlock.WithSkip(nil), fiberlock.WithMaxBody(0), fiberlock.WithRetryAfter(-1)},
			[]string{"Locker is nil", "key Func is nil", "WithTTL(-1ns)", "WithSkip: nil function", "WithMaxBody(0)", "WithRetryAfter(-1ns)"}},
	} {
		err := fiberlock.Check(tc.l, tc.key, tc.opts...)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "fiberlock: ") {
			t.Errorf("%s: Check: %v, want a fiberlock error wrapping ErrInvalidOption", name, err)
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
			fiberlock.New(tc.l, tc.key, tc.opts...)
		}()
	}
	if err := fiberlock.Check(e.Locker, orderKey, fiberlock.WithWait(0), fiberlock.WithTTL(time.Second)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

// TestBadKeyFuncIs500: a key Func that can only fail (keyfunc reports its
// bad arguments through it) is a set-up mistake seen per request.
func TestBadKeyFuncIs500(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var ran atomic.Bool
	w := mustDo(t, router(fiberlock.New(e.Locker, keyfunc.Param("")), func(c *fiber.Ctx) error { ran.Store(true); return nil }), "/orders/1", "")
	if w.Code != http.StatusInternalServerError || ran.Load() || errorBody(t, w) != "reqlock: internal error" {
		t.Fatalf("status %d %s, handler ran %v", w.Code, w.Body, ran.Load())
	}
}

func TestSkip(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	app := router(fiberlock.New(e.Locker, orderKey, fiberlock.WithSkip(func(c *fiber.Ctx) bool { return c.Query("dry") != "" })), ok)
	if w := mustDo(t, app, "/orders/1?dry=1", ""); w.Code != http.StatusOK || e.RT.N.Load() != 0 {
		t.Fatalf("skipped request: status %d, %d Redis calls", w.Code, e.RT.N.Load())
	}
}

// TestKeyParts: every kind of key part is read from a Fiber request, route
// template and query included.
func TestKeyParts(t *testing.T) {
	var routes adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(routes.Handler()))
	key := must(keyfunc.Template("{route}|{param.id}|{query.page}|{header.X-Tenant}|{field.order.n}"))
	app := router(fiberlock.New(e.Locker, key), func(c *fiber.Ctx) error { return c.SendString(fiberlock.Lease(c).Name()) })
	for _, path := range []string{"/orders/a%3Ab?page=3", "/orders/a:b?page=%33"} { // two spellings of one request
		w := mustDo(t, app, path, `{"order":{"n":12.50}}`, "X-Tenant", "acme", "Content-Type", "application/json")
		if want := "/orders/%3Aid|a%3Ab|3|acme|12.5"; w.Code != http.StatusOK || w.Body != want {
			t.Fatalf("%s: status %d, name %q, want %q", path, w.Code, w.Body, want)
		}
	}
	if routes.Last() != "/orders/:id" {
		t.Fatalf("AcquireCall.Route = %q, not the route template", routes.Last())
	}
}

// TestBodyStillReadableByHandler: a JSON body read for a {field.X} key is
// Fiber's buffered body, which the handler parses as usual.
func TestBodyStillReadableByHandler(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	app := router(fiberlock.New(e.Locker, keyfunc.Join(keyfunc.Const("order"), keyfunc.Field("order.id"))), func(c *fiber.Ctx) error {
		var in struct {
			Order struct{ ID, Note string }
		}
		if err := c.BodyParser(&in); err != nil {
			return c.Status(http.StatusBadRequest).SendString(err.Error())
		}
		return c.SendString(fmt.Sprintf("%s %s locked as %s", in.Order.ID, in.Order.Note, fiberlock.Lease(c).Name()))
	})
	w := mustDo(t, app, "/orders/x", `{"order":{"id":"A:1","note":"hello"}}`, "Content-Type", "application/json")
	if want := "A:1 hello locked as order:A%3A1"; w.Code != http.StatusOK || w.Body != want {
		t.Fatalf("status %d, body %q, want %q", w.Code, w.Body, want)
	}
}

func TestReleasedAfterPanic(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	var heldInside atomic.Bool
	app := router(fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error {
		heldInside.Store(e.Exists(t, "order:"+id))
		panic("handler bug")
	})
	if w := mustDo(t, app, "/orders/"+id, ""); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", w.Code)
	}
	if !heldInside.Load() || e.Exists(t, "order:"+id) {
		t.Fatalf("held inside the handler: %v; still held after the panic: %v", heldInside.Load(), e.Exists(t, "order:"+id))
	}
}

// TestHandlerErrorGoesToFiber: an error the handler returns reaches Fiber's
// ErrorHandler, after the lock is released.
func TestHandlerErrorGoesToFiber(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	var heldThen atomic.Bool
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: func(c *fiber.Ctx, err error) error {
		heldThen.Store(e.Exists(t, "order:"+id))
		return fiber.DefaultErrorHandler(c, err)
	}})
	app.Post("/orders/:id", fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error {
		return fiber.NewError(http.StatusUnprocessableEntity, "no such order")
	})
	w := mustDo(t, app, "/orders/"+id, "")
	if w.Code != http.StatusUnprocessableEntity || w.Body != "no such order" || heldThen.Load() {
		t.Fatalf("status %d %s, still held in the error handler: %v", w.Code, w.Body, heldThen.Load())
	}
}

func TestLostLeaseCancelsRequestContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	var cause error
	app := router(fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error {
		ctx := c.UserContext()
		// Someone deletes the lock (an operator, a failover); Extend finds it gone.
		e.Client.Del(ctx, fiberlock.Lease(c).Key())
		if err := fiberlock.Lease(c).Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("extend: %v", err)
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	mustDo(t, app, "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("request context not cancelled with ErrNotHeld: cause %v", cause)
	}

	// The same when the TTL runs out under a slow handler.
	cause = nil
	app = router(fiberlock.New(e.Locker, orderKey, fiberlock.WithTTL(50*time.Millisecond)), func(c *fiber.Ctx) error {
		select {
		case <-c.UserContext().Done():
			cause = context.Cause(c.UserContext())
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	mustDo(t, app, "/orders/"+id, "")
	if !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("TTL ran out: cause %v", cause)
	}
}

func TestTTLOptions(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var pttl time.Duration
	handler := func(c *fiber.Ctx) error {
		pttl = e.Client.PTTL(c.UserContext(), fiberlock.Lease(c).Key()).Val()
		return nil
	}
	slow := fiberlock.WithTTLFunc(func(c *fiber.Ctx) time.Duration {
		if c.Query("slow") != "" {
			return 2 * time.Hour
		}
		return 0
	})
	cases := []struct {
		ctxTTL time.Duration // set by an earlier middleware with core.ContextWithTTL
		opts   []fiberlock.Option
		path   string
		min    time.Duration
		max    time.Duration
	}{
		{0, nil, "/orders/1", 5 * time.Second, 10 * time.Second},
		{0, []fiberlock.Option{fiberlock.WithTTL(time.Minute)}, "/orders/2", 55 * time.Second, time.Minute},
		{0, []fiberlock.Option{fiberlock.WithTTL(time.Minute), slow}, "/orders/3?slow=1", 119 * time.Minute, 2 * time.Hour},
		{0, []fiberlock.Option{fiberlock.WithTTL(time.Minute), slow}, "/orders/4", 55 * time.Second, time.Minute},
		{time.Hour, []fiberlock.Option{fiberlock.WithTTL(time.Minute)}, "/orders/5", 59 * time.Minute, time.Hour},
		{time.Hour, []fiberlock.Option{fiberlock.WithTTL(time.Minute), slow}, "/orders/6?slow=1", 119 * time.Minute, 2 * time.Hour},
	}
	for _, tc := range cases {
		app := newApp()
		app.Post("/orders/:id", withContext(func(ctx context.Context) context.Context {
			if tc.ctxTTL > 0 {
				return core.ContextWithTTL(ctx, tc.ctxTTL)
			}
			return ctx
		}), fiberlock.New(e.Locker, orderKey, tc.opts...), handler)
		if w := mustDo(t, app, tc.path, ""); w.Code != http.StatusOK || pttl < tc.min || pttl > tc.max {
			t.Errorf("%s (context TTL %v): status %d, PTTL %v, want in [%v, %v]", tc.path, tc.ctxTTL, w.Code, pttl, tc.min, tc.max)
		}
	}
}

// TestReentrancyNeedsTheUserContext: the lease is in c.UserContext(). A
// service function given it locks the same order again at once, without a
// Redis call; given c.Context() (fasthttp's RequestCtx, a context.Context
// that knows nothing of the lease), it waits for the request's own lock and
// times out.
func TestReentrancyNeedsTheUserContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(50*time.Millisecond))
	pay := func(ctx context.Context, order string) error { // the service layer, unaware of HTTP
		lease, err := e.Locker.Acquire(ctx, "order:"+order)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
	for _, user := range []bool{true, false} {
		id := uniq(t)
		var err error
		var calls int64
		var stillHeld bool
		app := router(fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error {
			before := e.RT.N.Load()
			var ctx context.Context = c.Context()
			if user {
				ctx = c.UserContext()
			}
			err = pay(ctx, c.Params("id"))
			calls = e.RT.N.Load() - before
			stillHeld = e.Exists(t, "order:"+id)
			return nil
		})
		if w := mustDo(t, app, "/orders/"+id, ""); w.Code != http.StatusOK {
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
		if user && (err != nil || calls != 0 || !stillHeld || e.Exists(t, "order:"+id)) {
			t.Errorf("c.UserContext(): %v after %d Redis calls; held after the nested release: %v; held after the request: %v",
				err, calls, stillHeld, e.Exists(t, "order:"+id))
		}
		if !user && !errors.Is(err, core.ErrTimeout) {
			t.Errorf("c.Context(): %v, want ErrTimeout (the lease is not found through it)", err)
		}
	}
}

// TestCustomHandlersNeverRunTheHandlerUnlocked: busy and error handlers
// answer; the next handler never runs without the lock, even when they call
// c.Next themselves.
func TestCustomHandlersNeverRunTheHandlerUnlocked(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	e.Hold(t, "order:"+id)
	answer := func(c *fiber.Ctx, err error) { _ = c.Status(http.StatusTeapot).JSON(fiber.Map{"error": "custom"}) }
	for name, tc := range map[string]struct {
		mw   fiber.Handler
		path string
	}{
		"busy handler":             {fiberlock.New(e.Locker, orderKey, fiberlock.WithWait(time.Millisecond), fiberlock.WithBusyHandler(answer)), "/orders/" + id},
		"error handler, busy":      {fiberlock.New(e.Locker, orderKey, fiberlock.WithWait(time.Millisecond), fiberlock.WithErrorHandler(answer)), "/orders/" + id},
		"error handler, no tenant": {fiberlock.New(e.Locker, keyfunc.Header("X-Tenant"), fiberlock.WithErrorHandler(answer)), "/orders/1"},
		"error handler, bad key":   {fiberlock.New(e.Locker, keyfunc.Param(""), fiberlock.WithErrorHandler(answer)), "/orders/1"},
	} {
		var ran atomic.Bool
		w := mustDo(t, router(tc.mw, func(c *fiber.Ctx) error { ran.Store(true); return nil }), tc.path, "")
		if w.Code != http.StatusTeapot || ran.Load() {
			t.Errorf("%s: status %d, handler ran: %v", name, w.Code, ran.Load())
		}
	}
}

// TestOuterMiddlewareKeepsItsContext: after c.Next returns, a middleware
// before fiberlock finds the request context it had, not the lease's, which
// is cancelled once the lock is released; also when the handler panics.
func TestOuterMiddlewareKeepsItsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	for name, h := range map[string]fiber.Handler{"handler returns": ok, "handler panics": func(*fiber.Ctx) error { panic("bug") }} {
		var before, after context.Context
		var inside *core.Lease
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(func(c *fiber.Ctx) (err error) {
			before = c.UserContext()
			defer func() {
				after = c.UserContext()
				if recover() != nil {
					err = c.SendStatus(http.StatusInternalServerError)
				}
			}()
			return c.Next()
		})
		app.Post("/orders/:id", fiberlock.New(e.Locker, orderKey), func(c *fiber.Ctx) error { inside = fiberlock.Lease(c); return h(c) })
		mustDo(t, app, "/orders/"+uniq(t), "")
		if inside == nil || after != before || after.Err() != nil || core.LeaseFromContext(after) != nil {
			t.Errorf("%s: locked inside: %v; after Next, the context is the one before: %v (err %v, carries a lease: %v)",
				name, inside != nil, after == before, after.Err(), core.LeaseFromContext(after) != nil)
		}
	}
}

// TestWhereItGoes: Fiber runs the handlers given to app.Use or to a group as
// a route of their own, before the route with the path parameters matches:
// a key that needs them fails on every request, the server's mistake,
// answered 500 with an error saying where the middleware goes
// (ErrRouteUnknown). Given to the route itself, the middleware sees its
// template and parameters. A key of headers only works anywhere, and a
// group whose own prefix has the parameter gives it to its middleware.
func TestWhereItGoes(t *testing.T) {
	var routes adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithHandlers(routes.Handler()))
	handler := func(c *fiber.Ctx) error { return c.SendString(fiberlock.Lease(c).Name()) }
	byTenant := keyfunc.Join(keyfunc.Const("tenant"), keyfunc.Header("X-Tenant"))
	for name, tc := range map[string]struct {
		wire        func(*fiber.App)
		code        int
		name, label string
	}{
		"route": {func(app *fiber.App) { app.Post("/orders/:id", fiberlock.New(e.Locker, orderKey), handler) }, http.StatusOK, "order:7", "/orders/:id"},
		"app.Use": {func(app *fiber.App) {
			app.Use(fiberlock.New(e.Locker, orderKey))
			app.Post("/orders/:id", handler)
		}, http.StatusInternalServerError, "", ""},
		"app.Use with a prefix": {func(app *fiber.App) {
			app.Use("/orders", fiberlock.New(e.Locker, orderKey))
			app.Post("/orders/:id", handler)
		}, http.StatusInternalServerError, "", ""},
		"group": {func(app *fiber.App) { app.Group("/orders", fiberlock.New(e.Locker, orderKey)).Post("/:id", handler) }, http.StatusInternalServerError, "", ""},
		"group.Use": {func(app *fiber.App) {
			g := app.Group("/orders")
			g.Use(fiberlock.New(e.Locker, orderKey))
			g.Post("/:id", handler)
		}, http.StatusInternalServerError, "", ""},
		// The group's own prefix has :id: its middleware knows it.
		"group with the parameter": {func(app *fiber.App) {
			app.Group("/orders/:id", fiberlock.New(e.Locker, orderKey)).Post("/", handler)
		}, http.StatusOK, "order:7", "/orders/:id"},
		// The route label is then the middleware's own route.
		"app.Use, headers only": {func(app *fiber.App) {
			app.Use(fiberlock.New(e.Locker, byTenant))
			app.Post("/orders/:id", handler)
		}, http.StatusOK, "tenant:acme", "/"},
	} {
		app := newApp()
		tc.wire(app)
		w := mustDo(t, app, "/orders/7", "", "X-Tenant", "acme")
		if w.Code != tc.code || (tc.code == http.StatusOK && (w.Body != tc.name || routes.Last() != tc.label)) {
			t.Errorf("%s: status %d %s, route label %q; want %d %q %q", name, w.Code, w.Body, routes.Last(), tc.code, tc.name, tc.label)
		}
		if tc.code == http.StatusInternalServerError {
			if got, want := errorBody(t, w), fiberlock.ErrRouteUnknown.Error()+` (param "id")`; got != want {
				t.Errorf("%s: the 500 says %q; want %q", name, got, want)
			}
		}
	}
}

// TestMisplacementIsTheServers: a custom error handler gets the error of a
// misplaced middleware, ErrRouteUnknown, not keyfunc.ErrMissing (the
// client's fault). On a route, a parameter that the route does not have is
// a key that does not fit the route (400, naming the route), and one that
// the route has and the request left empty (":id?") the client's (400);
// neither is blamed on app.Use.
func TestMisplacementIsTheServers(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var got error
	var ran atomic.Bool
	custom := fiberlock.WithErrorHandler(func(c *fiber.Ctx, err error) { got = err; _ = c.SendStatus(http.StatusTeapot) })
	app := newApp()
	app.Use(fiberlock.New(e.Locker, orderKey, custom))
	app.Post("/orders/:id", func(c *fiber.Ctx) error { ran.Store(true); return nil })
	if w := mustDo(t, app, "/orders/7", ""); w.Code != http.StatusTeapot || ran.Load() {
		t.Errorf("custom error handler: status %d, handler ran %v", w.Code, ran.Load())
	}
	if !errors.Is(got, fiberlock.ErrRouteUnknown) || errors.Is(got, keyfunc.ErrMissing) {
		t.Errorf("the error handler got %v; want ErrRouteUnknown, not keyfunc.ErrMissing", got)
	}

	for path, tc := range map[string]struct {
		route string
		says  string
	}{
		"/orders": {"/orders", `the route "/orders" running the middleware has no path parameter "id"`},
		"/items":  {"/items/:id?", `param "id"`},
	} {
		app := newApp()
		app.Post(tc.route, fiberlock.New(e.Locker, orderKey), handlerName)
		w := mustDo(t, app, path, "")
		if w.Code != http.StatusBadRequest || strings.Contains(w.Body, "app.Use") || !strings.Contains(errorBody(t, w), tc.says) {
			t.Errorf("route %s, request %s: status %d %s; want 400 saying %q", tc.route, path, w.Code, w.Body, tc.says)
		}
	}
}

// TestOverLoopback serves the app on a real listener: the same answers as
// app.Test gives, through fasthttp's server.
func TestOverLoopback(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := uniq(t)
	app := router(fiberlock.New(e.Locker, orderKey, fiberlock.WithWait(time.Millisecond)), handlerName)
	url, client := serve(t, app)
	resp, err := client.Post(url+"/orders/"+id, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "order:"+id {
		t.Fatalf("status %d %q", resp.StatusCode, body)
	}
	e.Hold(t, "order:"+id)
	resp, err = client.Post(url+"/orders/"+id, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("busy: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func handlerName(c *fiber.Ctx) error { return c.SendString(fiberlock.Lease(c).Name()) }

// TestUnescapePath: a path parameter is unescaped once, whether Fiber
// unescapes the path (fiber.Config's UnescapePath) or not: /orders/a%3Ab
// and /orders/a:b name one lock, and /orders/a%2541 is "a%41" either way.
func TestUnescapePath(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	key := keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id"))
	for _, unescape := range []bool{false, true} {
		app := fiber.New(fiber.Config{UnescapePath: unescape})
		app.Post("/orders/:id", fiberlock.New(e.Locker, key), handlerName)
		for path, want := range map[string]string{
			"/orders/a%3Ab":  "order:" + keyfunc.Escape("a:b"),
			"/orders/a:b":    "order:" + keyfunc.Escape("a:b"),
			"/orders/a%2541": "order:" + keyfunc.Escape("a%41"),
		} {
			if w := mustDo(t, app, path, ""); w.Code != http.StatusOK || w.Body != want {
				t.Errorf("UnescapePath %v, %s: status %d, name %q, want %q", unescape, path, w.Code, w.Body, want)
			}
		}
	}
}
