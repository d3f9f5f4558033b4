package rueidisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
)

// Lock an order through rueidis, with fencing and push wake-ups. A go-redis
// Locker (core.New) on the same Redis shares the lock.
func Example() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	store, err := rueidisstore.New(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close() // after the Locker: NewWithStore does not close it
	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithFencing(), core.WithNotify())
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lease.Release(ctx)
	fmt.Println("locked", lease.Name(), "in key", lease.Key(), "with a fencing token:", lease.Fence() > 0)
	// Output: locked order:42 in key reqlock:{order:42} with a fencing token: true
}
