package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
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

// TestTelemetryOTLP checks that the default mode exports over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
func TestTelemetryOTLP(t *testing.T) {
	adaptertest.LeakCheck(t)
	keepGlobals(t)
	c := &collector{posted: map[string]int{}}
	srv := httptest.NewServer(c)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	shutdown, err := setupTelemetry(context.Background(), "auto", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ordersv1.NewOrdersClient(conn).Create(context.Background(), &ordersv1.OrderRequest{OrderId: "6", AmountCents: 1}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	a.close()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.posted["/v1/metrics"] == 0 {
		t.Errorf("no metrics posted; requests: %v", c.posted)
	}
	got := strings.Join(c.spans, ",")
	for _, want := range []string{"orders.v1.Orders/Create", "reqlock.acquire", "reqlock.release"} {
		if !strings.Contains(got, want) {
			t.Errorf("spans posted: %s; want %s among them", got, want)
		}
	}
}

func TestTelemetryModes(t *testing.T) {
	keepGlobals(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
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
