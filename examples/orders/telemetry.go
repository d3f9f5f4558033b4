package main

// This file sends the service's traces and metrics somewhere: the request
// spans of gin (otelgin) and gRPC (otelgrpc), and the lock spans and metrics
// of reqlock's otel handler (lockotel), which are children of the request
// spans. See -telemetry.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// telemetryFlag chooses where traces and metrics go.
var telemetryFlag = flag.String("telemetry", "auto",
	`where traces and metrics go: "stdout", "otlp", "none", or "auto": OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, none otherwise`)

// otlpConfigured reports whether the standard environment names an OTLP
// endpoint, for traces and metrics alike or for each.
func otlpConfigured() bool {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// setupTelemetry installs the global TracerProvider, MeterProvider and
// propagator for mode ("stdout", "otlp", "none" or "auto") and returns a
// function that flushes and stops them. stdout writes JSON lines to w; otlp
// sends OTLP over HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (the exporters read
// the standard OTEL_EXPORTER_OTLP_* variables themselves; the default is
// localhost:4318). With none, the globals stay no-op and locks cost next to
// nothing to instrument.
func setupTelemetry(ctx context.Context, mode string, w io.Writer) (func(context.Context) error, error) {
	if mode == "auto" {
		mode = "none"
		if otlpConfigured() {
			mode = "otlp"
		}
	}
	var spans sdktrace.SpanExporter
	var metrics sdkmetric.Exporter
	var err error
	switch mode {
	case "none":
		return func(context.Context) error { return nil }, nil
	case "stdout":
		if spans, err = stdouttrace.New(stdouttrace.WithWriter(w)); err == nil {
			metrics, err = stdoutmetric.New(stdoutmetric.WithWriter(w))
		}
	case "otlp":
		if spans, err = otlptracehttp.New(ctx); err == nil {
			metrics, err = otlpmetrichttp.New(ctx)
		}
	default:
		return nil, fmt.Errorf("orders: -telemetry=%q: want stdout, otlp, none or auto", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("orders: telemetry: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("orders")))
	if err != nil {
		return nil, fmt.Errorf("orders: telemetry: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
	}, nil
}
