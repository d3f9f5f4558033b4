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

// Waiters queue in Redis in arrival order, and a release grants the lock to
// the first of them (core.WithFair). Give WithFair to every Locker of the
// name, on go-redis (core.New) as on rueidis: they share one queue.
func Example_fair() {
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
	defer store.Close()
	locker := core.NewWithStore(store, core.WithFair())
	defer locker.Close()

	ctx := context.Background()
	first, err := locker.Acquire(ctx, "report:7")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	granted := make(chan *core.Lease)
	go func() {
		lease, err := locker.Acquire(ctx, "report:7") // queues behind first
		if err != nil {
			fmt.Println("not acquired:", err)
		}
		granted <- lease
	}()
	time.Sleep(100 * time.Millisecond) // the second Acquire is in line
	_ = first.Release(ctx)             // grants the lock to the second
	if second := <-granted; second != nil {
		fmt.Println("granted", second.Name())
		_ = second.Release(ctx)
	}
	// Output: granted report:7
}
