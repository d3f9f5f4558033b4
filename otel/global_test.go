package lockotel_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// globals are the providers TestGlobalProviders installs as the otel
// globals, once per test binary (so that -count=N runs agree): the globals
// can be set but not taken back.
var globals struct {
	once   sync.Once
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// TestGlobalProviders checks the fall-back to the global providers, installed
// after New as programs often do: the globals forward to them. It is the only
// test that sets the globals.
func TestGlobalProviders(t *testing.T) {
	h := lockotel.New(nil, lockotel.WithTracerProvider(nil), lockotel.WithMeterProvider(nil))
	globals.once.Do(func() {
		globals.spans = tracetest.NewSpanRecorder()
		globals.reader = sdkmetric.NewManualReader()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(globals.spans)))
		otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(globals.reader)))
	})
	e := &env{spans: globals.spans, reader: globals.reader}
	spansBefore := len(e.ended(lockotel.SpanAcquire)) + len(e.ended(lockotel.SpanRelease))
	histBefore := histCount(t, e.collect(t), lockotel.MetricAcquireDuration)

	lockUnlock(t, h)
	if n := len(e.ended(lockotel.SpanAcquire)) + len(e.ended(lockotel.SpanRelease)) - spansBefore; n != 2 {
		t.Errorf("%d spans on the global provider, want 2", n)
	}
	if n := histCount(t, e.collect(t), lockotel.MetricAcquireDuration) - histBefore; n != 1 {
		t.Errorf("acquire durations on the global provider = %d, want 1", n)
	}
}

// TestNoopProviders checks that locking works the same when telemetry is off.
func TestNoopProviders(t *testing.T) {
	adaptertest.LeakCheck(t)
	h := lockotel.New(lockotel.WithTracerProvider(tracenoop.NewTracerProvider()), lockotel.WithMeterProvider(metricnoop.NewMeterProvider()),
		lockotel.WithGuard(guard{hotspot.Stats{Size: 1}}))
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
