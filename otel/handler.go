package lockotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// ScopeName is the instrumentation scope of the Handler's tracer and meter.
const ScopeName = "github.com/reqlock/reqlock/otel"

// Span names.
const (
	SpanAcquire = "reqlock.acquire" // one per acquire the Locker reports to its Observers
	SpanRelease = "reqlock.release" // one per end of a lease whose acquire the Handler saw
)

// Handler traces and measures lock acquires and releases. It is a
// core.Observer: the Locker tells it of every acquire once it has ended,
// local wait and local hand-offs included, and of the end of every lease it
// saw acquired, wherever it stands among the options. Give it to
// core.WithObservers, or to core.WithHandlers, which puts it in the same
// slot. It is safe for concurrent use. Its per-lease state lives in the
// core.LeaseObserver it returns for each lease; its only state of its own is
// a bounded cache of the attribute sets of each route and outcome.
type Handler struct {
	tracer trace.Tracer
	ins    instruments
	cache  attrCache

	closeOnce sync.Once
	reg       metric.Registration // of WithGuard's callback, or nil
}

var (
	_ core.Observer      = (*Handler)(nil)
	_ core.StartObserver = (*Handler)(nil)
	_ core.Handler       = (*Handler)(nil)
)

// New returns a Handler that takes its tracer and meter, named ScopeName with
// the instrumentation version Version(), from the providers of
// WithTracerProvider and WithMeterProvider, or from the global ones.
// Instruments a provider refuses are reported to otel.Handle and left out;
// New never fails.
func New(opts ...Option) *Handler {
	var cfg config
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	version := Version()
	meter := cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	tracer := cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	h := &Handler{tracer: tracer, ins: newInstruments(meter)}
	if g, ok := cfg.guard.(*hotspot.Guard); cfg.guard != nil && (!ok || g != nil) {
		reg, err := observeGuard(meter, cfg.guard)
		if err != nil {
			otel.Handle(err)
		}
		h.reg = reg
	}
	return h
}

// Close stops observing the guard of WithGuard, so that the meter provider
// no longer calls it. Spans and other metrics are unaffected. Close is
// idempotent.
func (h *Handler) Close() error {
	var err error
	h.closeOnce.Do(func() {
		if h.reg != nil {
			err = h.reg.Unregister()
		}
	})
	return err
}

// ObserveStart counts an Acquire that begins as pending
// (reqlock.acquire.pending), until ObserveAcquire.
func (h *Handler) ObserveStart(ctx context.Context, e core.StartEvent) {
	h.ins.pending.Add(ctx, 1, h.cache.get(e.Route, e.Mode, 0, "", "").add...)
}

// ObserveAcquire records an acquire that has ended: a reqlock.acquire span, a
// child of the span in ctx, from the call of Locker.Acquire (e.Start) to its
// return (e.End), and the acquire metrics. For an acquired lock it counts
// the lease as held and returns the state its release needs.
func (h *Handler) ObserveAcquire(ctx context.Context, e core.AcquireEvent) core.LeaseObserver {
	r := describeAcquire(e.Outcome)
	route := h.cache.get(e.Route, e.Mode, e.Permits, "", "")
	wait := e.End.Sub(e.Start).Seconds()
	_, span := h.tracer.Start(ctx, SpanAcquire,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(e.Start),
		route.span)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 7)
		kv = append(kv, OutcomeKey.String(r.outcome), AttemptsKey.Int(e.Attempts), WaitKey.Float64(wait))
		if e.Mode == core.ModePermits && e.Lease != nil {
			kv = append(kv, SlotKey.Int(e.Lease.Slot()))
		}
		if e.LocalWait > 0 {
			kv = append(kv, LocalWaitKey.Float64(e.LocalWait.Seconds()))
		}
		if e.HandedOver {
			kv = append(kv, HandedOffKey.Bool(true))
		}
		setResult(span, kv, r)
	}
	span.End(trace.WithTimestamp(e.End))

	result := h.cache.get(e.Route, e.Mode, e.Permits, r.outcome, r.errType)
	// pending was counted without permits, which the start does not tell.
	h.ins.pending.Add(ctx, -1, h.cache.get(e.Route, e.Mode, 0, "", "").add...)
	h.ins.acquireDuration.Record(ctx, wait, result.record...)
	h.ins.attempts.Add(ctx, int64(e.Attempts), result.add...)
	h.ins.acquires.Add(ctx, 1, result.add...)
	if e.Lease == nil {
		return nil
	}
	h.ins.held.Add(ctx, 1, route.add...)
	l := &leaseSpan{h: h, acquired: e.End, route: e.Route, mode: e.Mode, permits: e.Permits, attrs: route, span: span.SpanContext()}
	if e.Mode == core.ModePermits {
		l.slot = e.Lease.Slot()
	}
	return l
}

// leaseSpan is what the Handler keeps of a lease between its acquire and its
// end.
type leaseSpan struct {
	h        *Handler
	acquired time.Time
	route    string
	mode     core.Mode
	permits  int
	slot     int    // with mode permits
	attrs    *attrs // of the route and mode alone
	span     trace.SpanContext
}

// ObserveRelease records the end of the lease: a reqlock.release span, a
// child of the span in ctx (the context given to Release) linked to the
// lease's reqlock.acquire span, from the call of Release to its return, the
// hold time, and one lease less held. A lease that lost its lock before its
// release (core.Outcome.Lost) is recorded as lost even when the release then
// found its key and deleted it; a lease handed to a local waiter is
// released, with reqlock.handed_off=true on the span.
func (l *leaseSpan) ObserveRelease(ctx context.Context, e core.ReleaseEvent) {
	h := l.h
	r := describe(e.Outcome)
	hold := e.End.Sub(l.acquired).Seconds()
	link := trace.WithLinks() // none when the acquire span was not sampled
	if l.span.IsValid() {
		link = trace.WithLinks(trace.Link{SpanContext: l.span})
	}
	_, span := h.tracer.Start(ctx, SpanRelease,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(e.Start),
		l.attrs.span,
		link)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv, OutcomeKey.String(r.outcome), HoldKey.Float64(hold))
		if l.mode == core.ModePermits {
			kv = append(kv, SlotKey.Int(l.slot))
		}
		if e.Outcome == core.OutcomeHandedOff {
			kv = append(kv, HandedOffKey.Bool(true))
		}
		setResult(span, kv, r)
	}
	span.End(trace.WithTimestamp(e.End))

	h.ins.holdDuration.Record(ctx, hold, h.cache.get(l.route, l.mode, l.permits, r.outcome, r.errType).record...)
	h.ins.held.Add(ctx, -1, l.attrs.add...)
}

// setResult sets the attributes kv on span, and marks it as failed when r is
// a failure, following the contrib rules: the error.type attribute, and
// status Error with a description. The description is the kind of the
// error, never its text (which names the lock); no exception event is
// recorded for the same reason.
func setResult(span trace.Span, kv []attribute.KeyValue, r result) {
	if r.errType != "" {
		kv = append(kv, ErrorTypeKey.String(r.errType))
		span.SetStatus(codes.Error, r.status)
	}
	span.SetAttributes(kv...)
}

// Acquire calls next and returns its error. core.WithHandlers puts a Handler
// in the Locker's observer slot, where the Locker calls ObserveAcquire; this
// method and Release only make the Handler a core.Handler, so that it can be
// given to core.WithHandlers.
func (h *Handler) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	_, err := next(ctx, req)
	return err
}

// Release calls next: see Acquire.
func (h *Handler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	return next(ctx, lease)
}
