package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
)

func TestClusterFormsMigratesAndFailsOver(t *testing.T) {
	leakCheck(t)
	cl := redistest.StartCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cl.Client(t)
	// Keys in all three shards: every slot is served.
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := c.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	const key = "{user:1}:lock"
	if err := c.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	from, err := cl.MasterOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := cl.Slot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var to *redistest.Server
	for _, n := range cl.Nodes[:3] {
		if n != from {
			to = n
			break
		}
	}
	if err := cl.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	if m, err := cl.MasterOf(ctx, key); err != nil || m != to {
		t.Fatalf("after the migration the slot is served by %v (%v), want %s", m, err, to.Addr())
	}
	if got := c.Get(ctx, key).Val(); got != "v" {
		t.Fatalf("the key did not move with its slot: %q", got)
	}
	if d := c.PTTL(ctx, key).Val(); d <= 0 || d > time.Minute {
		t.Fatalf("the key's TTL did not move with it: %v", d)
	}

	old, err := cl.KillMaster(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if old != to {
		t.Fatalf("KillMaster stopped %s, want the master of the slot %s", old.Addr(), to.Addr())
	}
	now, err := cl.MasterOf(ctx, key)
	if err != nil || now == old {
		t.Fatalf("no new master after the failover: %v, %v", now, err)
	}
	deadline := time.Now().Add(30 * time.Second) // a loaded machine
	for c.Set(ctx, "after-failover", "1", 0).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the cluster client did not find the new master")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSentinelFailover(t *testing.T) {
	leakCheck(t)
	d := redistest.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := d.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	first, err := d.Master(ctx)
	if err != nil || first != d.Data[0] {
		t.Fatalf("master = %v, %v; want the first data node", first, err)
	}
	old, err := d.KillMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := d.Master(ctx); err != nil || m == old {
		t.Fatalf("master after failover = %v, %v", m, err)
	}
	deadline := time.Now().Add(30 * time.Second) // a loaded machine
	for {
		got, err := c.Get(ctx, "k").Result()
		if got == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failover client did not reach the promoted replica: %q, %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNodes(t *testing.T) {
	leakCheck(t)
	ns := redistest.StartNodes(t, 3)
	cs := ns.Clients(t)
	ctx := context.Background()
	for i, c := range cs {
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cs {
		if got, _ := c.Get(ctx, "k").Int(); got != i {
			t.Fatalf("node %d holds %d: the nodes are not independent", i, got)
		}
	}
	if len(ns.Addrs()) != 3 || ns.Addrs()[0] == ns.Addrs()[1] {
		t.Fatalf("addrs = %v", ns.Addrs())
	}
}
