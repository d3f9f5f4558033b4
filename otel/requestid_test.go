package lockotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// TestTraceID: the trace id of a local span, of a remote span context taken
// from a traceparent header, and "" without a span or with an invalid one.
func TestTraceID(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	if got, want := lockotel.TraceID(ctx), span.SpanContext().TraceID().String(); got != want || len(got) != 32 {
		t.Errorf("a local span: %q, want %q", got, want)
	}

	const tp00 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	remote := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp00})
	if got := lockotel.TraceID(remote); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("a remote span context: %q", got)
	}

	for what, ctx := range map[string]context.Context{
		"no span":      context.Background(),
		"invalid span": trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}),
		"no span id": trace.ContextWithSpanContext(context.Background(),
			trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}})),
	} {
		if got := lockotel.TraceID(ctx); got != "" {
			t.Errorf("%s: %q, want \"\"", what, got)
		}
	}
}

// TestTraceIDInHolder: a Locker built WithRequestID(lockotel.TraceID)
// records the trace id of the acquire's span as its holder's request id.
func TestTraceIDInHolder(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithRequestID(lockotel.TraceID))
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	lease, err := e.Locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	h, ok := core.ParseHolder(lease.Token())
	if want := span.SpanContext().TraceID().String(); !ok || h.RequestID != want {
		t.Errorf("the holder is %v (ok %v), want request id %s", h, ok, want)
	}
}

// FuzzAdapterTraceparent checks the adapters' traceparent parser
// (adapter.TraceID, which the root module has without OpenTelemetry)
// against OpenTelemetry's propagation.TraceContext: both find the same
// trace id in every header, but where the W3C specification and
// OpenTelemetry differ: OpenTelemetry takes a version 00 header that goes
// on with a "-" after its flags (the specification says version 00 is 55
// characters), and refuses version 00 flags beyond the sampled and random
// bits (the adapters read no flags).
func FuzzAdapterTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		ours, ok := adapter.TraceID(h)
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": h}))
		theirs := ""
		if sc.IsValid() {
			theirs = sc.TraceID().String()
		}
		if ours == theirs {
			return
		}
		v00 := strings.HasPrefix(h, "00-")
		switch {
		case !ok && v00 && len(h) == 56 && h[55] == '-' && theirs != "": // 00 and a "-": OpenTelemetry takes it
		case ok && v00 && len(h) == 55 && theirs == "" && h[53:55] > "03": // flags of version 00 beyond 0x03
		default:
			t.Fatalf("%q: the adapters read trace id %q (ok %v), OpenTelemetry %q", h, ours, ok, theirs)
		}
	})
}

// The trace id of the request's span becomes the request id of the
// holder of the locks a Locker takes in it.
func ExampleTraceID() {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	fmt.Println(lockotel.TraceID(ctx))
	fmt.Printf("%q\n", lockotel.TraceID(context.Background()))

	// A Locker uses it where a call has no request id of its own:
	//	locker := core.New(client, core.WithRequestID(lockotel.TraceID))

	// Output:
	// 4bf92f3577b34da6a3ce929d0e0e4736
	// ""
}
