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
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			_, err := next(ctx, req)
			fmt.Printf("acquire %s: attempts=%d err=%v\n", req.Name, req.Attempts, err)
			return err
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

// A downstream store accepts a write only with a fencing token at least as
// high as the highest it has seen for the record, so that a holder whose
// lock expired while it was paused cannot overwrite its successor's work. In
// SQL the same check is
//
//	UPDATE invoices SET total = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// with the write refused when no row was updated.
func ExampleLease_Fence() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithFencing(), core.WithWait(time.Second))
	store := redis.NewScript(`
		if tonumber(ARGV[1]) < tonumber(redis.call("HGET", KEYS[1], "fence") or "0") then return 0 end
		redis.call("HSET", KEYS[1], "fence", ARGV[1], "total", ARGV[2])
		return 1`)
	write := func(lease *core.Lease, total int) string {
		if ok, _ := store.Run(context.Background(), client, []string{"invoice:9"}, lease.Fence(), total).Bool(); ok {
			return "accepted"
		}
		return "rejected"
	}
	ctx := context.Background()

	paused, _ := locker.Acquire(core.ContextWithTTL(ctx, 50*time.Millisecond), "invoice:9")
	time.Sleep(100 * time.Millisecond) // a GC pause: the lock expires meanwhile
	next, _ := locker.Acquire(ctx, "invoice:9")
	defer next.Release(ctx)
	fmt.Println("next holder:", write(next, 120))
	fmt.Println("paused holder, awake again:", write(paused, 100))
	// Output:
	// next holder: accepted
	// paused holder, awake again: rejected
}

// With the watchdog a handler may run longer than the TTL: the lease is
// renewed while it is held, and Done closes only if it is lost.
func ExampleWithWatchdog() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithTTL(time.Second), core.WithWatchdog())
	ctx := context.Background()

	lease, err := locker.Acquire(ctx, "report:2024")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	select {
	case <-time.After(1500 * time.Millisecond): // a handler slower than the TTL
		fmt.Println("still held:", client.Get(ctx, lease.Key()).Val() == lease.Token())
	case <-lease.Done():
		fmt.Println("lost")
	}
	// Output: still held: true
}

// An operator reads who holds a lock from the token the store keeps: the
// Locker writes its holder record into every token.
func ExampleParseHolder() {
	token := "ABCDEFGHIJKLMNOPQRSTUVWXYZ.AQAA9snQ-8JokiEFYXBpLTcLL29yZGVycy86aWQIN2YzYTljMWU"
	h, ok := core.ParseHolder(token)
	fmt.Println(ok)
	fmt.Println(h)
	_, ok = core.ParseHolder("ABCDEFGHIJKLMNOPQRSTUVWXYZ") // WithoutHolder's plain token
	fmt.Println(ok)
	// Output:
	// true
	// host api-7 pid 4242 route /orders/:id request 7f3a9c1e since 2026-11-26T12:00:00.123Z exclusive
	// false
}
