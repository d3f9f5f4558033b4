package connectlock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/connectlock"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

var orderKey = must(keyfunc.Template("order:{field.order.id}"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func order(id string) *testsvc.Request { return &testsvc.Request{Order: &testsvc.Order{Id: id}} }

// lockName answers the name the call was locked under.
func lockName(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	return &testsvc.Reply{Lock: nameOf(ctx)}, nil
}

func nameOf(ctx context.Context) string {
	if l := connectlock.LeaseFromContext(ctx); l != nil {
		return l.Name()
	}
	return "<none>"
}

func with(icpt connect.Interceptor) connect.HandlerOption { return connect.WithInterceptors(icpt) }

// call does one unary call and returns the reply's lock name.
func call(client testsvcconnect.TestClient, ctx context.Context, req *testsvc.Request, header ...string) (string, error) {
	r := connect.NewRequest(req)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header().Set(header[i], header[i+1])
	}
	resp, err := client.Do(ctx, r)
	if err != nil {
		return "", err
	}
	return resp.Msg.Lock, nil
}

func TestUnaryOneOrderAtATimeOrdersInParallel(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	prefix := adaptertest.Uniq(t)
	x := adaptertest.NewExclusion([]string{prefix + "a", prefix + "b", prefix + "c"}, 6)
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		x.Handle(req.Order.Id)
		return &testsvc.Reply{}, nil
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey)))
	x.Run(t, func(o string) error {
		_, err := call(client, context.Background(), order(o))
		return err
	})
}

func TestUnaryCodes(t *testing.T) {
	adaptertest.LeakCheck(t)
	var route adaptertest.Routes
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second), core.WithHandlers(route.Handler()))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	down := redistest.Start(t)
	dead := adaptertest.NewEnv(t, down, core.WithIOTimeout(300*time.Millisecond))
	down.Stop()

	tenantKey := must(keyfunc.Template("order:{field.order.id}:{header.x-tenant}"))
	var custom error
	for _, tc := range []struct {
		name   string
		icpt   connect.Interceptor
		req    *testsvc.Request
		header []string
		code   connect.Code // 0: OK
		lock   string
	}{
		{"locked", connectlock.NewInterceptor(e.Locker, orderKey), order("free" + id), nil, 0, "order:free" + keyfunc.Escape(id)},
		{"header", connectlock.NewInterceptor(e.Locker, tenantKey), order("1"), []string{"X-Tenant", "acme"}, 0, "order:1:acme"},
		{"missing field", connectlock.NewInterceptor(e.Locker, orderKey), &testsvc.Request{}, nil, connect.CodeInvalidArgument, ""},
		{"empty field", connectlock.NewInterceptor(e.Locker, orderKey), order(""), nil, connect.CodeInvalidArgument, ""},
		{"missing header", connectlock.NewInterceptor(e.Locker, tenantKey), order("1"), nil, connect.CodeInvalidArgument, ""},
		{"busy", connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithWait(20*time.Millisecond)), order(id), nil, connect.CodeAborted, ""},
		{"redis down", connectlock.NewInterceptor(dead.Locker, orderKey), order("1"), nil, connect.CodeUnavailable, ""},
		{"fail open", connectlock.NewInterceptor(dead.Locker, orderKey, connectlock.WithFailOpen()), order("1"), nil, 0, "<none>"},
		{"bad field path", connectlock.NewInterceptor(e.Locker, keyfunc.Field("order.nope")), order("1"), nil, connect.CodeInternal, ""},
		{"path param", connectlock.NewInterceptor(e.Locker, keyfunc.Param("id")), order("1"), nil, connect.CodeInternal, ""},
		{"error handler", connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithWait(time.Millisecond),
			connectlock.WithErrorHandler(func(ctx context.Context, err error) error {
				custom = err
				return connect.NewError(connect.CodeResourceExhausted, errors.New("later"))
			})), order(id), nil, connect.CodeResourceExhausted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := serve(t, &service{do: lockName}, with(tc.icpt))
			lock, err := call(client, context.Background(), tc.req, tc.header...)
			if tc.code == 0 && (err != nil || lock != tc.lock) || tc.code != 0 && connect.CodeOf(err) != tc.code {
				t.Fatalf("got %q, %v; want %v, lock %q", lock, err, tc.code, tc.lock)
			}
		})
	}
	if !errors.Is(custom, core.ErrTimeout) {
		t.Fatalf("the error handler got %v", custom)
	}
	if route.Last() != "/reqlock.connectlock.testsvc.Test/Do" {
		t.Fatalf("AcquireCall.Route = %q", route.Last())
	}
}

// TestClientCallsPassThrough: on a client, the interceptor locks nothing.
func TestClientCallsPassThrough(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	url, hc := serveURL(t, &service{do: lockName, chat: chat})
	icpt := connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithWait(0))
	client := testsvcconnect.NewTestClient(hc, url, connect.WithInterceptors(icpt))
	if lock, err := call(client, context.Background(), order(id)); err != nil || lock != "<none>" {
		t.Fatalf("unary: %q, %v", lock, err)
	}
	if got, err := chatOnce(client, context.Background(), nil, order(id)); err != nil || len(got) != 1 || got[0] != "<none>" {
		t.Fatalf("stream: %q, %v", got, err)
	}
}

func TestInvalidSetupPanicsAtStart(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	opts := []connectlock.Option{connectlock.WithWait(-time.Second), connectlock.WithTTL(-1), nil, connectlock.WithTTLFunc(nil),
		connectlock.WithErrorHandler(nil), connectlock.WithFailOpenHook(nil)}
	err := connectlock.Check(nil, orderKey, opts...)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "connectlock: ") {
		t.Fatalf("Check: %v, want a connectlock error wrapping ErrInvalidOption", err)
	}
	for _, want := range []string{"WithWait(-1s)", "WithTTL(-1ns)", "option 2 is nil", "WithTTLFunc: nil function",
		"WithErrorHandler: nil function", "WithFailOpenHook: nil function", "Locker is nil"} {
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
		connectlock.NewInterceptor(nil, orderKey, opts...)
	}()
	if err := connectlock.Check(e.Locker, nil); err == nil || !strings.Contains(err.Error(), "key Func is nil") {
		t.Fatalf("nil key: %v", err)
	}
	if err := connectlock.Check(e.Locker, orderKey, connectlock.WithWait(0), connectlock.WithTTL(time.Second)); err != nil {
		t.Fatalf("a valid set-up: %v", err)
	}
}

func TestToError(t *testing.T) {
	for err, code := range map[error]connect.Code{
		keyfunc.ErrMissing: connect.CodeInvalidArgument, keyfunc.ErrUnreadable: connect.CodeInvalidArgument,
		core.ErrTimeout: connect.CodeAborted, core.ErrStorage: connect.CodeUnavailable,
		context.Canceled: connect.CodeCanceled, context.DeadlineExceeded: connect.CodeDeadlineExceeded,
		core.ErrInvalidOption: connect.CodeInternal, keyfunc.ErrUnsupported: connect.CodeInternal,
	} {
		if got := connectlock.ToError(err).Code(); got != code {
			t.Errorf("%v: %v, want %v", err, got, code)
		}
	}
	if msg := connectlock.ToError(core.ErrTimeout).Message(); msg != "reqlock: the resource is busy, retry later" {
		t.Errorf("busy message %q", msg)
	}
}

func TestReleasedAfterPanic(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	var heldInside bool
	recovered := connect.WithRecover(func(context.Context, connect.Spec, http.Header, any) error {
		return connect.NewError(connect.CodeInternal, errors.New("recovered"))
	})
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		heldInside = e.Exists(t, "order:"+keyfunc.Escape(id))
		panic("handler bug")
	}}, recovered, with(connectlock.NewInterceptor(e.Locker, orderKey)))
	if _, err := call(client, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeInternal {
		t.Fatalf("got %v", err)
	}
	if !heldInside || e.Exists(t, "order:"+keyfunc.Escape(id)) {
		t.Fatalf("held inside: %v; held after the panic: %v", heldInside, e.Exists(t, "order:"+keyfunc.Escape(id)))
	}
}

func TestLostLeaseCancelsContext(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	client := serve(t, &service{do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), core.ErrNotHeld) {
				return &testsvc.Reply{Lock: "lost"}, nil
			}
			return nil, context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil, errors.New("the context outlived the lease")
		}
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithTTL(50*time.Millisecond))))
	if lock, err := call(client, context.Background(), order(adaptertest.Uniq(t))); err != nil || lock != "lost" {
		t.Fatalf("got %q, %v", lock, err)
	}
}

// chat answers each message with the lease name of the handler's context.
func chat(ctx context.Context, s *bidi) error {
	for {
		if _, err := s.Receive(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := s.Send(&testsvc.Reply{Lock: nameOf(ctx)}); err != nil {
			return err
		}
	}
}

// chatOnce sends reqs on one bidirectional stream, one reply after each, and
// returns the replies' lock names and the stream's error.
func chatOnce(client testsvcconnect.TestClient, ctx context.Context, header []string, reqs ...*testsvc.Request) ([]string, error) {
	s := client.Chat(ctx)
	defer s.CloseResponse()
	for i := 0; i+1 < len(header); i += 2 {
		s.RequestHeader().Set(header[i], header[i+1])
	}
	var got []string
	for _, r := range reqs {
		if err := s.Send(r); err != nil {
			break // the server ended the stream: Receive tells why
		}
		reply, err := s.Receive()
		if err != nil {
			return got, err
		}
		got = append(got, reply.Lock)
	}
	_ = s.CloseRequest()
	_, err := s.Receive()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return got, err
}

func TestStreamLocksFromFirstMessageOrHeaders(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := adaptertest.Uniq(t)
	name := "order:" + keyfunc.Escape(id)

	byField := serve(t, &service{chat: chat, watch: func(ctx context.Context, req *testsvc.Request, s *outbound) error {
		return s.Send(&testsvc.Reply{Lock: nameOf(ctx)})
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithWait(50*time.Millisecond))))
	got, err := chatOnce(byField, context.Background(), nil, order(id), order("other"))
	if err != nil || len(got) != 2 || got[0] != name || got[1] != name {
		t.Fatalf("lock from the first message: %q, %v", got, err)
	}
	if e.Exists(t, name) {
		t.Fatal("still held after the stream ended")
	}
	w, err := byField.Watch(context.Background(), connect.NewRequest(order(id)))
	if err != nil || !w.Receive() || w.Msg().Lock != name {
		t.Fatalf("server streaming: %v, %v", err, w.Err())
	}
	_ = w.Close()
	if _, err := chatOnce(byField, context.Background(), nil, &testsvc.Request{}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("first message without an id: %v", err)
	}
	held := e.Hold(t, name)
	if _, err := chatOnce(byField, context.Background(), nil, order(id)); connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("busy: %v", err)
	}
	_ = held.Release(context.Background())

	byHeader := serve(t, &service{chat: chat}, with(connectlock.NewInterceptor(e.Locker, must(keyfunc.Template("tenant:{header.x-tenant}")))))
	if got, err := chatOnce(byHeader, context.Background(), []string{"X-Tenant", "acme"}, order("1")); err != nil || len(got) != 1 || got[0] != "tenant:acme" {
		t.Fatalf("lock from headers: %q, %v", got, err)
	}
	if _, err := chatOnce(byHeader, context.Background(), nil, order("1")); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("no header: %v", err)
	}
}

func TestStreamsOfOneOrderNeverOverlap(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	var o redistest.Overlap
	client := serve(t, &service{chat: func(ctx context.Context, s *bidi) error {
		if _, err := s.Receive(); err != nil {
			return err
		}
		defer o.Enter()()
		time.Sleep(time.Millisecond)
		return s.Send(&testsvc.Reply{})
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey)))
	id := adaptertest.Uniq(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := chatOnce(client, context.Background(), nil, order(id)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if o.Entries() != 8 || o.Overlaps() != 0 {
		t.Fatalf("%d streams, %d overlapped", o.Entries(), o.Overlaps())
	}
}

// recorder is an interceptor placed before connectlock that reports, on
// got, the error the rest of the server chain returned for each unary call:
// what the server produced, whatever the client saw. entered is signalled
// (without blocking) when a call reaches it.
type recorder struct {
	entered chan struct{}
	got     chan error
}

func newRecorder() *recorder {
	return &recorder{entered: make(chan struct{}, 1), got: make(chan error, 1)}
}

func (r *recorder) interceptor() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			select {
			case r.entered <- struct{}{}:
			default:
			}
			resp, err := next(ctx, req)
			r.got <- err
			return resp, err
		}
	})
}

func (r *recorder) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.got:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not finish the call within 10 s")
		return nil
	}
}

// deadlineOnly has a deadline that it never enforces: the client sends it
// (as the call's timeout) but does not give up at it, so the call's end is
// the server's doing.
type deadlineOnly struct {
	context.Context
	deadline time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.deadline, true }

// TestCallerDeadlineAndCancelSeenByServer: while the order is held, the
// call's timeout passing makes the server answer CodeDeadlineExceeded, and
// the caller going away makes it end the call with CodeCanceled.
func TestCallerDeadlineAndCancelSeenByServer(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	icpt := connectlock.NewInterceptor(e.Locker, orderKey)

	t.Run("deadline", func(t *testing.T) {
		rec := newRecorder()
		client := serve(t, &service{do: lockName}, connect.WithInterceptors(rec.interceptor(), icpt))
		// A deadline far enough off that it has not passed before the call
		// reaches the server and its message is read, however busy the
		// machine: the deadline must pass while the call waits for the order.
		ctx := deadlineOnly{context.Background(), time.Now().Add(2 * time.Second)}
		_, err := call(client, ctx, order(id))
		if got := rec.result(t); connect.CodeOf(got) != connect.CodeDeadlineExceeded || connect.CodeOf(err) != connect.CodeDeadlineExceeded {
			t.Fatalf("the server produced %v, the client got %v; want DeadlineExceeded", got, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		rec := newRecorder()
		client := serve(t, &service{do: lockName}, connect.WithInterceptors(rec.interceptor(), icpt))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := call(client, ctx, order(id)); done <- err }()
		<-rec.entered // the call is on the server, waiting for the order
		cancel()
		if got := rec.result(t); connect.CodeOf(got) != connect.CodeCanceled {
			t.Fatalf("the server produced %v, want Canceled", got)
		}
		if err := <-done; connect.CodeOf(err) != connect.CodeCanceled {
			t.Fatalf("the client got %v", err)
		}
	})
}

// TestErrorHandlerReturningNilNeverRunsUnlocked: an error handler that only
// logs (returns nil) does not make the call proceed, for unary calls and
// both kinds of stream lock.
func TestErrorHandlerReturningNilNeverRunsUnlocked(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	id := adaptertest.Uniq(t)
	e.Hold(t, "order:"+keyfunc.Escape(id))
	e.Hold(t, "tenant:"+keyfunc.Escape(id))
	var logged, ran atomic.Int64
	logOnly := connectlock.WithErrorHandler(func(ctx context.Context, err error) error { logged.Add(1); return nil })
	svc := &service{
		do: func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
			ran.Add(1)
			return &testsvc.Reply{}, nil
		},
		chat: func(ctx context.Context, s *bidi) error { ran.Add(1); return chat(ctx, s) },
	}
	byOrder := serve(t, svc, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithWait(0), logOnly)))
	if _, err := call(byOrder, context.Background(), order(id)); connect.CodeOf(err) != connect.CodeAborted || ran.Load() != 0 {
		t.Errorf("unary: %v, handler ran %d", err, ran.Load())
	}
	got, err := chatOnce(byOrder, context.Background(), nil, order(id))
	if connect.CodeOf(err) != connect.CodeAborted || len(got) != 0 {
		t.Errorf("stream locked at the first message: %v, replies %q", err, got)
	}
	byTenant := serve(t, svc, with(connectlock.NewInterceptor(e.Locker, must(keyfunc.Template("tenant:{header.x-tenant}")), connectlock.WithWait(0), logOnly)))
	if _, err := chatOnce(byTenant, context.Background(), []string{"X-Tenant", id}, order("1")); connect.CodeOf(err) != connect.CodeAborted || ran.Load() != 1 {
		t.Errorf("stream locked by headers: %v, handler ran %d (once for the first-message stream)", err, ran.Load())
	}
	if logged.Load() != 3 {
		t.Errorf("the error handler saw %d failures, want 3", logged.Load())
	}
}

// TestStalledRedisIsUnavailableOrFailOpen: a Redis that never replies gives
// CodeUnavailable, not CodeAborted, even with a wait shorter than the I/O
// timeout; fail-open then runs the handler and reports the storage error to
// its hook.
func TestStalledRedisIsUnavailableOrFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	client := serve(t, &service{do: lockName}, with(connectlock.NewInterceptor(l, orderKey, connectlock.WithWait(20*time.Millisecond))))
	if _, err := call(client, context.Background(), order("1")); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("fail-closed: %v, want Unavailable", err)
	}
	var seen error
	client = serve(t, &service{do: lockName}, with(connectlock.NewInterceptor(l, orderKey, connectlock.WithWait(20*time.Millisecond),
		connectlock.WithFailOpenHook(func(ctx context.Context, err error) { seen = err }))))
	if lock, err := call(client, context.Background(), order("1")); err != nil || lock != "<none>" || !errors.Is(seen, core.ErrStorage) {
		t.Fatalf("fail-open: %q, %v; the hook got %v", lock, err, seen)
	}
}

// TestTTLFunc: WithTTLFunc sees the procedure and wins over WithTTL.
func TestTTLFunc(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var pttl time.Duration
	var procedure string
	client := serve(t, &service{do: func(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
		pttl = e.Client.PTTL(ctx, connectlock.LeaseFromContext(ctx).Key()).Val()
		return &testsvc.Reply{}, nil
	}}, with(connectlock.NewInterceptor(e.Locker, orderKey, connectlock.WithTTL(time.Minute),
		connectlock.WithTTLFunc(func(ctx context.Context, p string) time.Duration { procedure = p; return time.Hour }))))
	if _, err := call(client, context.Background(), order(adaptertest.Uniq(t))); err != nil || pttl < 59*time.Minute || pttl > time.Hour {
		t.Fatalf("%v, PTTL %v", err, pttl)
	}
	if procedure != testsvcconnect.TestDoProcedure {
		t.Fatalf("procedure %q", procedure)
	}
}
