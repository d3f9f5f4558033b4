package core

import (
	"context"
	"time"
)

type ttlKey struct{}

// ContextWithTTL returns a copy of ctx that makes Acquire use ttl instead of
// the Locker's TTL (WithTTL) for locks taken with that context only. It is the
// per-request override of the seed framework's OwnSecond, carried by the
// context instead of a thread-local, so it cannot leak into other requests.
//
// ttl is rounded up to whole milliseconds. A ttl below one millisecond or
// above MaxTTL makes Acquire fail with ErrInvalidOption.
func ContextWithTTL(ctx context.Context, ttl time.Duration) context.Context {
	return context.WithValue(ctx, ttlKey{}, ttl)
}

// TTLFromContext returns the TTL set on ctx by ContextWithTTL, if any.
func TTLFromContext(ctx context.Context) (time.Duration, bool) {
	ttl, ok := ctx.Value(ttlKey{}).(time.Duration)
	return ttl, ok
}
