package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	collectormetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// keepGlobals restores the global providers when the test ends, as
// setupTelemetry replaces them. (The propagator it sets exports nothing and
// may stay.)
func keepGlobals(t *testing.T) {
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() { // setting a global to itself is an error to otel
		if otel.GetTracerProvider() != tp {
			otel.SetTracerProvider(tp)
		}
		if otel.GetMeterProvider() != mp {
			otel.SetMeterProvider(mp)
		}
	})
}

// TestTelemetryStdout runs requests with -telemetry=stdout and checks that
// the lock spans are children of the request spans and that the lock metrics
// are written.
func TestTelemetryStdout(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	var out bytes.Buffer
	shutdown, err := setupTelemetry(context.Background(), "stdout", &out)
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + a.httpAddr + "/orders/"
	if code, body := post(t, base+"5", `{"amount_cents":100}`); code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := post(t, base+"5/pay", ""); code != http.StatusOK {
		t.Fatalf("pay: %d %s", code, body)
	}
	a.close()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	type span struct {
		Name        string
		SpanContext struct{ SpanID string }
		Parent      struct{ SpanID string }
	}
	byName := map[string][]span{}
	metrics := ""
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `{"Resource"`) {
			metrics += line
			continue
		}
		var s span
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	pay := byName["POST /orders/:id/pay"]
	if len(pay) != 1 {
		t.Fatalf("request spans of the pay: %v; spans: %v", pay, byName)
	}
	for _, name := range []string{"reqlock.acquire", "reqlock.release"} {
		n := 0
		for _, s := range byName[name] {
			if s.Parent.SpanID == pay[0].SpanContext.SpanID {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d %s spans under the pay request, want 1 (spans: %v)", n, name, byName)
		}
	}
	for _, m := range []string{"reqlock.acquire.duration", "reqlock.hold.duration", `"/orders/:id/pay"`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s: %s", m, metrics)
		}
	}
	if strings.Contains(out.String(), "order:5") {
		t.Error("the telemetry carries a lock name")
	}
}

// collector stands in for an OpenTelemetry collector's OTLP/HTTP receiver.
type collector struct {
	mu     sync.Mutex
	spans  []string
	posted map[string]int // requests by path
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posted[r.URL.Path]++
	if r.URL.Path == "/v1/traces" {
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, s.Name)
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// createOrder runs one gRPC Create through a service started on a fresh
// redis-server, so that a request span and the lock's spans and metrics are
// recorded.
func createOrder(t *testing.T, id string) {
	t.Helper()
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ordersv1.NewOrdersClient(conn).Create(context.Background(), &ordersv1.OrderRequest{OrderId: id, AmountCents: 1}); err != nil {
		t.Fatal(err)
	}
}

// wantSpans fails the test unless spans holds the request's span and the
// lock's.
func wantSpans(t *testing.T, spans []string) {
	t.Helper()
	got := strings.Join(spans, ",")
	for _, want := range []string{"orders.v1.Orders/Create", "reqlock.acquire", "reqlock.release"} {
		if !strings.Contains(got, want) {
			t.Errorf("spans exported: %s; want %s among them", got, want)
		}
	}
}

// clearOTLPEnv unsets the OTEL_* variables that setupTelemetry and the
// exporters read, for the test.
func clearOTLPEnv(t *testing.T) {
	for _, v := range []string{"ENDPOINT", "TRACES_ENDPOINT", "METRICS_ENDPOINT", "PROTOCOL", "TRACES_PROTOCOL", "METRICS_PROTOCOL"} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+v, "")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_METRICS_EXPORTER", "")
}

// startCollector starts an OTLP/HTTP receiver until the test ends and
// returns it with its URL.
func startCollector(t *testing.T) (*collector, string) {
	c := &collector{posted: map[string]int{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// TestTelemetryOTLP checks that the default mode exports over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
func TestTelemetryOTLP(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	clearOTLPEnv(t)
	c, url := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	shutdown, err := setupTelemetry(context.Background(), "auto", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	createOrder(t, "6")
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.posted["/v1/metrics"] == 0 {
		t.Errorf("no metrics posted; requests: %v", c.posted)
	}
	wantSpans(t, c.spans)
}

// grpcCollector stands in for an OpenTelemetry collector's OTLP/gRPC
// receiver.
type grpcCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	collectormetrics.UnimplementedMetricsServiceServer
	mu      sync.Mutex
	spans   []string
	metrics int // export requests
}

func (c *grpcCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, s.Name)
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// metricsService adapts grpcCollector to the metrics service, whose method
// has the same name as the trace service's.
type metricsService struct{ *grpcCollector }

func (m metricsService) Export(context.Context, *collectormetrics.ExportMetricsServiceRequest) (*collectormetrics.ExportMetricsServiceResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metrics++
	return &collectormetrics.ExportMetricsServiceResponse{}, nil
}

// TestTelemetryOTLPOverGRPC checks that OTEL_EXPORTER_OTLP_PROTOCOL=grpc
// exports both signals over OTLP/gRPC.
func TestTelemetryOTLPOverGRPC(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	clearOTLPEnv(t)
	c := &grpcCollector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	collectormetrics.RegisterMetricsServiceServer(srv, metricsService{c})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		<-served
	}()
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String()) // http: without TLS
	shutdown, err := setupTelemetry(context.Background(), "auto", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	createOrder(t, "7")
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.metrics == 0 {
		t.Error("no metrics exported over gRPC")
	}
	wantSpans(t, c.spans)
}

// With only one signal's endpoint set, auto exports that signal and leaves
// the other's global provider alone: no exporter to the default localhost
// endpoint for it.
func TestTelemetryPerSignalEndpoint(t *testing.T) {
	for _, only := range []string{"TRACES", "METRICS"} {
		t.Run(only, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			keepGlobals(t)
			clearOTLPEnv(t)
			c, url := startCollector(t)
			path := "/v1/" + strings.ToLower(only)
			t.Setenv("OTEL_EXPORTER_OTLP_"+only+"_ENDPOINT", url+path) // a per-signal URL is used as is
			tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
			shutdown, err := setupTelemetry(context.Background(), "auto", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tracesSet, metricsSet := otel.GetTracerProvider() != tp, otel.GetMeterProvider() != mp
			createOrder(t, "8")
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tracesSet != (only == "TRACES") || metricsSet != (only == "METRICS") {
				t.Errorf("providers installed: traces %v, metrics %v; want only %s", tracesSet, metricsSet, only)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.posted) != 1 || c.posted[path] == 0 {
				t.Errorf("requests %v, want %s only", c.posted, path)
			}
		})
	}
}

// Protocols other than grpc and http/protobuf fail clearly, naming the
// variable, and install nothing; OTEL_<SIGNAL>_EXPORTER=none turns a signal
// off.
func TestTelemetryProtocolsAndNone(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
	for _, c := range []struct {
		env  map[string]string
		want string // in the error
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "thrift"}, `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="thrift"`},
	} {
		clearOTLPEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		_, err := setupTelemetry(context.Background(), "otlp", io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "grpc or http/protobuf") {
			t.Errorf("%v: err = %v, want one naming %s", c.env, err, c.want)
		}
		if otel.GetTracerProvider() != tp || otel.GetMeterProvider() != mp {
			t.Fatalf("%v: a provider was installed by a failed setup", c.env)
		}
	}
	clearOTLPEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	shutdown, err := setupTelemetry(context.Background(), "otlp", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tp || otel.GetMeterProvider() != mp {
		t.Error("a provider was installed for signals turned off")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// An unreachable collector (one that accepts and never answers) cannot keep
// the exit waiting: stopTelemetry gives up at its timeout.
func TestTelemetryStopIsBounded(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	clearOTLPEnv(t)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	shutdown, err := setupTelemetry(context.Background(), "otlp", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "pending")
	span.End()
	err = stopTelemetry(shutdown, 100*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stopTelemetry with a collector that never answers = %v, want the deadline exceeded", err)
	}
}

func TestTelemetryModes(t *testing.T) {
	keepGlobals(t)
	clearOTLPEnv(t)
	for _, mode := range []string{"none", "auto"} {
		shutdown, err := setupTelemetry(context.Background(), mode, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Fatalf("%s: shutdown: %v", mode, err)
		}
	}
	if _, err := setupTelemetry(context.Background(), "jaeger", io.Discard); err == nil || !strings.Contains(err.Error(), "jaeger") {
		t.Fatalf("unknown mode: err = %v", err)
	}
}
