package lockotel

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// TraceID returns the trace id of the span in ctx (trace.SpanContextFromContext),
// as 32 lowercase hex digits, or "" when ctx has no span or its span context
// is invalid. It is a source of request ids for the holder record of
// reqlock's locks (core.Holder.RequestID), for the requests an adapter finds
// none in (no request id header, no traceparent header) and for locks taken
// outside an adapter:
//
//	locker := core.New(client, core.WithRequestID(lockotel.TraceID))
//
// so that an operator who sees who holds a lock (reqlock show NAME) finds
// the request's trace by its id.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
