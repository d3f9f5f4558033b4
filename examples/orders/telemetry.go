package main

// This file sends the service's traces and metrics somewhere: the request
// spans of gin (otelgin) and gRPC (otelgrpc), and the lock spans and metrics
// of reqlock's otel handler (lockotel), which are children of the request
// spans. See -telemetry.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// telemetryHelp is the help of -telemetry (Config.Telemetry), which names
// the environment variables that the modes read.
const telemetryHelp = `where traces and metrics go: "stdout", "otlp", "none", or "auto": ` +
	`over OTLP each signal whose endpoint the environment names (OTEL_EXPORTER_OTLP_ENDPOINT, ` +
	`or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_METRICS_ENDPOINT), nowhere otherwise. ` +
	`OTLP goes over HTTP, or over gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc ` +
	`(or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_METRICS_PROTOCOL); ` +
	`OTEL_TRACES_EXPORTER=none or OTEL_METRICS_EXPORTER=none turns a signal off; ` +
	`the exporters read the other standard OTEL_EXPORTER_OTLP_* variables (headers, TLS, timeouts)`

// shutdownTimeout bounds the flush of the last spans and metrics at exit, so
// that an unreachable collector cannot keep the process from exiting.
const shutdownTimeout = 5 * time.Second

// otelSignal is one kind of telemetry, as the OTEL_EXPORTER_OTLP_* variables
// name it.
type otelSignal string

const (
	traces  otelSignal = "TRACES"
	metrics otelSignal = "METRICS"
)

// otlpWanted reports whether mode sends s over OTLP: always with "otlp"
// (to the exporters' default endpoint when the environment names none);
// with "auto", when OTEL_EXPORTER_OTLP_ENDPOINT or the signal's own
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT is set. OTEL_TRACES_EXPORTER=none or
// OTEL_METRICS_EXPORTER=none turns the signal off in both modes.
func otlpWanted(mode string, s otelSignal) bool {
	if os.Getenv("OTEL_"+string(s)+"_EXPORTER") == "none" {
		return false
	}
	return mode == "otlp" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+string(s)+"_ENDPOINT") != ""
}

// otlpProtocol returns the OTLP protocol of s: OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL,
// else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf (the default of the
// specification). It fails on any other value than grpc and http/protobuf:
// the Go SDK has no exporter for http/json.
func otlpProtocol(s otelSignal) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + string(s) + "_PROTOCOL"
	p := os.Getenv(name)
	if p == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		p = os.Getenv(name)
	}
	switch p {
	case "":
		return "http/protobuf", nil
	case "grpc", "http/protobuf":
		return p, nil
	}
	return "", fmt.Errorf("%s=%q: want grpc or http/protobuf (the Go exporters do not support http/json)", name, p)
}

// otlpExporters returns the OTLP exporters of the signals that mode sends,
// nil for the others. The exporters read the other standard
// OTEL_EXPORTER_OTLP_* variables themselves (endpoints, headers, TLS,
// timeouts); the default endpoint is localhost:4318 over HTTP and
// localhost:4317 over gRPC.
func otlpExporters(ctx context.Context, mode string) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	var spans sdktrace.SpanExporter
	if otlpWanted(mode, traces) {
		var err error
		if spans, err = otlpTraceExporter(ctx); err != nil {
			return nil, nil, err
		}
	}
	if !otlpWanted(mode, metrics) {
		return spans, nil, nil
	}
	out, err := otlpMetricExporter(ctx)
	if err != nil {
		if spans != nil {
			err = errors.Join(err, spans.Shutdown(ctx))
		}
		return nil, nil, err
	}
	return spans, out, nil
}

// otlpTraceExporter returns an OTLP span exporter of the configured protocol.
func otlpTraceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	p, err := otlpProtocol(traces)
	switch {
	case err != nil:
		return nil, err
	case p == "grpc":
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// otlpMetricExporter returns an OTLP metric exporter of the configured
// protocol.
func otlpMetricExporter(ctx context.Context) (sdkmetric.Exporter, error) {
	p, err := otlpProtocol(metrics)
	switch {
	case err != nil:
		return nil, err
	case p == "grpc":
		return otlpmetricgrpc.New(ctx)
	}
	return otlpmetrichttp.New(ctx)
}

// setupTelemetry installs the global TracerProvider, MeterProvider and
// propagator for mode ("stdout", "otlp", "none" or "auto") and returns a
// function that flushes and stops them. stdout writes JSON lines to w. otlp
// and auto send OTLP, over HTTP (http/protobuf) or gRPC as
// OTEL_EXPORTER_OTLP_PROTOCOL or the per-signal
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / _METRICS_PROTOCOL say; auto sends
// only the signals whose endpoint the environment names (see otlpWanted).
// A signal sent nowhere keeps its no-op global provider, and locks cost next
// to nothing to instrument for it.
func setupTelemetry(ctx context.Context, mode string, w io.Writer) (func(context.Context) error, error) {
	var spans sdktrace.SpanExporter
	var metricsOut sdkmetric.Exporter
	var err error
	switch mode {
	case "none":
	case "stdout":
		if spans, err = stdouttrace.New(stdouttrace.WithWriter(w)); err == nil {
			metricsOut, err = stdoutmetric.New(stdoutmetric.WithWriter(w))
		}
	case "otlp", "auto":
		spans, metricsOut, err = otlpExporters(ctx, mode)
	default:
		return nil, fmt.Errorf("orders: -telemetry=%q: want stdout, otlp, none or auto", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("orders: telemetry: %w", err)
	}
	if spans == nil && metricsOut == nil {
		return func(context.Context) error { return nil }, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("orders")))
	if err != nil {
		return nil, fmt.Errorf("orders: telemetry: %w", err)
	}
	var stops []func(context.Context) error
	if spans != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		stops = append(stops, tp.Shutdown)
	}
	if metricsOut != nil {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricsOut)), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		stops = append(stops, mp.Shutdown)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

// stopTelemetry runs shutdown, as returned by setupTelemetry, for at most
// timeout: the last spans and metrics are flushed if the collector answers
// in time, and dropped otherwise.
func stopTelemetry(shutdown func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		return fmt.Errorf("orders: telemetry: flushing at exit (within %v): %w", timeout, err)
	}
	return nil
}
