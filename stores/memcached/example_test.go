package memcachedstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/core"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
)

// Lock an order in memcached, with a fencing token timed by the server's
// clock.
func Example() {
	client := memcache.New(memcachedAddr)
	defer client.Close()
	store, err := memcachedstore.New(client, memcachedstore.WithServerClock(memcachedAddr))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close() // after the Locker: NewWithStore does not close it
	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithFencing())
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lease.Release(ctx)
	fmt.Println("locked", lease.Name(), "with a fencing token:", lease.Fence() > 0)
	// Output: locked order:42 with a fencing token: true
}
