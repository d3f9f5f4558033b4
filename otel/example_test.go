package lockotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// Trace and measure a lock taken by a request. In a service the providers
// are the ones set up for the whole program (or the globals), and the
// adapters put the route on the context.
func ExampleNew() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder() // in a service: an exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)
	reader := sdkmetric.NewManualReader() // in a service: a periodic reader
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	client := redis.NewClient(&redis.Options{Addr: adaptertest.Shared.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithHandlers(
		lockotel.New(lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)),
	))

	ctx = core.ContextWithRoute(ctx, "/orders/:id") // done by ginlock, grpclock, httplock
	ctx, request := tp.Tracer("example").Start(ctx, "GET /orders/:id")
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.Release(ctx)
	request.End()

	for _, s := range spans.Ended() {
		fmt.Print(s.Name())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case lockotel.RouteKey, lockotel.OutcomeKey, lockotel.AttemptsKey:
				fmt.Printf(" %s=%s", kv.Key, kv.Value.Emit())
			}
		}
		fmt.Println()
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	var names []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	fmt.Println(names)
	// Output:
	// reqlock.acquire reqlock.route=/orders/:id reqlock.outcome=acquired reqlock.attempts=1
	// reqlock.release reqlock.route=/orders/:id reqlock.outcome=released
	// GET /orders/:id
	// [reqlock.acquire.attempts reqlock.acquire.duration reqlock.acquire.pending reqlock.acquires reqlock.hold.duration reqlock.leases.held]
}

// An access log of locks on log/slog. The lock name is left out unless
// WithName is given (see ExampleWithName). Times are left out here so that
// the output is the same on every run.
func ExampleNewLogHandler() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "wait", "hold":
				return slog.Attr{}
			}
			return a
		},
	}))
	client := redis.NewClient(&redis.Options{Addr: adaptertest.Shared.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithHandlers(lockotel.NewLogHandler(logger)))

	ctx := core.ContextWithRoute(context.Background(), "/orders/:id")
	lease, err := locker.Acquire(ctx, "order:43")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.Release(ctx)
	// Output:
	// level=INFO msg="lock acquire" route=/orders/:id outcome=acquired attempts=1 ttl=10s
	// level=INFO msg="lock release" route=/orders/:id outcome=released
}

// WithName puts the lock name in the access log, for names that carry
// nothing personal.
func ExampleWithName() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "wait", "hold":
				return slog.Attr{}
			}
			return a
		},
	}))
	client := redis.NewClient(&redis.Options{Addr: adaptertest.Shared.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithHandlers(lockotel.NewLogHandler(logger, lockotel.WithName())))

	ctx := core.ContextWithRoute(context.Background(), "/orders/:id")
	lease, err := locker.Acquire(ctx, "order:44")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.Release(ctx)
	// Output:
	// level=INFO msg="lock acquire" lock=order:44 route=/orders/:id outcome=acquired attempts=1 ttl=10s
	// level=INFO msg="lock release" lock=order:44 route=/orders/:id outcome=released
}
