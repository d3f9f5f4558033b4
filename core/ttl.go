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

type waitKey struct{}

// ContextWithWait returns a copy of ctx that makes Acquire use wait as its
// wait budget instead of the Locker's (WithWait), for locks taken with that
// context only; it may be longer or shorter. The budget is still cut by the
// context's deadline. Unlike a context timeout, it bounds only the waiting
// for another holder: a Redis call in flight is bounded by the I/O timeout,
// so a stalled Redis is reported as ErrStorage, not as a busy lock. Adapters
// use it for their per-route wait. A negative wait makes Acquire fail with
// ErrInvalidOption.
func ContextWithWait(ctx context.Context, wait time.Duration) context.Context {
	return context.WithValue(ctx, waitKey{}, wait)
}

// WaitFromContext returns the wait budget set on ctx by ContextWithWait, if
// any.
func WaitFromContext(ctx context.Context) (time.Duration, bool) {
	wait, ok := ctx.Value(waitKey{}).(time.Duration)
	return wait, ok
}
