package hotspot_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// Put a Guard in front of a Locker; goroutines of this process that want the
// same hot name queue locally, and one at a time contends in Redis.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	guard := hotspot.New(hotspot.WithCapacity(1000), hotspot.WithKeys("product:1"))
	locker := core.New(client, core.WithHandlers(guard))

	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := locker.Acquire(ctx, "product:1")
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			// ... one request in the whole fleet runs here for product:1 ...
		}()
	}
	wg.Wait()
	s := guard.Stats()
	fmt.Printf("%d acquires through the local lock; %d local lock kept\n", s.Hits, s.Size)
	// Output: 4 acquires through the local lock; 1 local lock kept
}

// With hand-off, a release passes the Redis lock to a goroutine of this
// process that waits for the same name, without a release and a re-acquire,
// at most 3 times in a row; then the lock goes back to Redis so that other
// processes get their turn.
func ExampleWithHandoff() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	guard := hotspot.New(hotspot.WithHandoff(3))
	if err := guard.Err(); err != nil {
		panic(err) // invalid options
	}
	locker := core.New(client, core.WithHandlers(guard))
	_ = locker // acquire and release as usual

	// Later, for an exporter:
	fmt.Printf("%+v\n", guard.Stats())
	// Output: {Hits:0 Bypasses:0 Evictions:0 Handoffs:0 Size:0}
}
