package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// req is the request type of the tests' flows: the per-request TTL of
// WithTTLFunc, and the failure the flow answered.
type req struct {
	ttl     time.Duration
	failure *Failure
	noted   []error
}

var testProtocol = Protocol[*req]{
	Answer: func(x *req, f Failure) { x.failure = &f },
	Note:   func(x *req, err error) { x.noted = append(x.noted, err) },
}

// src is a Source with a route and one header.
type src struct{ route, header string }

func (s src) Route() string                 { return s.route }
func (s src) Param(string) (string, error)  { return "", nil }
func (s src) Query(string) (string, error)  { return "", nil }
func (s src) Header(string) (string, error) { return s.header, nil }
func (s src) Field(string) (string, error)  { return "", nil }

// byHeader names a request by its header.
var byHeader = keyfunc.Header("X-Name")

// newFlow builds a flow on l with the settings of set.
func newFlow(t testing.TB, l *core.Locker, set func(c *Config[*req])) *Flow[*req] {
	t.Helper()
	var c Config[*req]
	if set != nil {
		set(&c)
	}
	f, err := NewFlow("test", l, byHeader, &c, testProtocol)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// lock runs f.Lock for name with ctx and returns the lease or the error of
// the failure.
func lock(f *Flow[*req], ctx context.Context, x *req, name string) (*core.Lease, error) {
	lease, ok := f.Lock(ctx, x, src{route: "/orders/:id", header: name})
	if !ok {
		return nil, x.failure.Err
	}
	return lease, nil
}

func TestClassify(t *testing.T) {
	for err, want := range map[error]core.Outcome{
		keyfunc.ErrMissing: core.OutcomeBadRequest, keyfunc.ErrUnreadable: core.OutcomeBadRequest, core.ErrTimeout: core.OutcomeBusy,
		core.ErrStorage: core.OutcomeUnavailable, context.Canceled: core.OutcomeCanceled, context.DeadlineExceeded: core.OutcomeDeadline,
		keyfunc.ErrUnsupported: core.OutcomeError, core.ErrInvalidOption: core.OutcomeInvalid,
	} {
		if got := Classify(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 30 * time.Second: 30} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("%v: %d, want %d", d, got, want)
		}
	}
}

// TestNewFlowListsEveryProblem: one error, prefixed with the adapter's
// name, lists every problem and wraps core.ErrInvalidOption and the
// Locker's own error.
func TestNewFlowListsEveryProblem(t *testing.T) {
	var c Config[*req]
	c.SetTTL(-1)
	c.SetTTL(time.Microsecond)
	c.SetWait(-1)
	c.SetRetryAfter(-1)
	c.SetMaxBody(0)
	c.SetSkip(nil)
	c.SetTTLFunc(nil)
	c.SetErrorHandler(nil)
	c.SetBusyHandler(nil)
	c.SetFailOpenHook(nil)
	Apply(&c, &c, []func(*Config[*req]){nil})
	_, err := NewFlow("x", nil, nil, &c, testProtocol)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "x: ") {
		t.Fatalf("%v: does not wrap ErrInvalidOption or lacks the prefix", err)
	}
	for _, want := range []string{"Locker is nil", "key Func is nil", "WithTTL(-1ns)", "WithTTL(1µs)", "WithWait(-1ns)",
		"WithRetryAfter(-1ns)", "WithMaxBody(0)", "WithSkip", "WithTTLFunc", "WithErrorHandler", "WithBusyHandler",
		"WithFailOpenHook", "option 0 is nil"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}

	bad := core.New(nil)
	_, err = NewFlow("x", bad, byHeader, &Config[*req]{}, testProtocol)
	if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), "the Locker is unusable") || !errors.Is(err, bad.Err()) {
		t.Fatalf("a Locker with an error: %v", err)
	}
	defer func() {
		if p, ok := recover().(error); !ok || p.Error() != err.Error() {
			t.Fatalf("Must panicked with %v, want %v", p, err)
		}
	}()
	Must(NewFlow("x", bad, byHeader, &Config[*req]{}, testProtocol))
	t.Fatal("Must did not panic")
}

// A Redis that accepts connections and never replies is unavailable, not
// busy, even when the per-route wait is shorter than the I/O timeout: the
// wait bounds waiting for another holder, not a Redis call in flight.
func TestStalledRedisIsUnavailableNotBusy(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	f := newFlow(t, l, func(c *Config[*req]) { c.SetWait(20 * time.Millisecond) })
	x := &req{}
	_, err := lock(f, context.Background(), x, "order:1")
	if !errors.Is(err, core.ErrStorage) || x.failure.Outcome != core.OutcomeUnavailable || x.failure.Status != http.StatusServiceUnavailable {
		t.Fatalf("got %v (%+v), want a storage error", err, x.failure)
	}
}

// Fail-open serves the request unlocked when the store is unavailable, tells
// the hook and the Protocol's Note.
func TestFailOpen(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(100*time.Millisecond))
	var hooked error
	f := newFlow(t, l, func(c *Config[*req]) { c.SetFailOpenHook(func(_ *req, err error) { hooked = err }) })
	x := &req{}
	var served bool
	f.Serve(context.Background(), x, src{header: "order:1"}, func(ctx context.Context) { served = core.LeaseFromContext(ctx) == nil })
	if !served || !errors.Is(hooked, core.ErrStorage) || len(x.noted) != 1 || x.failure != nil {
		t.Fatalf("served unlocked: %v, hook %v, noted %v, failure %v", served, hooked, x.noted, x.failure)
	}
}

// acquireWhileHeld holds name with another Locker, starts f.Lock of name
// with ctx on e's Locker, releases the hold once that Lock has made three
// attempts (more than a budget of 1 ms allows), and returns its result.
func acquireWhileHeld(t *testing.T, e *adaptertest.Env, ctx context.Context, f *Flow[*req], name string) (*core.Lease, error) {
	t.Helper()
	holder := adaptertest.NewEnv(t, nil).Hold(t, name)
	type result struct {
		lease *core.Lease
		err   error
	}
	done := make(chan result, 1)
	e.RT.N.Store(0)
	go func() {
		lease, err := lock(f, ctx, &req{}, name)
		done <- result{lease, err}
	}()
	deadline := time.After(10 * time.Second)
	for e.RT.N.Load() < 3 {
		select {
		case r := <-done: // gave up before its third attempt
			return r.lease, r.err
		case <-deadline:
			t.Fatal("no third attempt within 10 s")
		case <-time.After(time.Millisecond):
		}
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.lease != nil {
		t.Cleanup(func() { _ = r.lease.Release(context.Background()) })
	}
	return r.lease, r.err
}

// A per-route wait longer than the Locker's is honoured: the request waits
// past the Locker's budget and gets the name once it is released.
func TestRouteWaitMayExceedLockers(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Millisecond), core.WithSpin(time.Millisecond, time.Millisecond))
	long := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetWait(10 * time.Second) })
	if _, err := acquireWhileHeld(t, e, context.Background(), long, adaptertest.Uniq(t)); err != nil {
		t.Fatalf("with a per-route wait of 10 s: %v", err)
	}
	// The control: without it, the Locker's budget of 1 ms gives up.
	if _, err := acquireWhileHeld(t, e, context.Background(), newFlow(t, e.Locker, nil), adaptertest.Uniq(t)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("with the Locker's wait of 1 ms: %v, want ErrTimeout", err)
	}
}

// A wait set on the request's context by an earlier middleware
// (core.ContextWithWait) overrides the per-route one.
func TestContextWaitOverridesRouteWait(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithSpin(time.Millisecond, time.Millisecond))
	ctx := core.ContextWithWait(context.Background(), 10*time.Second)
	short := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetWait(time.Millisecond) })
	if _, err := acquireWhileHeld(t, e, ctx, short, adaptertest.Uniq(t)); err != nil {
		t.Fatalf("context wait 10 s, route wait 1 ms: %v", err)
	}
}

// TTL precedence: the adapter's TTL function, then core.ContextWithTTL on the
// request, then the per-route TTL, then the Locker's.
func TestTTLPrecedence(t *testing.T) {
	e := adaptertest.NewEnv(t, nil, core.WithTTL(10*time.Second))
	withTTL := core.ContextWithTTL(context.Background(), time.Hour)
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		route    time.Duration
		fn       time.Duration
		min, max time.Duration
	}{
		{"Locker's", context.Background(), 0, 0, 5 * time.Second, 10 * time.Second},
		{"per-route", context.Background(), time.Minute, 0, 55 * time.Second, time.Minute},
		{"context over per-route", withTTL, time.Minute, 0, 59 * time.Minute, time.Hour},
		{"function over context", withTTL, time.Minute, 2 * time.Hour, 119 * time.Minute, 2 * time.Hour},
	} {
		f := newFlow(t, e.Locker, func(c *Config[*req]) {
			c.SetTTL(tc.route)
			c.SetTTLFunc(func(x *req) time.Duration { return x.ttl })
		})
		lease, err := lock(f, tc.ctx, &req{ttl: tc.fn}, adaptertest.Uniq(t))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pttl := e.Client.PTTL(context.Background(), lease.Key()).Val()
		_ = lease.Release(context.Background())
		if pttl < tc.min || pttl > tc.max {
			t.Errorf("%s: PTTL %v, want in [%v, %v]", tc.name, pttl, tc.min, tc.max)
		}
	}
}

// pastDeadline has a deadline that has passed but does not end by itself, as
// a gRPC server's call context before the server cancels it at the deadline.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A context cancelled after its deadline passed is the deadline's doing:
// DeadlineExceeded, not Canceled; without a deadline it stays Canceled.
func TestCancelledAtDeadlineIsDeadline(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	f := newFlow(t, e.Locker, nil)
	for _, tc := range []struct {
		parent context.Context
		want   core.Outcome
	}{{pastDeadline{context.Background()}, core.OutcomeDeadline}, {context.Background(), core.OutcomeCanceled}} {
		ctx, cancel := context.WithCancel(tc.parent)
		cancel()
		x := &req{}
		if _, ok := f.Lock(ctx, x, src{header: adaptertest.Uniq(t)}); ok || x.failure.Outcome != tc.want {
			t.Errorf("parent %T: %+v, want outcome %v", tc.parent, x.failure, tc.want)
		}
	}
}

// A per-route wait of 0 is one attempt, not "unset": a held name is busy at
// once, although the Locker would wait.
func TestRouteWaitZeroIsOneAttempt(t *testing.T) {
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	name := adaptertest.Uniq(t)
	adaptertest.NewEnv(t, nil).Hold(t, name)
	x := &req{}
	f := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetWait(0); c.SetRetryAfter(2500 * time.Millisecond) })
	_, err := lock(f, context.Background(), x, name)
	if !errors.Is(err, core.ErrTimeout) || e.RT.N.Load() != 1 {
		t.Fatalf("%v after %d attempts, want ErrTimeout after 1", err, e.RT.N.Load())
	}
	if x.failure.Status != http.StatusConflict || x.failure.RetryAfter != "3" || strings.Contains(x.failure.Message, name) {
		t.Fatalf("busy answer: %+v", x.failure)
	}
}

// TestCustomHandlers: a busy handler takes a busy name, an error handler
// the rest, a gone client neither; the default answer is not written after
// them.
func TestCustomHandlers(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	name := adaptertest.Uniq(t)
	adaptertest.NewEnv(t, nil).Hold(t, name)
	var got []string
	f := newFlow(t, e.Locker, func(c *Config[*req]) {
		c.SetWait(0)
		c.SetBusyHandler(func(_ *req, err error) { got = append(got, "busy: "+Classify(err).String()) })
		c.SetErrorHandler(func(_ *req, err error) { got = append(got, "error: "+Classify(err).String()) })
	})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		ctx    context.Context
		header string
	}{{context.Background(), name}, {context.Background(), ""}, {gone, name}} {
		x := &req{}
		if _, ok := f.Lock(tc.ctx, x, src{header: tc.header}); ok {
			t.Fatalf("%q locked", tc.header)
		}
		if x.failure != nil && x.failure.Outcome != core.OutcomeCanceled {
			t.Errorf("default answer %+v written after a custom handler", x.failure)
		}
	}
	if want := "busy: busy|error: bad_request"; strings.Join(got, "|") != want {
		t.Fatalf("handlers saw %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestServeHoldsAndReleases: next runs with the lease on its context, and
// the lease is released after next, also when next panics; the context is
// cancelled with ErrLost when the lease is lost.
func TestServeHoldsAndReleases(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	f := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetTTL(50 * time.Millisecond) })
	name := adaptertest.Uniq(t)
	var cause error
	f.Serve(context.Background(), &req{}, src{header: name}, func(ctx context.Context) {
		<-ctx.Done()
		cause = context.Cause(ctx)
	})
	if !errors.Is(cause, ErrLost) || !errors.Is(cause, core.ErrNotHeld) {
		t.Fatalf("lost lease: cause %v", cause)
	}
	func() {
		defer func() { _ = recover() }()
		f.Serve(context.Background(), &req{}, src{header: name}, func(ctx context.Context) {
			if !e.Exists(t, name) || core.LeaseFromContext(ctx) == nil {
				t.Error("not held inside next")
			}
			panic("bug")
		})
	}()
	if e.Exists(t, name) {
		t.Fatal("held after a panic")
	}
}

// TestHoldSeesTheLossAtOnce: after a pause of the process (a GC pause, a
// stopped VM) past the lease's validity, the handler may look at its
// context before Watch's goroutine has run: its first look (Err, Done, or
// context.Cause) must already report the loss, with cause ErrLost. Hold on
// a lease whose validity has passed is that first look.
func TestHoldSeesTheLossAtOnce(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	bg := context.Background()
	looks := map[string]func(ctx context.Context) bool{
		"Err":   func(ctx context.Context) bool { return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrLost) },
		"Cause": func(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrLost) },
		"Done": func(ctx context.Context) bool {
			select {
			case <-ctx.Done():
				return errors.Is(context.Cause(ctx), ErrLost)
			default:
				return false
			}
		},
	}
	for look, lost := range looks {
		missed := 0
		for i := 0; i < 10; i++ {
			lease, err := e.Locker.Acquire(bg, adaptertest.Uniq(t), core.TTL(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(lease.ValidUntil()) + 2*time.Millisecond)
			ctx, stop := Hold(bg, lease)
			if !lost(ctx) {
				missed++
			}
			stop()
			_ = lease.Release(bg)
		}
		if missed > 0 {
			t.Errorf("%s: %d of 10 request contexts of a lease past its validity did not report the loss at the first look", look, missed)
		}
	}
}

// TestRouteOptions: every acquire is labelled with its own request's route,
// whether its core.Route option was made before (the Flow keeps one per
// label), made by a request of another label at the same time, or made for
// the request alone, past the maxRouteOptions labels the Flow keeps.
func TestRouteOptions(t *testing.T) {
	adaptertest.LeakCheck(t)
	var mu sync.Mutex
	var got []string // the label of every acquire
	e := adaptertest.NewEnv(t, nil, core.WithWait(0), core.WithHandlers(core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		mu.Lock()
		got = append(got, req.Route)
		mu.Unlock()
		_, err := next(ctx, req)
		return err
	}}))
	f := newFlow(t, e.Locker, nil)
	name := adaptertest.Uniq(t)
	const labels = maxRouteOptions + 44
	var wg sync.WaitGroup
	for g := range 4 { // four goroutines add labels to the Flow at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < labels; i += 4 {
				route := fmt.Sprintf("/r%d", i)
				for range 2 { // the label's option made, then kept (or made again)
					lease, ok := f.Lock(context.Background(), &req{}, src{route: route, header: name + route})
					if !ok || lease == nil {
						t.Errorf("%s: not locked", route)
						return
					}
					if err := lease.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, r := range got {
		count[r]++
	}
	for i := range labels {
		if r := fmt.Sprintf("/r%d", i); count[r] != 2 {
			t.Errorf("%s labelled %d acquires, want 2", r, count[r])
		}
	}
	if n := len(*f.routes.Load()); n != maxRouteOptions {
		t.Errorf("the Flow keeps %d route options, want %d", n, maxRouteOptions)
	}
}
