package zkstore_test

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestAcquireAll: TryAcquireAll takes every key or none: free keys are all
// taken, with a fence each; when one key is held (exclusively or by a
// share) none is, and the attempt leaves no node behind; a re-sent attempt
// keeps the keys; each key is released on its own.
func TestAcquireAll(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	const ttl = time.Minute
	keys := []string{"a", "b", "c"}
	ok, fences, err := a.TryAcquireAll(ctx(t), keys, "t1", ttl, true)
	if !ok || err != nil || len(fences) != len(keys) {
		t.Fatalf("TryAcquireAll of free keys: %v, %v, %v", ok, fences, err)
	}
	for i, f := range fences {
		if f <= 0 {
			t.Errorf("fence of %q is %d", keys[i], f)
		}
	}
	if ok, fences2, err := a.TryAcquireAll(ctx(t), keys, "t1", ttl, true); !ok || err != nil || fences2[0] <= fences[0] {
		t.Errorf("a re-sent TryAcquireAll: %v, %v, %v; want the keys again with higher fences than %v", ok, fences2, err, fences)
	}
	for _, k := range keys {
		if ok, _, err := b.TryAcquire(ctx(t), k, "other", ttl, false); ok || err != nil {
			t.Errorf("TryAcquire(%q) held by TryAcquireAll: %v, %v; want false", k, ok, err)
		}
	}
	for _, k := range keys {
		if ok, err := a.Release(ctx(t), k, "t1"); !ok || err != nil {
			t.Errorf("Release(%q): %v, %v", k, ok, err)
		}
	}
	// One key held: none is taken, and nothing is left behind.
	mustAcquire(t, b, "b", "holder", ttl, false)
	if ok, _, err := a.TryAcquireAll(ctx(t), keys, "t2", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquireAll with one key held: %v, %v; want false", ok, err)
	}
	for _, k := range []string{"a", "c"} {
		if got := children(t, conn, r+"/"+k); len(got) != 0 {
			t.Errorf("a failed TryAcquireAll left %q under %q", got, k)
		}
	}
	if ok, err := b.Release(ctx(t), "b", "holder"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	mustShare(t, b, "c", "reader", ttl, sharedHold)
	if ok, _, err := a.TryAcquireAll(ctx(t), keys, "t3", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquireAll with a shared key: %v, %v; want false", ok, err)
	}
	mustReleaseShare(t, b, "c", "reader")
	ok, _, err = a.TryAcquireAll(ctx(t), keys, "t3", ttl, false)
	if !ok || err != nil {
		t.Fatalf("TryAcquireAll of keys freed again: %v, %v", ok, err)
	}
	for _, k := range keys {
		if ok, err := b.Release(ctx(t), k, "t3"); !ok || err != nil {
			t.Errorf("Release(%q) by another store: %v, %v", k, ok, err)
		}
	}
	// Bad input.
	for _, bad := range [][]string{nil, {"a", "a"}} {
		if ok, _, err := a.TryAcquireAll(ctx(t), bad, "t4", ttl, false); ok || err == nil {
			t.Errorf("TryAcquireAll(%q): %v, %v; want an error", bad, ok, err)
		}
	}
	if ok, _, err := a.TryAcquireAll(ctx(t), keys, "t4", 0, false); ok || err == nil {
		t.Errorf("TryAcquireAll with TTL 0: %v, %v; want an error", ok, err)
	}
}

// TestAcquireAllOverlap: goroutines on three connections take the keys x
// and y with TryAcquireAll, in either order, and each key alone with
// TryAcquire; no key ever has two holders at once.
func TestAcquireAllOverlap(t *testing.T) {
	leakCheck(t)
	x, y := uniq(t), uniq(t)
	const ttl = 5 * time.Second
	var inX, inY, holds, alls atomic.Int64
	stores := make([]*zkstore.Store, 3)
	for i := range stores {
		stores[i] = newStore(t, dial(t, "", 0))
	}
	enter := func(c *atomic.Int64, what string) {
		if c.Add(1) > 1 {
			t.Errorf("two holders of %s at once", what)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range stores {
		for g := range 3 {
			wg.Go(func() {
				bg := context.Background()
				for n := 0; contend(start, &holds); n++ {
					tok := rand.Text()
					var keys []string
					var in []*atomic.Int64
					switch (i + g + n) % 4 {
					case 0:
						keys, in = []string{x, y}, []*atomic.Int64{&inX, &inY}
					case 1:
						keys, in = []string{y, x}, []*atomic.Int64{&inY, &inX}
					case 2:
						keys, in = []string{x}, []*atomic.Int64{&inX}
					case 3:
						keys, in = []string{y}, []*atomic.Int64{&inY}
					}
					var ok bool
					var err error
					if len(keys) == 2 {
						ok, _, err = s.TryAcquireAll(bg, keys, tok, ttl, false)
					} else {
						ok, _, err = s.TryAcquire(bg, keys[0], tok, ttl, false)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					for j, c := range in {
						enter(c, keys[j])
					}
					holds.Add(1)
					if len(keys) == 2 {
						alls.Add(1)
					}
					time.Sleep(time.Millisecond)
					for _, c := range in {
						c.Add(-1)
					}
					for _, k := range keys {
						if ok, err := s.Release(bg, k, tok); !ok || err != nil {
							t.Errorf("Release(%q): %v, %v", k, ok, err)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	if holds.Load() < 10 {
		t.Errorf("only %d holds in %v", holds.Load(), maxContention)
	}
	t.Logf("%d holds, %d of both keys", holds.Load(), alls.Load())
}
