package lockotel_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// BenchmarkHandler measures what the handlers add to an uncontended
// acquire+release (two round trips to a real redis-server on loopback),
// against the same Locker without them, in the same run. Compare with
//
//	go test ./otel -run '^$' -bench Handler -count 6 | tee bench.txt
//	benchstat -col /chain bench.txt
//
// chain=otel-sdk uses the SDK as a service would: every span sampled and
// ended into a batch span processor (with an exporter that discards), and a
// real MeterProvider (with a manual reader) aggregating every measurement.
// chain=otel-noop is the handler with telemetry off (no-op providers).
// chain=slog writes the access log as JSON to io.Discard.
func BenchmarkHandler(b *testing.B) {
	for _, c := range []struct {
		name     string
		handlers func(*testing.B) []core.Handler
	}{
		{"chain=none", func(*testing.B) []core.Handler { return nil }},
		{"chain=otel-sdk", benchSDK},
		{"chain=otel-noop", benchNoop},
		{"chain=slog", benchSlog},
		{"chain=otel-sdk+slog", func(b *testing.B) []core.Handler { return append(benchSDK(b), benchSlog(b)...) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			locker := core.New(adaptertest.Shared.Client(b), core.WithHandlers(c.handlers(b)...))
			ctx := core.ContextWithRoute(context.Background(), route)
			names := make([]string, 1024) // distinct names, as distinct orders would be
			for i := range names {
				names[i] = "bench:" + strconv.Itoa(i)
			}
			cycle := func(name string) {
				lease, err := locker.Acquire(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cycle(names[0]) // dials and loads the release script
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cycle(names[i%len(names)])
			}
		})
	}
}

// benchSDK returns the otel Handler on SDK providers as a service has them:
// every span sampled and ended into a batch span processor (with an exporter
// that discards), and a MeterProvider (with a manual reader) aggregating
// every measurement.
func benchSDK(b *testing.B) []core.Handler {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return []core.Handler{lockotel.New(lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp))}
}

// benchNoop returns the otel Handler with telemetry off.
func benchNoop(*testing.B) []core.Handler {
	return []core.Handler{lockotel.New(
		lockotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))}
}

// benchSlog returns the LogHandler writing JSON to io.Discard.
func benchSlog(*testing.B) []core.Handler {
	return []core.Handler{lockotel.NewLogHandler(slog.New(slog.NewJSONHandler(io.Discard, nil)))}
}

// BenchmarkHandlerAlone measures the handlers' own cost per acquire+release,
// without Redis: the observer methods are called directly with the events
// the Locker would give them (and a lease taken once from Redis
// beforehand). It explains the differences seen by BenchmarkHandler, where
// the two round trips dominate and vary.
//
//	go test ./otel -run '^$' -bench HandlerAlone -count 6 | tee alone.txt
//	benchstat -col /chain alone.txt
func BenchmarkHandlerAlone(b *testing.B) {
	for _, c := range []struct {
		name     string
		handlers func(*testing.B) []core.Handler
	}{
		{"chain=otel-sdk", benchSDK},
		{"chain=otel-noop", benchNoop},
		{"chain=slog", benchSlog},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := c.handlers(b)[0].(core.Observer)
			lease, err := core.New(adaptertest.Shared.Client(b)).Acquire(context.Background(), "bench-alone:"+c.name)
			if err != nil {
				b.Fatal(err)
			}
			defer lease.Release(context.Background())
			ctx := core.ContextWithRoute(context.Background(), route)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				lo := o.ObserveAcquire(ctx, core.AcquireEvent{
					Name: lease.Name(), Key: lease.Key(), Route: route, TTL: core.DefaultTTL,
					Start: start, End: time.Now(), Attempts: 1, Outcome: core.OutcomeAcquired, Lease: lease,
				})
				released := time.Now()
				lo.ObserveRelease(ctx, core.ReleaseEvent{Lease: lease, Start: released, End: time.Now(), Outcome: core.OutcomeReleased})
			}
		})
	}
}
