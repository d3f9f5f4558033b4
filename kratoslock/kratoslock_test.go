package kratoslock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/middleware/recovery"
	"github.com/go-kratos/kratos/v2/transport"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/kratoslock"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

var orderKey = must(keyfunc.Template("order:{field.order.id}"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func order(id string) *testsvc.Request { return &testsvc.Request{Order: &testsvc.Order{Id: id}} }

func mws(m ...middleware.Middleware) []middleware.Middleware { return m }

// lockName answers the name the request was locked under.
func lockName(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	if l := kratoslock.LeaseFromContext(ctx); l != nil {
		return &testsvc.Reply{Lock: l.Name()}, nil
	}
	return &testsvc.Reply{Lock: "<none>"}, nil
}

// TestOneOrderAtATimeOrdersInParallel, on both transports.
func TestOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	for _, via := range []string{"http", "grpc"} {
		t.Run(via, func(t *testing.T) {
			prefix := adaptertest.Uniq(t)
			x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
			do := func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				x.Handle(req.Order.Id)
				return &testsvc.Reply{}, nil
			}
			lock := mws(kratoslock.Server(e.Locker, orderKey))
			if via == "http" {
				c := serveHTTP(t, do, lock)
				x.Run(t, func(o string) error {
					a, err := c.do(context.Background(), "1", o, "")
					if err == nil && a.Status != http.StatusOK {
						err = errors.New(a.Reason)
					}
					return err
				})
				return
			}
			c := serveGRPC(t, do, lock)
			x.Run(t, func(o string) error {
				_, err := c.Do(context.Background(), order(o))
				return err
			})
		})
	}
}

func TestHTTPAnswers(t *testing.T) {
	adaptertest.LeakCheck(t)
	var route adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second), core.WithHandlers(route.Handler()))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	down := redistest.Start(t)
	dead := adaptertest.NewEnv(t, down, core.WithIOTimeout(300*time.Millisecond))
	down.Stop()
	var custom error
	for _, tc := range []struct {
		name        string
		mw          middleware.Middleware
		path, id, q string
		header      []string
		status      int
		lock        string // of a success, else the reason
		retryAfter  string
	}{
		{"field", kratoslock.Server(e.Locker, orderKey), "1", "free" + id, "", nil, 200, "order:free" + keyfunc.Escape(id), ""},
		{"path, query and header", kratoslock.Server(e.Locker, must(keyfunc.Template("{param.id}:{query.tenant}:{header.x-user}"))),
			"7", "", "acme", []string{"X-User", "ann"}, 200, "7:acme:ann", ""},
		{"missing field", kratoslock.Server(e.Locker, orderKey), "1", "", "", nil, 400, "REQLOCK_BAD_REQUEST", ""},
		{"missing header", kratoslock.Server(e.Locker, keyfunc.Header("x-user")), "1", "1", "", nil, 400, "REQLOCK_BAD_REQUEST", ""},
		{"busy", kratoslock.Server(e.Locker, orderKey, kratoslock.WithWait(20*time.Millisecond), kratoslock.WithRetryAfter(3*time.Second)),
			"1", id, "", nil, 409, "REQLOCK_BUSY", "3"},
		{"redis down", kratoslock.Server(dead.Locker, orderKey), "1", "1", "", nil, 503, "REQLOCK_UNAVAILABLE", ""},
		{"fail open", kratoslock.Server(dead.Locker, orderKey, kratoslock.WithFailOpen()), "1", "1", "", nil, 200, "<none>", ""},
		{"bad field path", kratoslock.Server(e.Locker, keyfunc.Field("order.nope")), "1", "1", "", nil, 500, "REQLOCK_ERROR", ""},
		{"error handler", kratoslock.Server(e.Locker, orderKey, kratoslock.WithWait(time.Millisecond),
			kratoslock.WithErrorHandler(func(ctx context.Context, err error) error {
				custom = err
				return kerrors.New(http.StatusTooManyRequests, "LATER", "later")
			})), "1", id, "", nil, 429, "LATER", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serveHTTP(t, lockName, mws(tc.mw))
			a, err := c.do(context.Background(), tc.path, tc.id, tc.q, tc.header...)
			got := a.Lock
			if a.Status != http.StatusOK {
				got = a.Reason
			}
			if err != nil || a.Status != tc.status || got != tc.lock || a.RetryAfter != tc.retryAfter {
				t.Fatalf("got %+v, %v; want %d %q, Retry-After %q", a, err, tc.status, tc.lock, tc.retryAfter)
			}
		})
	}
	if !errors.Is(custom, core.ErrTimeout) {
		t.Fatalf("the error handler got %v", custom)
	}
	if route.Last() != "/reqlock.kratoslock.testsvc.Test/Do" {
		t.Fatalf("AcquireCall.Route = %q", route.Last())
	}
}

func TestGRPCCodes(t *testing.T) {
	adaptertest.LeakCheck(t)
	var route adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second), core.WithHandlers(route.Handler()))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	tenantKey := must(keyfunc.Template("order:{field.order.id}:{header.x-tenant}"))
	for _, tc := range []struct {
		name string
		mw   middleware.Middleware
		req  *testsvc.Request
		md   []string
		code codes.Code
		lock string
	}{
		{"field and metadata", kratoslock.Server(e.Locker, tenantKey), order("1"), []string{"x-tenant", "acme"}, codes.OK, "order:1:acme"},
		{"missing field", kratoslock.Server(e.Locker, orderKey), &testsvc.Request{}, nil, codes.InvalidArgument, ""},
		{"missing metadata", kratoslock.Server(e.Locker, tenantKey), order("1"), nil, codes.InvalidArgument, ""},
		{"busy", kratoslock.Server(e.Locker, orderKey, kratoslock.WithWait(20*time.Millisecond)), order(id), nil, codes.Aborted, ""},
		{"path param", kratoslock.Server(e.Locker, keyfunc.Param("id")), order("1"), nil, codes.Internal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := serveGRPC(t, lockName, mws(tc.mw))
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			reply, err := client.Do(ctx, tc.req)
			if status.Code(err) != tc.code || (err == nil && reply.Lock != tc.lock) {
				t.Fatalf("got %v, %v; want %v, lock %q", reply, err, tc.code, tc.lock)
			}
		})
	}
	if route.Last() != "/reqlock.kratoslock.testsvc.Test/Do" {
		t.Fatalf("AcquireCall.Route = %q", route.Last())
	}
}

// TestServerTimeoutIsDeadline: Kratos's server timeout passing while the
// request waits for a held name is 504 over HTTP, DeadlineExceeded over
// gRPC.
func TestServerTimeoutIsDeadline(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	lock := mws(kratoslock.Server(e.Locker, orderKey))
	c := serveHTTP(t, lockName, lock, khttp.Timeout(100*time.Millisecond))
	if a, err := c.do(context.Background(), "1", id, ""); err != nil || a.Status != http.StatusGatewayTimeout || a.Reason != "REQLOCK_DEADLINE_EXCEEDED" {
		t.Fatalf("HTTP: %+v, %v", a, err)
	}
	client := serveGRPC(t, lockName, lock, kgrpc.Timeout(100*time.Millisecond))
	if _, err := client.Do(context.Background(), order(id)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("gRPC: %v", err)
	}
}

// fakeTransport is a server transport for driving the middleware directly.
type fakeTransport struct {
	op           string
	header, resp headerMap
}

func (f *fakeTransport) Kind() transport.Kind            { return transport.KindGRPC }
func (f *fakeTransport) Endpoint() string                { return "" }
func (f *fakeTransport) Operation() string               { return f.op }
func (f *fakeTransport) RequestHeader() transport.Header { return f.header }
func (f *fakeTransport) ReplyHeader() transport.Header   { return f.resp }

type headerMap http.Header

func (h headerMap) Get(k string) string      { return http.Header(h).Get(k) }
func (h headerMap) Set(k, v string)          { http.Header(h).Set(k, v) }
func (h headerMap) Add(k, v string)          { http.Header(h).Add(k, v) }
func (h headerMap) Keys() []string           { return nil }
func (h headerMap) Values(k string) []string { return http.Header(h).Values(k) }

// TestCallerGoneIsClientClosed: a caller that goes away while its request
// waits gets 499 (Canceled); the reply header of a busy answer carries
// Retry-After on any transport.
func TestCallerGoneIsClientClosed(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	tr := &fakeTransport{op: "/x.Y/Z", header: headerMap{}, resp: headerMap{}}
	ctx, cancel := context.WithCancel(transport.NewServerContext(context.Background(), tr))
	time.AfterFunc(50*time.Millisecond, cancel)
	h := kratoslock.Server(e.Locker, orderKey)(func(ctx context.Context, req any) (any, error) { return "ran", nil })
	_, err := h(ctx, order(id))
	if se := kerrors.FromError(err); se.Code != 499 || se.Reason != "REQLOCK_CANCELED" || se.GRPCStatus().Code() != codes.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
	h = kratoslock.Server(e.Locker, orderKey, kratoslock.WithWait(0))(func(ctx context.Context, req any) (any, error) { return "ran", nil })
	if _, err := h(transport.NewServerContext(context.Background(), tr), order(id)); kerrors.FromError(err).GRPCStatus().Code() != codes.Aborted || tr.resp.Get("Retry-After") != "1" {
		t.Fatalf("busy: %v, Retry-After %q", err, tr.resp.Get("Retry-After"))
	}
}

// TestWithoutTransport: a call with no server transport in its context (a
// handler called directly) is still locked, by its message; it has no
// headers and no route.
func TestWithoutTransport(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	h := kratoslock.Server(e.Locker, orderKey)(func(ctx context.Context, req any) (any, error) {
		return lockName(ctx, req.(*testsvc.Request))
	})
	if reply, err := h(context.Background(), order("9")); err != nil || reply.(*testsvc.Reply).Lock != "order:9" {
		t.Fatalf("got %v, %v", reply, err)
	}
	h = kratoslock.Server(e.Locker, keyfunc.Header("x-tenant"))(func(ctx context.Context, req any) (any, error) { return nil, nil })
	if _, err := h(context.Background(), order("9")); kerrors.FromError(err).Code != 400 {
		t.Fatalf("no headers: %v", err)
	}
}

func TestReleasedAfterPanic(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var heldInside bool
	c := serveHTTP(t, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		heldInside = e.Exists(t, "order:"+keyfunc.Escape(id))
		panic("handler bug")
	}, mws(recovery.Recovery(), kratoslock.Server(e.Locker, orderKey)))
	if a, err := c.do(context.Background(), "1", id, ""); err != nil || a.Status != http.StatusInternalServerError {
		t.Fatalf("got %+v, %v", a, err)
	}
	if !heldInside || e.Exists(t, "order:"+keyfunc.Escape(id)) {
		t.Fatalf("held inside: %v; held after the panic: %v", heldInside, e.Exists(t, "order:"+keyfunc.Escape(id)))
	}
}

func TestLostLeaseCancelsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	client := serveGRPC(t, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), core.ErrNotHeld) {
				return &testsvc.Reply{Lock: "lost"}, nil
			}
			return nil, context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil, errors.New("the context outlived the lease")
		}
	}, mws(kratoslock.Server(e.Locker, orderKey, kratoslock.WithTTL(50*time.Millisecond))))
	if reply, err := client.Do(context.Background(), order(adaptertest.Uniq(t))); err != nil || reply.Lock != "lost" {
		t.Fatalf("got %v, %v", reply, err)
	}
}

// TestErrorHandlerReturningNilNeverRunsUnlocked: an error handler that only
// logs does not make the request proceed.
func TestErrorHandlerReturningNilNeverRunsUnlocked(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	var logged, ran atomic.Int64
	h := kratoslock.Server(e.Locker, orderKey, kratoslock.WithWait(0),
		kratoslock.WithErrorHandler(func(ctx context.Context, err error) error { logged.Add(1); return nil }),
	)(func(ctx context.Context, req any) (any, error) { ran.Add(1); return nil, nil })
	if _, err := h(context.Background(), order(id)); kerrors.FromError(err).Code != 409 || ran.Load() != 0 || logged.Load() != 1 {
		t.Fatalf("%v; handler ran %d, error handler %d", err, ran.Load(), logged.Load())
	}
}

func TestStalledRedisFailOpenHookAndTTLFunc(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	var seen error
	h := kratoslock.Server(l, orderKey, kratoslock.WithWait(20*time.Millisecond),
		kratoslock.WithFailOpenHook(func(ctx context.Context, err error) { seen = err }),
	)(func(ctx context.Context, req any) (any, error) { return lockName(ctx, req.(*testsvc.Request)) })
	if reply, err := h(context.Background(), order("1")); err != nil || reply.(*testsvc.Reply).Lock != "<none>" || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: %v, %v; the hook got %v", reply, err, seen)
	}

	e := adaptertest.NewEnv(t, nil)
	var pttl time.Duration
	var operation string
	h = kratoslock.Server(e.Locker, orderKey, kratoslock.WithTTL(time.Minute),
		kratoslock.WithTTLFunc(func(ctx context.Context, op string) time.Duration { operation = op; return time.Hour }),
	)(func(ctx context.Context, req any) (any, error) {
		pttl = e.Client.PTTL(ctx, kratoslock.LeaseFromContext(ctx).Key()).Val()
		return nil, nil
	})
	ctx := transport.NewServerContext(context.Background(), &fakeTransport{op: "/x.Y/Z", header: headerMap{}, resp: headerMap{}})
	if _, err := h(ctx, order(adaptertest.Uniq(t))); err != nil || pttl < 59*time.Minute || pttl > time.Hour || operation != "/x.Y/Z" {
		t.Fatalf("%v, PTTL %v, operation %q", err, pttl, operation)
	}
}

func TestInvalidSetupPanicsAtStart(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	opts := []kratoslock.Option{kratoslock.WithWait(-time.Second), kratoslock.WithTTL(-1), nil, kratoslock.WithTTLFunc(nil),
		kratoslock.WithErrorHandler(nil), kratoslock.WithFailOpenHook(nil), kratoslock.WithRetryAfter(-1)}
	err := kratoslock.Check(nil, orderKey, opts...)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "kratoslock: ") {
		t.Fatalf("Check: %v, want a kratoslock error wrapping ErrInvalidOption", err)
	}
	for _, want := range []string{"WithWait(-1s)", "WithTTL(-1ns)", "option 2 is nil", "WithTTLFunc: nil function",
		"WithErrorHandler: nil function", "WithFailOpenHook: nil function", "WithRetryAfter(-1ns)", "Locker is nil"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	func() {
		defer func() {
			if p, ok := recover().(error); !ok || p.Error() != err.Error() {
				t.Errorf("panicked with %v, want %v", p, err)
			}
		}()
		kratoslock.Server(nil, orderKey, opts...)
	}()
	if err := kratoslock.Check(e.Locker, nil); err == nil || !strings.Contains(err.Error(), "key Func is nil") {
		t.Fatalf("nil key: %v", err)
	}
	if err := kratoslock.Check(e.Locker, orderKey, kratoslock.WithWait(0)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

// TestToError: the HTTP status of each failure, and the gRPC code Kratos
// derives from it.
func TestToError(t *testing.T) {
	for err, want := range map[error]struct {
		status int
		code   codes.Code
	}{
		keyfunc.ErrMissing: {400, codes.InvalidArgument}, keyfunc.ErrUnreadable: {400, codes.InvalidArgument},
		core.ErrTimeout: {409, codes.Aborted}, core.ErrStorage: {503, codes.Unavailable},
		context.Canceled: {499, codes.Canceled}, context.DeadlineExceeded: {504, codes.DeadlineExceeded},
		core.ErrInvalidOption: {500, codes.Internal}, keyfunc.ErrUnsupported: {500, codes.Internal},
	} {
		got := kratoslock.ToError(err)
		if int(got.Code) != want.status || got.GRPCStatus().Code() != want.code {
			t.Errorf("%v: %d %v, want %d %v", err, got.Code, got.GRPCStatus().Code(), want.status, want.code)
		}
	}
}
