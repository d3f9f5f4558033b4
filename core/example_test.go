package core_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

// Lock an order for the length of a request, with a longer TTL for this one
// request because it is known to be slow.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithTTL(10*time.Second), core.WithWait(2*time.Second))

	ctx := core.ContextWithTTL(context.Background(), 30*time.Second) // this request only
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lease.Release(ctx)

	fmt.Println("locked", lease.Name(), "in key", lease.Key(), "for", lease.TTL())
	// Output: locked order:42 in key reqlock:{order:42} for 30s
}

// A second request for the same order waits for at most its wait budget, then
// gets ErrTimeout, which a web service answers with 409 Conflict.
func ExampleLocker_Acquire_busy() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()

	first, _ := core.New(client).Acquire(ctx, "order:7")
	defer first.Release(ctx)

	_, err := core.New(client, core.WithWait(50*time.Millisecond)).Acquire(ctx, "order:7")
	switch {
	case errors.Is(err, core.ErrTimeout):
		fmt.Println("busy: try again later")
	case errors.Is(err, core.ErrStorage):
		fmt.Println("redis unavailable")
	}
	// Output: busy: try again later
}

// A Handler wraps every acquire and release of a Locker, like an HTTP
// middleware; hot-spot local locks, tracing and logging are written this way.
func ExampleHandlerFuncs() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()

	logging := core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
			lease, err := next(ctx, req)
			fmt.Printf("acquire %s: attempts=%d err=%v\n", req.Name, req.Attempts, err)
			return lease, err
		},
		OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
			err := next(ctx, lease)
			fmt.Printf("release %s: err=%v\n", lease.Name(), err)
			return err
		},
	}
	locker := core.New(client, core.WithHandlers(logging))

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "invoice:9")
	if err == nil {
		_ = lease.Release(ctx)
	}
	// Output:
	// acquire invoice:9: attempts=1 err=<nil>
	// release invoice:9: err=<nil>
}
