package lockotel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	lockotel "github.com/reqlock/reqlock/otel"
)

const route = "/orders/:id"

// request starts a server span standing for the request that takes the lock,
// on a context labelled with route as the adapters label it.
func (e *env) request(ctx context.Context) (context.Context, trace.Span) {
	ctx = core.ContextWithRoute(ctx, route)
	return e.tp.Tracer("test").Start(ctx, "GET /orders/:id", trace.WithSpanKind(trace.SpanKindServer))
}

// holdElsewhere takes name with a Locker without handlers, as another
// instance of the service would, until the test ends.
func holdElsewhere(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	if srv == nil {
		srv = adaptertest.Shared
	}
	lease, err := core.New(srv.Client(t)).Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
}

// one returns the only span called name, failing the test if there is not
// exactly one.
func one(t *testing.T, e *env, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := e.ended(name)
	if len(spans) != 1 {
		t.Fatalf("%d %s spans ended, want 1", len(spans), name)
	}
	return spans[0]
}

// checkAcquireSpan checks what every acquire span must have: its name and
// kind, its parent, the route, the outcome, the error type and status, and
// attempts and wait.
func checkAcquireSpan(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.Span, outcome, errType string) {
	t.Helper()
	if s.SpanKind() != trace.SpanKindInternal {
		t.Errorf("kind = %v, want internal", s.SpanKind())
	}
	if got, want := s.Parent().SpanID(), parent.SpanContext().SpanID(); got != want {
		t.Errorf("parent = %v, want the request span %v", got, want)
	}
	if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Error("the acquire span is not in the request's trace")
	}
	if sc := s.InstrumentationScope(); sc.Name != lockotel.ScopeName || sc.Version != lockotel.Version() || sc.Version == "" {
		t.Errorf("scope = %q version %q, want %q version %q", sc.Name, sc.Version, lockotel.ScopeName, lockotel.Version())
	}
	if v, _ := attr(s, lockotel.RouteKey); v.AsString() != route {
		t.Errorf("route = %q, want %q", v.AsString(), route)
	}
	if v, _ := attr(s, lockotel.OutcomeKey); v.AsString() != outcome {
		t.Errorf("outcome = %q, want %q", v.AsString(), outcome)
	}
	if v, ok := attr(s, lockotel.AttemptsKey); !ok || v.AsInt64() < 1 {
		t.Errorf("attempts = %v (set %v), want at least 1", v.AsInt64(), ok)
	}
	wait, ok := attr(s, lockotel.WaitKey)
	if dur := s.EndTime().Sub(s.StartTime()).Seconds(); !ok || wait.AsFloat64() <= 0 || wait.AsFloat64() != dur {
		t.Errorf("wait = %v (set %v), want the span's duration %v", wait.AsFloat64(), ok, dur)
	}
	checkError(t, s, errType)
}

// checkError checks a span's error.type and status.
func checkError(t *testing.T, s sdktrace.ReadOnlySpan, errType string) {
	t.Helper()
	v, ok := attr(s, lockotel.ErrorTypeKey)
	if errType == "" {
		if ok {
			t.Errorf("error.type = %q on a success", v.AsString())
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("status = %v on a success, want unset", s.Status())
		}
		return
	}
	if v.AsString() != errType {
		t.Errorf("error.type = %q, want %q", v.AsString(), errType)
	}
	if s.Status().Code != codes.Error || s.Status().Description == "" {
		t.Errorf("status = %+v, want Error with a description", s.Status())
	}
}

func TestAcquireAndRelease(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil)
	name := uniq(t)
	ctx, req := e.request(context.Background())

	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	acq := one(t, e, lockotel.SpanAcquire)
	checkAcquireSpan(t, acq, req, lockotel.OutcomeAcquired, "")
	if v, _ := attr(acq, lockotel.AttemptsKey); v.AsInt64() != 1 {
		t.Errorf("attempts = %d, want 1 on a free name", v.AsInt64())
	}
	if _, ok := attr(acq, lockotel.LocalWaitKey); ok {
		t.Error("local wait set without a local lock in the chain")
	}
	rm := e.collect(t)
	if n := sum(t, rm, lockotel.MetricLeasesHeld, lockotel.RouteKey.String(route)); n != 1 {
		t.Errorf("leases held = %d while holding, want 1", n)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration); n != 0 {
		t.Errorf("hold durations = %d before the release, want 0", n)
	}

	time.Sleep(5 * time.Millisecond)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	req.End()

	rel := one(t, e, lockotel.SpanRelease)
	if rel.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("the release span is not a child of the request span")
	}
	if links := rel.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != acq.SpanContext().SpanID() {
		t.Errorf("release links = %v, want the acquire span", links)
	}
	if v, _ := attr(rel, lockotel.OutcomeKey); v.AsString() != lockotel.OutcomeReleased {
		t.Errorf("release outcome = %q, want released", v.AsString())
	}
	if v, _ := attr(rel, lockotel.RouteKey); v.AsString() != route {
		t.Errorf("release route = %q, want %q", v.AsString(), route)
	}
	if v, _ := attr(rel, lockotel.HoldKey); v.AsFloat64() < 0.005 {
		t.Errorf("hold = %vs, want at least the 5ms slept", v.AsFloat64())
	}
	if !rel.StartTime().After(acq.EndTime()) && !rel.StartTime().Equal(acq.EndTime()) {
		t.Error("the release span starts before the acquire span ends")
	}
	checkError(t, rel, "")

	rm = e.collect(t)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockotel.ScopeName || sm.Scope.Version != lockotel.Version() {
			t.Errorf("metrics scope = %q version %q, want %q version %q", sm.Scope.Name, sm.Scope.Version, lockotel.ScopeName, lockotel.Version())
		}
	}
	acquired := []attribute.KeyValue{lockotel.RouteKey.String(route), lockotel.OutcomeKey.String(lockotel.OutcomeAcquired)}
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, acquired...); n != 1 {
		t.Errorf("acquire durations = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricAcquires, acquired...); n != 1 {
		t.Errorf("acquires = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricAttempts, acquired...); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.RouteKey.String(route), lockotel.OutcomeKey.String(lockotel.OutcomeReleased)); n != 1 {
		t.Errorf("hold durations = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d after the release, want 0", n)
	}
	for name, want := range map[string][2]float64{
		lockotel.MetricAcquireDuration: {0.0005, 10},
		lockotel.MetricHoldDuration:    {0.001, 60},
	} {
		m, _ := find(rm, name)
		if h, ok := m.Data.(metricdata.Histogram[float64]); !ok || len(h.DataPoints) == 0 {
			t.Errorf("%s: no histogram data", name)
		} else if b := h.DataPoints[0].Bounds; len(b) < 10 || b[0] != want[0] || b[len(b)-1] != want[1] {
			t.Errorf("%s buckets = %v, want from %v to %v", name, b, want[0], want[1])
		}
	}
	e.noName(t, name, lease.Key())
}

func TestTimeout(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil, core.WithWait(60*time.Millisecond), core.WithSpin(5*time.Millisecond, 5*time.Millisecond))
	name := uniq(t)
	holdElsewhere(t, nil, name)
	ctx, req := e.request(context.Background())

	_, err := e.locker.Acquire(ctx, name)
	if !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	req.End()
	s := one(t, e, lockotel.SpanAcquire)
	checkAcquireSpan(t, s, req, lockotel.OutcomeTimeout, lockotel.ErrorTypeTimeout)
	attempts, _ := attr(s, lockotel.AttemptsKey)
	if attempts.AsInt64() < 1 { // usually several, but one slow round trip may spend the budget
		t.Errorf("attempts = %d, want at least one", attempts.AsInt64())
	}
	if w, _ := attr(s, lockotel.WaitKey); w.AsFloat64() < 0.06 {
		t.Errorf("wait = %vs, want at least the 60ms budget", w.AsFloat64())
	}
	rm := e.collect(t)
	timeout := []attribute.KeyValue{lockotel.OutcomeKey.String(lockotel.OutcomeTimeout), lockotel.ErrorTypeKey.String(lockotel.ErrorTypeTimeout)}
	if n := sum(t, rm, lockotel.MetricAttempts, timeout...); n != attempts.AsInt64() {
		t.Errorf("attempts counter = %d, want the span's %d", n, attempts.AsInt64())
	}
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, timeout...); n != 1 {
		t.Errorf("acquire durations = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d after a timeout, want 0", n)
	}
	if n := len(e.ended(lockotel.SpanRelease)); n != 0 {
		t.Errorf("%d release spans without a lease", n)
	}
	e.noName(t, name)
}

// TestCanceled covers an acquire whose caller gives up while another holder
// keeps the name: by cancelling, or by a deadline before the wait budget's.
func TestCanceled(t *testing.T) {
	for _, c := range []struct {
		name    string
		end     func(context.Context) (context.Context, context.CancelFunc)
		want    error
		errType string
	}{
		{"cancel", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			stop := time.AfterFunc(30*time.Millisecond, cancel)
			return ctx, func() { stop.Stop(); cancel() }
		}, context.Canceled, lockotel.ErrorTypeCanceled},
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 40*time.Millisecond)
		}, context.DeadlineExceeded, lockotel.ErrorTypeDeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			e := newEnv(t, nil, nil, core.WithWait(10*time.Second))
			name := uniq(t)
			holdElsewhere(t, nil, name)
			ctx, req := e.request(context.Background())
			ctx, cancel := c.end(ctx)
			defer cancel()

			if _, err := e.locker.Acquire(ctx, name); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			req.End()
			checkAcquireSpan(t, one(t, e, lockotel.SpanAcquire), req, lockotel.OutcomeCanceled, c.errType)
			rm := e.collect(t)
			if n := sum(t, rm, lockotel.MetricAcquires, lockotel.OutcomeKey.String(lockotel.OutcomeCanceled), lockotel.ErrorTypeKey.String(c.errType)); n != 1 {
				t.Errorf("canceled acquires = %d, want 1", n)
			}
			e.noName(t, name)
		})
	}
}

// outageClient returns a client of srv that fails at once when the server is
// down: no command retries, one dial attempt.
func outageClient(t *testing.T, srv *redistest.Server) *redis.Client {
	opts := srv.Options()
	opts.MaxRetries, opts.DialerRetries = -1, 1
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedisDown(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	e := newEnv(t, srv, nil)
	e.locker = core.New(outageClient(t, srv), core.WithHandlers(e.handler))
	name := uniq(t)
	ctx, req := e.request(context.Background())

	// A lease whose release meets the outage.
	lease, err := e.locker.Acquire(ctx, name+"/held")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	_, err = e.locker.Acquire(ctx, name)
	if !errors.Is(err, core.ErrStorage) {
		t.Fatalf("err = %v, want ErrStorage", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, core.ErrStorage) {
		t.Fatalf("release err = %v, want ErrStorage", err)
	}
	req.End()

	spans := e.ended(lockotel.SpanAcquire)
	if len(spans) != 2 {
		t.Fatalf("%d acquire spans, want 2", len(spans))
	}
	checkAcquireSpan(t, spans[0], req, lockotel.OutcomeAcquired, "")
	checkAcquireSpan(t, spans[1], req, lockotel.OutcomeError, lockotel.ErrorTypeStorage)
	if d := spans[1].Status().Description; d != core.ErrStorage.Error() {
		t.Errorf("status description = %q, want the kind of error %q", d, core.ErrStorage.Error())
	}
	rel := one(t, e, lockotel.SpanRelease)
	if v, _ := attr(rel, lockotel.OutcomeKey); v.AsString() != lockotel.OutcomeError {
		t.Errorf("release outcome = %q, want error", v.AsString())
	}
	checkError(t, rel, lockotel.ErrorTypeStorage)

	rm := e.collect(t)
	failed := []attribute.KeyValue{lockotel.OutcomeKey.String(lockotel.OutcomeError), lockotel.ErrorTypeKey.String(lockotel.ErrorTypeStorage)}
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, failed...); n != 1 {
		t.Errorf("failed acquire durations = %d, want 1", n)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration, failed...); n != 1 {
		t.Errorf("failed release hold durations = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d after the release, want 0", n)
	}
	e.noName(t, name, name+"/held")
}

func TestLostLease(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil, core.WithTTL(30*time.Millisecond))
	name := uniq(t)
	ctx, req := e.request(context.Background())
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done() // the TTL runs out
	time.Sleep(20 * time.Millisecond)
	gone(t, e.client, lease.Key())
	if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("release err = %v, want ErrNotHeld", err)
	}
	req.End()
	rel := one(t, e, lockotel.SpanRelease)
	if v, _ := attr(rel, lockotel.OutcomeKey); v.AsString() != lockotel.OutcomeLost {
		t.Errorf("release outcome = %q, want lost", v.AsString())
	}
	checkError(t, rel, lockotel.ErrorTypeExpired)
	if v, _ := attr(rel, lockotel.HoldKey); v.AsFloat64() < 0.02 {
		t.Errorf("hold = %vs, want at least the 20ms slept after the TTL ran out", v.AsFloat64())
	}
	rm := e.collect(t)
	if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.OutcomeKey.String(lockotel.OutcomeLost)); n != 1 {
		t.Errorf("lost hold durations = %d, want 1", n)
	}
	e.noName(t, name, lease.Key())
}

// gone waits until key has expired in Redis: on a loaded machine the SET may
// have reached Redis well after the Locker sent it, so that the key outlives
// the lease's validity by that much.
func gone(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Exists(context.Background(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", key)
		}
		time.Sleep(time.Millisecond)
	}
}

// panicky is a Handler that panics with boom in Acquire (after next took
// the lock) or in Release (before next) while its switches are on; it stands
// for a user's Handler that panics, wherever the observers stand.
type panicky struct{ acquire, release atomic.Bool }

// boom is the panic value of panicky.
const boom = "boom"

func (p *panicky) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	_, err := next(ctx, req)
	if p.acquire.Load() {
		panic(boom)
	}
	return err
}

func (p *panicky) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	if p.release.Load() {
		panic(boom)
	}
	return next(ctx, lease)
}

// mustPanic calls f and fails the test unless f panics with boom: a handler
// records a panic, it does not swallow or replace it.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != boom {
			t.Errorf("recovered %v, want the chain's own panic %q", r, boom)
		}
	}()
	f()
}

// A panic in a Handler is recorded as a failure of type _OTHER (spans and
// metrics), and leaves leases.held where it was: a lock taken before a panic
// in Acquire is released by core, and a lease whose release panicked is
// ended by core, so neither stays counted. The panic goes on.
func TestPanicInTheChain(t *testing.T) {
	adaptertest.LeakCheck(t)
	p := &panicky{}
	e := newEnv(t, nil, []core.Handler{p}, core.WithWait(0)) // the second acquire fails unless the first one's lock was released
	ctx, req := e.request(context.Background())
	name := uniq(t)

	p.acquire.Store(true)
	mustPanic(t, func() { _, _ = e.locker.Acquire(ctx, name) })
	p.acquire.Store(false)
	acq := one(t, e, lockotel.SpanAcquire) // ended
	if acq.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("the acquire span is not the request span's child")
	}
	if v, _ := attr(acq, lockotel.OutcomeKey); v.AsString() != lockotel.OutcomeError {
		t.Errorf("outcome of the panicked acquire = %q, want error", v.AsString())
	}
	checkError(t, acq, lockotel.ErrorTypeOther)

	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p.release.Store(true)
	mustPanic(t, func() { _ = lease.Release(ctx) })
	p.release.Store(false)
	_ = lease.Release(ctx) // idempotent: runs no handler again
	rel := one(t, e, lockotel.SpanRelease)
	if v, _ := attr(rel, lockotel.OutcomeKey); v.AsString() != lockotel.OutcomeError {
		t.Errorf("release outcome = %q, want error", v.AsString())
	}
	checkError(t, rel, lockotel.ErrorTypeOther)
	req.End()

	if n := len(e.ended(lockotel.SpanAcquire)); n != 2 {
		t.Errorf("%d acquire spans ended for 2 acquires", n)
	}
	rm := e.collect(t)
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, lockotel.ErrorTypeKey.String(lockotel.ErrorTypeOther)); n != 1 {
		t.Errorf("acquire durations of the panic = %d, want 1", n)
	}
	if n := histCount(t, rm, lockotel.MetricAcquireDuration); n != 2 {
		t.Errorf("acquire durations = %d for 2 acquires", n)
	}
	if n := sum(t, rm, lockotel.MetricAcquires, lockotel.OutcomeKey.String(lockotel.OutcomeError)); n != 1 {
		t.Errorf("failed acquires = %d, want 1", n)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.ErrorTypeKey.String(lockotel.ErrorTypeOther)); n != 1 {
		t.Errorf("hold durations of the panicked release = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d after the lease's release panicked, want 0", n)
	}
	e.noName(t, name, lease.Key())
}

// watchdogOutage acquires name through l, whose client goes through proxy,
// makes Redis unreachable until the lease's watchdog gives it up, and
// restores it. The lease is then lost (Done closed) although its ValidUntil
// has not passed and its key may still be in Redis.
func watchdogOutage(t *testing.T, l *core.Locker, proxy *redistest.Proxy, ctx context.Context, name string) *core.Lease {
	t.Helper()
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not give the lease up with Redis unreachable")
	}
	proxy.Restore()
	if !lease.Lost() || !time.Now().Before(lease.ValidUntil()) {
		t.Fatalf("Lost() = %v with ValidUntil in %v: want a lease lost before its validity ended", lease.Lost(), time.Until(lease.ValidUntil()))
	}
	return lease
}

// watchdogOptions are Locker options under which a lease's watchdog gives
// it up about 4 s after it was acquired or last renewed, 2 s before its TTL
// runs out in Redis: room enough, on a loaded machine, to check that the
// lease is lost while still valid and to release it while its key is still
// in Redis. The I/O timeout is long enough for the calls that must succeed,
// however slow the reply; a renewal into the black hole ends at the give-up
// time anyway.
func watchdogOptions(proxy *redistest.Proxy) (*redis.Options, []core.Option) {
	opts := adaptertest.Shared.Options()
	opts.Addr = proxy.Addr()
	return opts, []core.Option{core.WithTTL(6 * time.Second), core.WithWatchdog(),
		core.WithWatchdogInterval(2 * time.Second), core.WithIOTimeout(3 * time.Second)}
}

// A lease whose watchdog gave it up is lost, even when its release then finds
// its key and deletes it.
func TestLeaseGivenUpByItsWatchdog(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil)
	proxy := redistest.NewProxy(t, adaptertest.Shared.Addr())
	opts, lopts := watchdogOptions(proxy)
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	// Dial now, before the outage.
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	e.locker = core.New(c, append(lopts, core.WithHandlers(e.handler))...)
	ctx, req := e.request(context.Background())
	name := uniq(t)
	lease := watchdogOutage(t, e.locker, proxy, ctx, name)
	if err := lease.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) {
		t.Fatal(err)
	}
	req.End()
	rel := one(t, e, lockotel.SpanRelease)
	v, _ := attr(rel, lockotel.OutcomeKey)
	if v.AsString() != lockotel.OutcomeLost {
		t.Errorf("release outcome = %q, want lost", v.AsString())
	}
	et, _ := attr(rel, lockotel.ErrorTypeKey)
	if et.AsString() != lockotel.ErrorTypeRenewalFailed && et.AsString() != lockotel.ErrorTypeNotHeld {
		t.Errorf("error.type = %q, want renewal_failed (or not_held had the key expired)", et.AsString())
	}
	checkError(t, rel, et.AsString())
	rm := e.collect(t)
	if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.OutcomeKey.String(lockotel.OutcomeLost)); n != 1 {
		t.Errorf("lost hold durations = %d, want 1", n)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d after the release, want 0", n)
	}
	e.noName(t, name, lease.Key())
}

// TestHistogramCounts runs a mix of outcomes and checks that every acquire is
// counted once in the duration histogram and the outcome counter, and every
// release once in the hold histogram.
func TestHistogramCounts(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil, core.WithWait(20*time.Millisecond), core.WithSpin(5*time.Millisecond, 5*time.Millisecond))
	busy := uniq(t)
	holdElsewhere(t, nil, busy)
	const ok, timeouts = 7, 3
	var names []string
	for i := 0; i < ok; i++ {
		name := uniq(t)
		names = append(names, name)
		lease, err := e.locker.Acquire(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < timeouts; i++ {
		if _, err := e.locker.Acquire(context.Background(), busy); !errors.Is(err, core.ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
	}
	rm := e.collect(t)
	if n := histCount(t, rm, lockotel.MetricAcquireDuration); n != ok+timeouts {
		t.Errorf("acquire durations = %d, want %d", n, ok+timeouts)
	}
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, lockotel.OutcomeKey.String(lockotel.OutcomeTimeout)); n != timeouts {
		t.Errorf("timed-out acquire durations = %d, want %d", n, timeouts)
	}
	if n := sum(t, rm, lockotel.MetricAcquires); n != ok+timeouts {
		t.Errorf("acquires = %d, want %d", n, ok+timeouts)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration); n != ok {
		t.Errorf("hold durations = %d, want %d", n, ok)
	}
	var spanAttempts int64
	for _, s := range e.ended(lockotel.SpanAcquire) {
		v, _ := attr(s, lockotel.AttemptsKey)
		spanAttempts += v.AsInt64()
		if _, set := attr(s, lockotel.RouteKey); set {
			t.Error("route set on a context without one")
		}
	}
	if n := sum(t, rm, lockotel.MetricAttempts); n != spanAttempts {
		t.Errorf("attempts counter = %d, spans say %d", n, spanAttempts)
	}
	e.noName(t, append(names, busy)...)
}

// guard stands in for the hotspot Guard's counters.
type guard struct{ stats hotspot.Stats }

func (g guard) Stats() hotspot.Stats { return g.stats }

func TestGuardCounters(t *testing.T) {
	e := newEnv(t, nil, nil)
	h := lockotel.New(lockotel.WithMeterProvider(e.mp), lockotel.WithGuard(guard{hotspot.Stats{
		Hits: 12, Bypasses: 3, Evictions: 2, Handoffs: 5, Size: 7,
	}}))
	rm := e.collect(t)
	for name, want := range map[string]int64{
		lockotel.MetricHotspotHits:     12,
		lockotel.MetricHotspotBypasses: 3,
		lockotel.MetricHotspotEvicts:   2,
		lockotel.MetricHotspotHandoffs: 5,
		lockotel.MetricHotspotSize:     7,
	} {
		m, ok := find(rm, name)
		if !ok {
			t.Errorf("%s not reported", name)
			continue
		}
		s := m.Data.(metricdata.Sum[int64])
		if got := sum(t, rm, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
		if monotonic := name != lockotel.MetricHotspotSize; s.IsMonotonic != monotonic {
			t.Errorf("%s monotonic = %v, want %v", name, s.IsMonotonic, monotonic)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	rm = e.collect(t)
	if n := sum(t, rm, lockotel.MetricHotspotHits); n != 0 {
		t.Errorf("hits still observed after Close: %d", n)
	}
}

// A nil Guard, untyped or typed, reports nothing and does not panic at
// collection.
func TestGuardNil(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, g := range []lockotel.Guard{nil, (*hotspot.Guard)(nil)} {
		h := lockotel.New(lockotel.WithMeterProvider(e.mp), lockotel.WithGuard(g))
		rm := e.collect(t)
		if _, ok := find(rm, lockotel.MetricHotspotHits); ok {
			t.Errorf("WithGuard(%#v) reported the hotspot counters", g)
		}
		_ = h.Close()
	}
}

// TestConcurrent runs contending goroutines through one Handler (under -race)
// and checks that every acquire and release is counted once, that no lease
// stays counted as held, that a span's parent is its own goroutine's request,
// and that the handler does not break mutual exclusion.
func TestConcurrent(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, 2*time.Millisecond))
	name := uniq(t)
	const goroutines, rounds = 4, 10
	var o redistest.Overlap
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				ctx, req := e.request(context.Background())
				lease, err := e.locker.Acquire(ctx, name)
				if err != nil {
					t.Error(err)
					req.End()
					return
				}
				exit := o.Enter()
				e.client.Incr(ctx, "cs:"+name)
				exit()
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
				}
				req.End()
			}
		}()
	}
	wg.Wait()
	if o.Overlaps() != 0 || o.Entries() != goroutines*rounds {
		t.Fatalf("%d overlaps in %d critical sections", o.Overlaps(), o.Entries())
	}
	parents := map[trace.SpanID]int{}
	for _, s := range e.spans.Ended() {
		if s.Name() == lockotel.SpanAcquire || s.Name() == lockotel.SpanRelease {
			parents[s.Parent().SpanID()]++
		}
	}
	for _, s := range e.ended("GET /orders/:id") {
		if n := parents[s.SpanContext().SpanID()]; n != 2 {
			t.Errorf("request span has %d lock spans as children, want an acquire and a release", n)
		}
	}
	rm := e.collect(t)
	if n := histCount(t, rm, lockotel.MetricAcquireDuration, lockotel.OutcomeKey.String(lockotel.OutcomeAcquired)); n != goroutines*rounds {
		t.Errorf("acquire durations = %d, want %d", n, goroutines*rounds)
	}
	if n := histCount(t, rm, lockotel.MetricHoldDuration, lockotel.OutcomeKey.String(lockotel.OutcomeReleased)); n != goroutines*rounds {
		t.Errorf("hold durations = %d, want %d", n, goroutines*rounds)
	}
	if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
		t.Errorf("leases held = %d at the end, want 0", n)
	}
	e.noName(t, name)
}
