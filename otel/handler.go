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
)

// ScopeName is the instrumentation scope of the Handler's tracer and meter.
const ScopeName = "github.com/reqlock/reqlock/otel"

// Span names.
const (
	SpanAcquire = "reqlock.acquire" // one per acquire that reaches the handler
	SpanRelease = "reqlock.release" // one per release of a lease the handler saw acquired
)

// Handler traces and measures lock acquires and releases. It is a
// core.Handler: give it to core.WithHandlers, first, so that it sees the
// whole acquire, local wait included. It is safe for concurrent use. It keeps
// per-lease state on the Lease; its only state of its own is a bounded cache
// of the attribute sets of each route and outcome.
type Handler struct {
	tracer trace.Tracer
	ins    instruments
	cache  attrCache

	closeOnce sync.Once
	reg       metric.Registration // of WithGuard's callback, or nil
}

// New returns a Handler that takes its tracer and meter, named ScopeName,
// from the providers of WithTracerProvider and WithMeterProvider, or from the
// global ones. Instruments a provider refuses are reported to otel.Handle and
// left out; New never fails.
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
	meter := cfg.mp.Meter(ScopeName)
	h := &Handler{tracer: cfg.tp.Tracer(ScopeName), ins: newInstruments(meter)}
	if cfg.guard != nil {
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

// leaseState is what the Handler keeps on a Lease between its acquire and
// its release, under the Handler itself as the key.
type leaseState struct {
	acquired time.Time
	route    string
	attrs    *attrs // of the route alone
	span     trace.SpanContext
}

// Acquire runs next inside a reqlock.acquire span, a child of the span in
// ctx, and records the acquire metrics.
func (h *Handler) Acquire(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
	route := h.cache.get(req.Route, "", "")
	ctx, span := h.tracer.Start(ctx, SpanAcquire,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(req.Start),
		route.span)
	lease, err := next(ctx, req)
	end := time.Now()
	wait := end.Sub(req.Start).Seconds()
	outcome, errType := acquireOutcome(err)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv, OutcomeKey.String(outcome), AttemptsKey.Int(req.Attempts), WaitKey.Float64(wait))
		if req.LocalWait > 0 {
			kv = append(kv, LocalWaitKey.Float64(req.LocalWait.Seconds()))
		}
		setResult(span, kv, errType)
	}
	span.End(trace.WithTimestamp(end))

	result := h.cache.get(req.Route, outcome, errType)
	h.ins.acquireDuration.Record(ctx, wait, result.record...)
	h.ins.attempts.Add(ctx, int64(req.Attempts), result.add...)
	h.ins.acquires.Add(ctx, 1, result.add...)
	if err == nil && lease != nil {
		h.ins.held.Add(ctx, 1, route.add...)
		lease.SetValue(h, &leaseState{acquired: end, route: req.Route, attrs: route, span: span.SpanContext()})
	}
	return lease, err
}

// Release runs next inside a reqlock.release span, a child of the span in
// ctx and linked to the lease's reqlock.acquire span, and records the hold
// time. A lease the Handler did not see acquired passes through untouched.
func (h *Handler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	st, _ := lease.Value(h).(*leaseState)
	if st == nil {
		return next(ctx, lease)
	}
	start := time.Now()
	validUntil := lease.ValidUntil()
	link := trace.WithLinks() // none when the acquire span was not sampled
	if st.span.IsValid() {
		link = trace.WithLinks(trace.Link{SpanContext: st.span})
	}
	ctx, span := h.tracer.Start(ctx, SpanRelease,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		st.attrs.span,
		link)
	err := next(ctx, lease)
	end := time.Now()
	hold := end.Sub(st.acquired).Seconds()
	outcome, errType := releaseOutcome(err, start, validUntil)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 3)
		kv = append(kv, OutcomeKey.String(outcome), HoldKey.Float64(hold))
		setResult(span, kv, errType)
	}
	span.End(trace.WithTimestamp(end))

	h.ins.holdDuration.Record(ctx, hold, h.cache.get(st.route, outcome, errType).record...)
	h.ins.held.Add(ctx, -1, st.attrs.add...)
	return err
}

// setResult sets the attributes kv on span, and marks it as failed when
// errType is not empty, following the contrib rules: the error.type
// attribute, and status Error with a description. The description is the kind
// of the error, never its text (which names the lock); no exception event is
// recorded for the same reason.
func setResult(span trace.Span, kv []attribute.KeyValue, errType string) {
	if errType != "" {
		kv = append(kv, ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, statusText(errType))
	}
	span.SetAttributes(kv...)
}
