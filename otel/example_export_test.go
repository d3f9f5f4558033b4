package lockotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// newProviders returns the providers of a service that exports its traces
// and metrics to w as JSON (w = os.Stdout for a -telemetry=stdout flag), and
// a function that flushes and stops them. To export to an OpenTelemetry
// collector instead, use otlptracehttp.New(ctx) and otlpmetrichttp.New(ctx)
// as the exporters: they read OTEL_EXPORTER_OTLP_ENDPOINT themselves.
func newProviders(w io.Writer, service string) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider, func(context.Context) error, error) {
	spans, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, nil, nil, err
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, nil, nil, err
	}
	res := resource.NewSchemaless(semconv.ServiceName(service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
	shutdown := func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
	}
	return tp, mp, shutdown, nil
}

// Export the traces and metrics of locks as a service does, here into a
// buffer whose span and metric names are printed. A service would install the
// providers with otel.SetTracerProvider and otel.SetMeterProvider, and call
// lockotel.New() without options.
func Example_export() {
	ctx := context.Background()
	var out bytes.Buffer
	tp, mp, shutdown, err := newProviders(&out, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	client := redis.NewClient(&redis.Options{Addr: adaptertest.Shared.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithHandlers(
		lockotel.New(lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)),
	))

	ctx = core.ContextWithRoute(ctx, "/orders/:id") // done by the adapters
	ctx, request := tp.Tracer("orders").Start(ctx, "GET /orders/:id")
	if lease, err := locker.Acquire(ctx, "order:44"); err == nil {
		_ = lease.Release(ctx)
	}
	request.End()
	if err := shutdown(ctx); err != nil { // flushes spans and metrics into out
		fmt.Println(err)
		return
	}

	dec := json.NewDecoder(&out)
	for {
		var v struct {
			Name         string // of a span
			ScopeMetrics []struct{ Metrics []struct{ Name string } }
		}
		if err := dec.Decode(&v); err != nil {
			break
		}
		if v.Name != "" {
			fmt.Println("span", v.Name)
		}
		for _, sm := range v.ScopeMetrics {
			var names []string
			for _, m := range sm.Metrics {
				names = append(names, m.Name)
			}
			sort.Strings(names)
			fmt.Println("metrics", names)
		}
	}
	// Output:
	// span reqlock.acquire
	// span reqlock.release
	// span GET /orders/:id
	// metrics [reqlock.acquire.attempts reqlock.acquire.duration reqlock.acquire.pending reqlock.acquires reqlock.hold.duration reqlock.leases.held]
}
