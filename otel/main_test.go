package lockotel_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	lockotel "github.com/reqlock/reqlock/otel"
)

func TestMain(m *testing.M) {
	adaptertest.Main(m) // a shared redis-server, adaptertest.Shared, and a leak check at the end
}

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run. It looks
// like a name with personal data in it, which telemetry must not carry.
func uniq(t testing.TB) string {
	return fmt.Sprintf("user:alice@example.com:%s#%d", t.Name(), seq.Add(1))
}

// env is a Locker with the otel Handler among its plugins, on SDK providers
// that record everything in memory.
type env struct {
	client  *redis.Client
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
	reader  *sdkmetric.ManualReader
	mp      *sdkmetric.MeterProvider
	handler *lockotel.Handler
	locker  *core.Locker
}

// newEnv builds an env on srv (shared when nil). extra plugins are given to
// core.WithHandlers after the otel Handler.
func newEnv(t testing.TB, srv *redistest.Server, extra []core.Handler, opts ...core.Option) *env {
	t.Helper()
	if srv == nil {
		srv = adaptertest.Shared
	}
	e := &env{client: srv.Client(t), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	e.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		_ = e.tp.Shutdown(context.Background())
		_ = e.mp.Shutdown(context.Background())
	})
	e.handler = lockotel.New(lockotel.WithTracerProvider(e.tp), lockotel.WithMeterProvider(e.mp))
	handlers := append([]core.Handler{e.handler}, extra...)
	e.locker = core.New(e.client, append([]core.Option{core.WithHandlers(handlers...)}, opts...)...)
	if err := e.locker.Err(); err != nil {
		t.Fatal(err)
	}
	return e
}

// ended returns the ended spans called name.
func (e *env) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// collect reads the metrics.
func (e *env) collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// find returns the metric called name, or false.
func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// point is a data point of a histogram (its count) or of an int64 sum (its
// value).
type point struct {
	attrs attribute.Set
	n     int64
}

// points returns the data points of m.
func points(t testing.TB, m metricdata.Metrics) []point {
	t.Helper()
	var out []point
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, int64(dp.Count)})
		}
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, dp.Value})
		}
	default:
		t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

// total adds the counts (histograms) or values (sums) of the data points of
// metric name whose attributes include want.
func total(t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	var n int64
	for _, p := range points(t, m) {
		if has(p.attrs, want) {
			n += p.n
		}
	}
	return n
}

// histCount is total for a float64 histogram, sum for an int64 sum; each
// checks that name is of its kind.
func histCount(t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	return totalOf[metricdata.Histogram[float64]](t, rm, name, want...)
}

func sum(t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	return totalOf[metricdata.Sum[int64]](t, rm, name, want...)
}

func totalOf[D metricdata.Histogram[float64] | metricdata.Sum[int64]](t testing.TB, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	if m, ok := find(rm, name); ok {
		if _, kind := m.Data.(D); !kind {
			t.Fatalf("%s is a %T, want a %T", name, m.Data, *new(D))
		}
	}
	return total(t, rm, name, want...)
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// attr returns the value of attribute key of span s, and whether it is set.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// noName fails the test when a span, span event, link, status description or
// metric data point recorded by e carries one of secrets (a lock name, its
// Redis key) in an attribute value or a description.
func (e *env) noName(t testing.TB, secrets ...string) {
	t.Helper()
	check := func(where, v string) {
		for _, s := range secrets {
			if v == s || strings.Contains(v, s) {
				t.Errorf("%s carries the lock name or key %q: %q", where, s, v)
			}
		}
	}
	checkSet := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			check(where+" attribute "+string(kv.Key), kv.Value.Emit())
		}
	}
	spans := e.spans.Ended()
	if len(spans) == 0 {
		t.Error("noName: no span was recorded")
	}
	for _, s := range spans {
		checkSet("span "+s.Name(), s.Attributes())
		check("span "+s.Name()+" status", s.Status().Description)
		for _, ev := range s.Events() {
			checkSet("span "+s.Name()+" event "+ev.Name, ev.Attributes)
		}
		for _, l := range s.Links() {
			checkSet("span "+s.Name()+" link", l.Attributes)
		}
	}
	rm := e.collect(t)
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range points(t, m) {
				seen++
				checkSet("metric "+m.Name, p.attrs.ToSlice())
			}
		}
	}
	if seen == 0 {
		t.Error("noName: no metric data point was recorded")
	}
}
