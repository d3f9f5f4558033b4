package etcdstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/core"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// Lock an order in etcd for the length of a request, with fencing, a
// watchdog and push wake-ups for waiters.
func Example() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{etcdAddr},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // after the store and the Locker: they do not close it

	store, err := etcdstore.New(client) // keys under "/reqlock/"
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locker := core.NewWithStore(store,
		core.WithTTL(10*time.Second), // whole seconds: etcd leases count seconds
		core.WithWait(3*time.Second),
		core.WithFencing(),  // Lease.Fence: the key's create revision
		core.WithWatchdog(), // renewals are keep-alives of the lease
		core.WithNotify(),   // waiters watch the key's deletion
	)
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lease.Release(ctx)

	fmt.Println("locked", lease.Name(), "in etcd key", store.Key(lease.Key()), "fenced:", lease.Fence() > 0)
	// Output: locked order:42 in etcd key /reqlock/reqlock:{order:42} fenced: true
}
