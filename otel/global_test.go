package lockotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// TestGlobalProviders checks the fall-back to the global providers, installed
// after New as programs often do: the globals forward to them. It is the only
// test that sets the globals.
func TestGlobalProviders(t *testing.T) {
	h := lockotel.New(nil, lockotel.WithTracerProvider(nil), lockotel.WithMeterProvider(nil))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)

	lockUnlock(t, h)
	e := &env{spans: spans, reader: reader}
	if n := len(e.ended(lockotel.SpanAcquire)) + len(e.ended(lockotel.SpanRelease)); n != 2 {
		t.Errorf("%d spans on the global provider, want 2", n)
	}
	if n := histCount(t, e.collect(t), lockotel.MetricAcquireDuration); n != 1 {
		t.Errorf("acquire durations on the global provider = %d, want 1", n)
	}
}

// TestNoopProviders checks that locking works the same when telemetry is off.
func TestNoopProviders(t *testing.T) {
	adaptertest.LeakCheck(t)
	h := lockotel.New(lockotel.WithTracerProvider(tracenoop.NewTracerProvider()), lockotel.WithMeterProvider(metricnoop.NewMeterProvider()),
		lockotel.WithGuard(guard{map[string]int64{"size": 1}}))
	defer h.Close()
	lockUnlock(t, h)
}

// lockUnlock takes and releases a name with a Locker with handler h.
func lockUnlock(t *testing.T, h core.Handler) {
	t.Helper()
	l := core.New(adaptertest.Shared.Client(t), core.WithHandlers(h))
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
