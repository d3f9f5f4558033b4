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
// core.Handler: give it to core.WithHandlers first, before a hotspot Guard,
// so that it sees the whole acquire, local wait included, and every release.
// After a Guard with local handoff (core.WithHandlers(guard, handler)) it
// misses the acquires served by a handoff and the releases that hand a lease
// off, and reqlock.leases.held drifts up by one per handoff: see the package
// documentation. It is safe for concurrent use. It keeps per-lease state on
// the Lease; its only state of its own is a bounded cache of the attribute
// sets of each route and outcome.
type Handler struct {
	tracer trace.Tracer
	ins    instruments
	cache  attrCache

	closeOnce sync.Once
	reg       metric.Registration // of WithGuard's callback, or nil
}

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
// ctx, and records the acquire metrics. Should next panic, the span ends
// with error.type _OTHER and status Error, the metrics record the failure,
// and the panic goes on up the stack.
func (h *Handler) Acquire(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
	route := h.cache.get(req.Route, "", "")
	ctx, span := h.tracer.Start(ctx, SpanAcquire,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(req.Start),
		route.span)
	returned := false
	defer func() {
		if !returned { // next panicked: record it, and let the panic go on
			h.acquired(ctx, span, req, route, nil, errPanicked)
		}
	}()
	lease, err := next(ctx, req)
	returned = true
	h.acquired(ctx, span, req, route, lease, err)
	return lease, err
}

// acquired ends the acquire span and records the acquire metrics of an
// acquire of req that returned lease and err; it counts lease as held.
func (h *Handler) acquired(ctx context.Context, span trace.Span, req *core.Request, route *attrs, lease *core.Lease, err error) {
	end := time.Now()
	wait := end.Sub(req.Start).Seconds()
	outcome, errType := acquireOutcome(err)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv, OutcomeKey.String(outcome), AttemptsKey.Int(req.Attempts), WaitKey.Float64(wait))
		if req.LocalWait > 0 {
			kv = append(kv, LocalWaitKey.Float64(req.LocalWait.Seconds()))
		}
		setResult(span, kv, errType, err)
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
}

// Release runs next inside a reqlock.release span, a child of the span in
// ctx and linked to the lease's reqlock.acquire span, and records the hold
// time. A lease the Handler did not see acquired passes through untouched.
// Whether the lease was lost is read before next runs (core.Lease.Lost), so
// that a lease given up by its watchdog is recorded as lost even when the
// release then finds its key and deletes it. Should next panic, the span
// ends with error.type _OTHER and status Error, the lease stops counting as
// held (core ends it), and the panic goes on up the stack.
func (h *Handler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	st, _ := lease.Value(h).(*leaseState)
	if st == nil {
		return next(ctx, lease)
	}
	before := leaseBefore(lease)
	link := trace.WithLinks() // none when the acquire span was not sampled
	if st.span.IsValid() {
		link = trace.WithLinks(trace.Link{SpanContext: st.span})
	}
	ctx, span := h.tracer.Start(ctx, SpanRelease,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(before.start),
		st.attrs.span,
		link)
	returned := false
	defer func() {
		if !returned { // next panicked: record it, and let the panic go on
			h.released(ctx, span, st, before, errPanicked)
		}
	}()
	err := next(ctx, lease)
	returned = true
	h.released(ctx, span, st, before, err)
	return err
}

// released ends the release span and records the hold of a lease, in state
// before when its release started, whose release returned err.
func (h *Handler) released(ctx context.Context, span trace.Span, st *leaseState, before leaseAtRelease, err error) {
	end := time.Now()
	hold := end.Sub(st.acquired).Seconds()
	outcome, errType := releaseOutcome(err, before)
	if span.IsRecording() {
		kv := make([]attribute.KeyValue, 0, 3)
		kv = append(kv, OutcomeKey.String(outcome), HoldKey.Float64(hold))
		setResult(span, kv, errType, err)
	}
	span.End(trace.WithTimestamp(end))

	h.ins.holdDuration.Record(ctx, hold, h.cache.get(st.route, outcome, errType).record...)
	h.ins.held.Add(ctx, -1, st.attrs.add...)
}

// setResult sets the attributes kv on span, and marks it as failed when
// errType is not empty, following the contrib rules: the error.type
// attribute, and status Error with a description. The description is the kind
// of the error err, never its text (which names the lock); no exception event
// is recorded for the same reason.
func setResult(span trace.Span, kv []attribute.KeyValue, errType string, err error) {
	if errType != "" {
		kv = append(kv, ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, statusText(errType, err))
	}
	span.SetAttributes(kv...)
}
