// Command quickstart locks and releases a name with reqlock, on an embedded
// Redis (miniredis) unless REDIS_ADDR points at a real one.
//
//	go run ./examples/quickstart
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

func main() {
	addr := os.Getenv("REDIS_ADDR")
	where := "redis at " + addr
	if addr == "" {
		mr, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer mr.Close()
		addr, where = mr.Addr(), "embedded miniredis (set REDIS_ADDR to use a real Redis)"
	}
	fmt.Println("reqlock quickstart on", where)
	if err := run(os.Stdout, addr); err != nil {
		log.Fatal(err)
	}
}

// run walks through acquire, busy, release and a contended name on the Redis
// at addr, printing to w.
func run(w io.Writer, addr string) error {
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()

	locker := core.New(client, core.WithTTL(10*time.Second), core.WithWait(2*time.Second),
		core.WithSpin(2*time.Millisecond, 3*time.Millisecond))
	if err := locker.Err(); err != nil {
		return err
	}
	ctx := context.Background()

	// 1. Lock an order, with a longer TTL for this request only.
	lease, err := locker.Acquire(core.ContextWithTTL(ctx, 30*time.Second), "order:42")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "1. acquired %q (key %s, TTL %v)\n", lease.Name(), lease.Key(), lease.TTL())

	// 2. A second request for the same order is busy after its wait budget.
	impatient := core.New(client, core.WithWait(100*time.Millisecond))
	if _, err := impatient.Acquire(ctx, "order:42"); errors.Is(err, core.ErrTimeout) {
		fmt.Fprintln(w, "2. a second request for order:42 is busy:", err)
	}

	// 3. Release, and the name is free again.
	if err := lease.Release(ctx); err != nil {
		return err
	}
	again, err := impatient.Acquire(ctx, "order:42")
	if err != nil {
		return err
	}
	_ = again.Release(ctx)
	fmt.Fprintln(w, "3. released; the next request got order:42 at once")

	// 4. 8 goroutines × 10 updates of one order: never two at once.
	var inside, overlaps, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				l, err := locker.Acquire(ctx, "order:7")
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // the protected work
				inside.Add(-1)
				done.Add(1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintf(w, "4. %d locked updates of order:7, %d overlaps\n", done.Load(), overlaps.Load())
	return nil
}
