package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// TestReleaseOnACutLinkIsFinishedWhenItHeals: a Release that fails because
// the link to etcd is cut never reached etcd; the store (a core.Undoer)
// finishes it in the background, so that once the link heals the name is
// free at once, not at the end of its TTL (30 s here).
func TestReleaseOnACutLinkIsFinishedWhenItHeals(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, newClient(t, proxy.Addr()))
	admin := newClient(t, "")
	l := core.NewWithStore(s, core.WithTTL(30*time.Second), core.WithIOTimeout(time.Second))
	defer l.Close()
	ctx := context.Background()

	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	if err := lease.Release(ctx); !errors.Is(err, core.ErrStorage) {
		proxy.Restore()
		t.Fatalf("Release on a cut link = %v, want ErrStorage", err)
	}
	if kvs := get(t, admin, s, lease.Key()).Kvs; len(kvs) != 1 || string(kvs[0].Value) != lease.Token() {
		proxy.Restore()
		t.Fatalf("the key after a Release that could not reach etcd: %v; want it held by the lease's token", kvs)
	}
	proxy.Restore()
	healed := time.Now()
	for len(get(t, admin, s, lease.Key()).Kvs) != 0 {
		if time.Since(healed) > 15*time.Second {
			t.Fatal("the name is still held 15 s after the link healed (TTL 30 s): the failed Release was not finished")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("free %v after the link healed", time.Since(healed).Round(time.Millisecond))
}

// TestUndoLeavesAnotherHolder: the background end of a failed Release
// never deletes the key once another token holds it.
func TestUndoLeavesAnotherHolder(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	key := uniq(t)
	acquire(t, s, key, "other", 30*time.Second, false)
	// An expired context: the first try goes to the background.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Undo(ctx, key, "gone", 30*time.Second, time.Now())
	time.Sleep(time.Second) // four tries
	if kvs := get(t, newClient(t, ""), s, key).Kvs; len(kvs) != 1 || string(kvs[0].Value) != "other" {
		t.Fatalf("after Undo with another token, the key is %v; want it held by \"other\"", kvs)
	}
	release(t, s, key, "other")
}
