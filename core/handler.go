package core

import (
	"context"
	"fmt"
	"time"
)

// Request describes one call of Acquire as it travels down the handler chain.
// Each call gets its own Request, so handlers keep their per-call state here
// or on the Lease, never in themselves.
type Request struct {
	// Name is the lock name given to Acquire.
	Name string
	// Key is the Redis key that guards Name (see Locker.Key).
	Key string
	// Route is the label set on the context with ContextWithRoute (a route
	// template or RPC method), or "". Unlike Name it has low cardinality, so
	// telemetry handlers may use it as an attribute.
	Route string
	// TTL is the lifetime of the lock in Redis: the Locker's TTL, or the one
	// set with ContextWithTTL. A handler may change it before calling next;
	// the innermost link rejects a TTL outside [1ms, MaxTTL] with
	// ErrInvalidOption and uses it in whole milliseconds.
	TTL time.Duration
	// Start is when Acquire was called.
	Start time.Time
	// Deadline is when the wait budget runs out: Start plus WithWait, or the
	// context's deadline if that comes first.
	Deadline time.Time
	// Attempts counts the Redis attempts the innermost link made. Handlers
	// read it after next returns.
	Attempts int
	// LocalWait is the time spent waiting for a lock inside this process
	// before contending in Redis, set by a local-lock handler such as the
	// hotspot guard; 0 without one.
	LocalWait time.Duration
}

// TimeoutErr returns the error for a wait budget that is spent: the context's
// error when it was the context's deadline that cut the budget, ErrTimeout
// (wrapped with the name and the time waited) otherwise. Handlers that wait
// on their own, such as a local lock, use it to report timeouts the way the
// innermost link does.
func (r *Request) TimeoutErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return fmt.Errorf("%w (name %q, waited %v, %d attempts)",
		ErrTimeout, r.Name, time.Since(r.Start).Round(time.Millisecond), r.Attempts)
}

// AcquireFunc is the rest of the chain below a handler's Acquire.
type AcquireFunc func(ctx context.Context, req *Request) (*Lease, error)

// ReleaseFunc is the rest of the chain below a handler's Release.
type ReleaseFunc func(ctx context.Context, lease *Lease) error

// Handler wraps acquire and release like a middleware wraps an HTTP handler:
// it may act before and after calling next, or not call next at all. It is
// the seed framework's LockHandler, with its acquire and release chains.
// Local hot-spot locks, tracing and logging plug in as Handlers; the Redis
// backend is the innermost link of both chains.
//
// A Handler is shared by every request of a Locker and must be safe for
// concurrent use. Release runs once per lease, with a context that is not
// cancelled (Lease.Release strips the caller's cancellation). Per-lease state
// goes on the Lease with SetValue.
type Handler interface {
	Acquire(ctx context.Context, req *Request, next AcquireFunc) (*Lease, error)
	Release(ctx context.Context, lease *Lease, next ReleaseFunc) error
}

// HandlerFuncs builds a Handler from two functions. A nil function passes
// straight through to next.
type HandlerFuncs struct {
	OnAcquire func(ctx context.Context, req *Request, next AcquireFunc) (*Lease, error)
	OnRelease func(ctx context.Context, lease *Lease, next ReleaseFunc) error
}

// Acquire calls OnAcquire, or next when it is nil.
func (h HandlerFuncs) Acquire(ctx context.Context, req *Request, next AcquireFunc) (*Lease, error) {
	if h.OnAcquire == nil {
		return next(ctx, req)
	}
	return h.OnAcquire(ctx, req, next)
}

// Release calls OnRelease, or next when it is nil.
func (h HandlerFuncs) Release(ctx context.Context, lease *Lease, next ReleaseFunc) error {
	if h.OnRelease == nil {
		return next(ctx, lease)
	}
	return h.OnRelease(ctx, lease, next)
}

// chain composes handlers around the innermost functions once, when the
// Locker is built, so that a call allocates no closures.
func chain(handlers []Handler, acquire AcquireFunc, release ReleaseFunc) (AcquireFunc, ReleaseFunc) {
	for i := len(handlers) - 1; i >= 0; i-- {
		h, nextAcquire, nextRelease := handlers[i], acquire, release
		acquire = func(ctx context.Context, req *Request) (*Lease, error) {
			return h.Acquire(ctx, req, nextAcquire)
		}
		release = func(ctx context.Context, lease *Lease) error {
			return h.Release(ctx, lease, nextRelease)
		}
	}
	return acquire, release
}
