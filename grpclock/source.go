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
	return &callSource{Source: protokey.Source{Method: method, Message: msg}, ctx: ctx}
}

// callSource is a protokey.Source whose headers are the call's incoming
// metadata. It is one allocation, where a protokey.Source with a Headers
// closure over ctx was two.
type callSource struct {
	protokey.Source
	ctx context.Context
}

// Header returns the first value of the incoming metadata key name, "" if
// the call has none.
func (s *callSource) Header(name string) (string, error) {
	if v := metadata.ValueFromIncomingContext(s.ctx, name); len(v) > 0 {
		return v[0], nil
	}
	return "", nil
}
