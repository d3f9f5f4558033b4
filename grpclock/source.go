package grpclock

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/protokey"
)

// source returns the keyfunc.Source of a gRPC call: its method, its incoming
// metadata and its request message (nil for a stream before its first).
func source(ctx context.Context, method string, msg any) keyfunc.Source {
	return &protokey.Source{Method: method, Message: msg, Headers: func(name string) string {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
			return v[0]
		}
		return ""
	}}
}
