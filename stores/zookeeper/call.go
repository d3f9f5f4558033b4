package zkstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// result is the outcome of one call on the connection.
type result[T any] struct {
	v   T
	err error
}

// call runs f, a blocking call of go-zookeeper (whose API takes no
// context), bounded by ctx: it returns ctx's error as soon as ctx is done.
// The call itself goes on until the connection answers or gives up (a
// request is failed when the connection is lost, or when the connection's
// HostProvider lets it give up: at once and every second with
// go-zookeeper's own, after 3 s with this package's), on a goroutine of
// its own.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil { // not cancellable: no goroutine needed
		return f()
	}
	done := make(chan result[T], 1)
	go func() {
		v, err := f()
		done <- result[T]{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		// The call may have finished too: prefer its answer.
		select {
		case r := <-done:
			return r.v, r.err
		default:
		}
		return zero, ctx.Err()
	}
}

// both runs f and g at once, bounded by ctx: two requests pipelined on the
// connection, one round trip.
func both[A, B any](ctx context.Context, f func() (A, error), g func() (B, error)) (A, error, B, error) {
	gc := make(chan result[B], 1)
	go func() {
		v, err := call(ctx, g)
		gc <- result[B]{v, err}
	}()
	a, aerr := call(ctx, f)
	r := <-gc
	return a, aerr, r.v, r.err
}

// mayHaveApplied reports whether a call that failed with err may still have
// been applied by the server: its reply was lost (the connection closed
// after it was sent) or it was cut short by its context. A request that was
// never sent (ErrNoServer), or whose session had expired or was closed
// (ErrSessionExpired, ErrClosing), left nothing behind: the server deletes
// the ephemeral nodes of a session that ends.
func mayHaveApplied(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, zk.ErrConnectionClosed)
}

// wrap prefixes a store error with the package and the operation; nil stays
// nil. Context errors keep their identity for errors.Is.
func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("zkstore: %s %q: %w", op, key, err)
}
