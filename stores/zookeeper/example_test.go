package zkstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// A Locker on ZooKeeper: fenced leases renewed by the watchdog, waiters
// woken by ZooKeeper's watches. The connection reconnects fast through a
// HostProvider. The connection and the store are the caller's to close,
// the store first.
func ExampleNew() {
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false), zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// The session timeout bounds the TTLs (core's default, 10 s, fits).
	store, err := zkstore.New(conn, zkstore.WithRoot("/myapp/locks"), zkstore.WithSessionTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locker := core.NewWithStore(store, core.WithWatchdog(), core.WithFencing(), core.WithNotify())
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		log.Fatal(err) // core.ErrTimeout: busy; core.ErrStorage: ZooKeeper unreachable
	}
	defer lease.Release(ctx)
	// Pass lease.Fence() to the resource, which refuses lower fences.
	fmt.Println(lease.Name(), "held, fenced:", lease.Fence() > 0)
	// Output: order:42 held, fenced: true
}

// Shared holds, numbered permits and several names at once on ZooKeeper:
// readers of a document hold it together, five buyers at most work on a
// hot item's stock, each in its own segment, and a transfer takes both of
// its orders in one step.
func Example_modes() {
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false), zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	store, err := zkstore.New(conn, zkstore.WithRoot("/myapp/locks"), zkstore.WithSessionTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	locker := core.NewWithStore(store, core.WithWatchdog(), core.WithFencing())
	defer locker.Close()
	ctx := context.Background()

	r1, err := locker.Acquire(ctx, "doc:7", core.Shared())
	if err != nil {
		log.Fatal(err)
	}
	defer r1.Release(ctx)
	r2, err := locker.Acquire(ctx, "doc:7", core.Shared())
	if err != nil {
		log.Fatal(err)
	}
	defer r2.Release(ctx)
	fmt.Println("two readers:", r1.Mode(), r2.Mode())

	seg, err := locker.Acquire(ctx, "item:10001", core.Permits(5))
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Release(ctx)
	fmt.Println("stock segment:", seg.Slot())

	both, err := locker.AcquireAll(ctx, []string{"order:2", "order:1"})
	if err != nil {
		log.Fatal(err)
	}
	defer both.Release(ctx)
	fmt.Println("transfer holds:", both.Names())
	// Output:
	// two readers: shared shared
	// stock segment: 0
	// transfer holds: [order:1 order:2]
}
