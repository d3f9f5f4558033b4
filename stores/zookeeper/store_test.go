package zkstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// ctx returns the context of one store call in a test.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// root returns a root of the test's own, so that it can look at its nodes.
func root(t testing.TB) string {
	return "/reqlock-test/" + strings.ToLower(rand.Text()[:10])
}

// mustAcquire takes key for token, failing the test if it cannot.
func mustAcquire(t testing.TB, s core.Store, key, token string, ttl time.Duration, fenced bool) int64 {
	t.Helper()
	ok, fence, err := s.TryAcquire(ctx(t), key, token, ttl, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquire(%q) of a free key: %v, %v", key, ok, err)
	}
	return fence
}

// children returns the names of the children of p (nil if p is missing).
func children(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	names, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// eventually polls cond every 10 ms until it holds, failing the test with
// what after limit.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	leakCheck(t)
	if _, err := zkstore.New(nil); err == nil {
		t.Error("New(nil) returned no error")
	}
	conn := dial(t, "", 0)
	for name, opt := range map[string]zkstore.Option{
		"relative root":   zkstore.WithRoot("locks"),
		"empty root":      zkstore.WithRoot(""),
		"empty element":   zkstore.WithRoot("/a//b"),
		"dot element":     zkstore.WithRoot("/a/../b"),
		"reserved root":   zkstore.WithRoot("/zookeeper/locks"),
		"control char":    zkstore.WithRoot("/a\x01b"),
		"empty ACL":       zkstore.WithACL(),
		"negative linger": zkstore.WithWatchLinger(-time.Second),
		"nil option":      nil,
	} {
		s, err := zkstore.New(conn, opt)
		if err == nil || s != nil {
			t.Errorf("%s: New returned %v, %v; want an error", name, s, err)
		} else if !strings.HasPrefix(err.Error(), "zkstore: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
	for _, r := range []string{"/", "/a", "/a/b/", "/reqlock"} {
		s, err := zkstore.New(conn, zkstore.WithRoot(r))
		if err != nil {
			t.Errorf("WithRoot(%q): %v", r, err)
			continue
		}
		_ = s.Close()
	}
	s := newStore(t, conn)
	if _, _, err := s.TryAcquire(ctx(t), uniq(t), "tok", 0, false); err == nil {
		t.Error("TryAcquire with TTL 0 returned no error")
	}
}

// TestKeysAreEscaped: keys with '/', '%', dots, an empty key and non-ASCII
// bytes each get a parent node of their own directly under the root, and
// lock independently.
func TestKeysAreEscaped(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	s := newStore(t, conn, zkstore.WithRoot(r))
	keys := []string{"a/b", "a%2Fb", "a", "b", ".", "..", "", "%", "ключ:{1}", "x\x00y", "a b"}
	for i, key := range keys {
		mustAcquire(t, s, key, "t"+string(rune('a'+i)), time.Minute, false)
	}
	if got := children(t, conn, r); len(got) != len(keys) {
		t.Fatalf("root has %d children %q; want one per key (%d)", len(got), got, len(keys))
	}
	for i, key := range keys {
		ok, err := s.Release(ctx(t), key, "t"+string(rune('a'+i)))
		if err != nil || !ok {
			t.Errorf("Release(%q): %v, %v", key, ok, err)
		}
	}
}

// TestFencesIncreaseAcrossHolders: holders on several connections take one
// key in turn, each drawing fences at its acquire and at an Extend; in the
// order in which they held the lock, the fences strictly increase. A
// contender's node is often created before the holder's last fenced
// Extend, so a fence taken from the node's czxid would go back.
func TestFencesIncreaseAcrossHolders(t *testing.T) {
	leakCheck(t)
	key := uniq(t)
	var mu sync.Mutex // held while a holder records its fences
	var last int64
	var bad, holds atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		s := newStore(t, dial(t, "", 0))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) {
					tok := rand.Text()
					ok, fence, err := s.TryAcquire(context.Background(), key, tok, 10*time.Second, true)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					mu.Lock()
					if fence <= last {
						bad.Add(1)
					}
					last = fence
					ok, fence, err = s.Extend(context.Background(), key, tok, 10*time.Second, true)
					if err != nil || !ok {
						t.Errorf("Extend by the holder: %v, %v", ok, err)
					}
					if fence <= last {
						bad.Add(1)
					}
					last = fence
					holds.Add(1)
					mu.Unlock()
					if ok, err := s.Release(context.Background(), key, tok); err != nil || !ok {
						t.Errorf("Release by the holder: %v, %v", ok, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d of %d holds drew a fence not above the one before", n, 2*holds.Load())
	}
	if holds.Load() < 10 {
		t.Errorf("only %d holds in 3s", holds.Load())
	}
}

// TestWatchWakesOnReleaseAndExpiry: a watcher of a key is woken when the
// holder releases it, and when a holder's TTL runs out (by the server's
// clock) while it neither releases nor extends; not before.
func TestWatchWakesOnReleaseAndExpiry(t *testing.T) {
	leakCheck(t)
	watcher := newStore(t, dial(t, "", 0))
	holder := newStore(t, dial(t, "", 0))
	key := uniq(t)
	c, stop := watcher.Watch(key)
	defer stop()
	quiet := func(d time.Duration, what string) {
		t.Helper()
		select {
		case <-c:
			t.Fatalf("a notice %s", what)
		case <-time.After(d):
		}
	}

	// Release.
	mustAcquire(t, holder, key, "first", time.Minute, false)
	quiet(200*time.Millisecond, "while the key was held")
	if ok, _, _ := holder.Extend(ctx(t), key, "first", time.Minute, false); !ok {
		t.Fatal("Extend by the holder failed")
	}
	quiet(200*time.Millisecond, "after the holder's Extend")
	if ok, err := holder.Release(ctx(t), key, "first"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s of the release")
	}

	// Expiry.
	const ttl = 700 * time.Millisecond
	start := time.Now()
	mustAcquire(t, holder, key, "second", ttl, false)
	select {
	case <-c:
		if took := time.Since(start); took < ttl-50*time.Millisecond {
			t.Fatalf("a notice %v after an acquire with TTL %v", took, ttl)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatalf("no notice within 5s of the holder's expiry")
	}
	_, _ = holder.Release(ctx(t), key, "second")
}

// TestSessionExpiryLosesLock: a holder whose session expires (its
// connection cut for longer than the session timeout) loses its node:
// another process takes the key before the lock's TTL has run out, and the
// former holder's Extend and Release report false once it is back.
func TestSessionExpiryLosesLock(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	// A short session, but not so short that a loaded machine's late
	// pings end it before the cut.
	const session = 2 * time.Second
	holder := newStore(t, dial(t, proxy.Addr(), session))
	other := newStore(t, dial(t, "", 0))
	key := uniq(t)
	mustAcquire(t, holder, key, "old", time.Minute, false)
	if ok, _, _ := other.TryAcquire(ctx(t), key, "new", time.Minute, false); ok {
		t.Fatal("another process took a held key")
	}
	proxy.Cut()
	eventually(t, 10*time.Second, "the key was not free after the holder's session expired", func() bool {
		ok, _, err := other.TryAcquire(ctx(t), key, "new", time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	proxy.Restore()
	eventually(t, 10*time.Second, "the former holder's Extend did not report false", func() bool {
		ok, _, err := holder.Extend(ctx(t), key, "old", time.Minute, false)
		if ok {
			t.Fatal("the former holder's Extend reported true after its session expired")
		}
		return err == nil
	})
	if ok, err := holder.Release(ctx(t), key, "old"); ok || err != nil {
		t.Errorf("Release by the former holder: %v, %v; want false", ok, err)
	}
	if ok, err := other.Release(ctx(t), key, "new"); !ok || err != nil {
		t.Errorf("Release by the new holder: %v, %v", ok, err)
	}
}

// TestNodesVanish: a busy attempt leaves no node behind, and once nobody
// holds a key its parent node goes too (a container node, deleted by
// ZooKeeper).
func TestNodesVanish(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	key := "vanish"
	mustAcquire(t, a, key, "holder", time.Minute, false)
	for range 5 {
		if ok, _, err := b.TryAcquire(ctx(t), key, rand.Text(), time.Minute, false); ok || err != nil {
			t.Fatalf("TryAcquire of a held key: %v, %v", ok, err)
		}
	}
	dir := r + "/" + key
	if got := children(t, conn, dir); len(got) != 1 {
		t.Fatalf("%s has children %q after busy attempts; want the holder's alone", dir, got)
	}
	if ok, err := a.Release(ctx(t), key, "holder"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	limit := 20*servers.ZooKeeperContainerCheck + 5*time.Second
	eventually(t, limit, dir+" still exists after its last lock was released", func() bool {
		ok, _, err := conn.Exists(dir)
		if err != nil {
			t.Fatal(err)
		}
		return !ok
	})
	// The key can be taken again once its parent is gone (made again).
	mustAcquire(t, b, key, "again", time.Minute, false)
	if ok, err := b.Release(ctx(t), key, "again"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
}

// TestFailedAttemptIsUndone: an attempt whose context ends before the
// server's reply (a slow link) fails with the context's error, and the node
// its create made is deleted in the background: the key is free soon
// after, long before the attempt's TTL.
func TestFailedAttemptIsUndone(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	slow := newStore(t, dial(t, proxy.Addr(), 0))
	oconn := dial(t, "", 0)
	other := newStore(t, oconn)
	key := uniq(t)
	mustAcquire(t, other, key, "first", time.Minute, false) // the key's parent node exists
	proxy.SetDelay(100 * time.Millisecond)
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := slow.TryAcquire(c, key, "late", time.Minute, false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire cut by its context: %v; want context.DeadlineExceeded", err)
	}
	// The create arrives late (the proxy delays it), and its node with it;
	// the clean-up's delete cannot arrive before a round trip later.
	dir := "/reqlock/" + strings.ReplaceAll(key, "#", "%23")
	eventually(t, 5*time.Second, "the late create's node never appeared", func() bool {
		for _, name := range children(t, oconn, dir) {
			if strings.HasPrefix(name, "l-late-") {
				return true
			}
		}
		return false
	})
	proxy.SetDelay(0)
	if ok, err := other.Release(ctx(t), key, "first"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	eventually(t, 10*time.Second, "the key was still held by the failed attempt", func() bool {
		ok, _, err := other.TryAcquire(ctx(t), key, "next", time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	if ok, err := other.Release(ctx(t), key, "next"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
}

// TestExpiredHolderIsDeleted: a contender deletes the node of a holder
// whose TTL ran out by the server's clock and takes the key, while the
// holder's session lives; the holder's Extend then reports false.
func TestExpiredHolderIsDeleted(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	const ttl = 300 * time.Millisecond
	mustAcquire(t, a, "k", "a", ttl, false)
	time.Sleep(ttl + 50*time.Millisecond)
	mustAcquire(t, b, "k", "b", time.Minute, false)
	if got := children(t, conn, r+"/k"); len(got) != 1 || !strings.HasPrefix(got[0], "l-b-") {
		t.Errorf("children %q; want the new holder's alone", got)
	}
	if ok, _, err := a.Extend(ctx(t), "k", "a", time.Minute, false); ok || err != nil {
		t.Errorf("Extend by the expired holder: %v, %v; want false", ok, err)
	}
	if ok, err := b.Release(ctx(t), "k", "b"); !ok || err != nil {
		t.Errorf("Release: %v, %v", ok, err)
	}
}

// TestExtendAfterExpiryDoesNotRevive: an Extend that reaches the server
// after the lock's TTL ran out reports false and leaves the key free, even
// though nobody deleted the node meanwhile; so does a Release (false).
func TestExtendAfterExpiryDoesNotRevive(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	const ttl = 200 * time.Millisecond
	mustAcquire(t, a, "k", "a", ttl, false)
	time.Sleep(ttl + 50*time.Millisecond)
	if ok, _, err := a.Extend(ctx(t), "k", "a", time.Minute, false); ok || err != nil {
		t.Errorf("Extend after expiry: %v, %v; want false", ok, err)
	}
	if got := children(t, conn, r+"/k"); len(got) != 0 {
		t.Errorf("children %q after a late Extend; want none", got)
	}
	mustAcquire(t, a, "k", "b", ttl, false)
	time.Sleep(ttl + 50*time.Millisecond)
	if ok, err := a.Release(ctx(t), "k", "b"); ok || err != nil {
		t.Errorf("Release after expiry: %v, %v; want false", ok, err)
	}
	if got := children(t, conn, r+"/k"); len(got) != 0 {
		t.Errorf("children %q after a late Release; want none", got)
	}
}

// TestOtherStoreReleases: a Store that did not take a lock (another
// instance on another connection, as after a restart of the caller's
// bookkeeping) finds the holder's node by its token and extends and
// releases it; it refuses a token that does not hold the key.
func TestOtherStoreReleases(t *testing.T) {
	leakCheck(t)
	a := newStore(t, dial(t, "", 0))
	b := newStore(t, dial(t, "", 0))
	key := uniq(t)
	mustAcquire(t, a, key, "tok", time.Minute, false)
	if ok, _, err := b.Extend(ctx(t), key, "other", time.Minute, false); ok || err != nil {
		t.Errorf("Extend with another token: %v, %v", ok, err)
	}
	if ok, fence, err := b.Extend(ctx(t), key, "tok", time.Minute, true); !ok || fence <= 0 || err != nil {
		t.Errorf("Extend through another store: %v, %d, %v", ok, fence, err)
	}
	if ok, err := b.Release(ctx(t), key, "tok"); !ok || err != nil {
		t.Errorf("Release through another store: %v, %v", ok, err)
	}
	if ok, err := a.Release(ctx(t), key, "tok"); ok || err != nil {
		t.Errorf("second Release: %v, %v; want false", ok, err)
	}
}

// TestOverlapAcrossConnections: goroutines on four connections take one
// key with TryAcquire, hold it briefly and release it; no two critical
// sections overlap, with short TTLs that holders renew.
func TestOverlapAcrossConnections(t *testing.T) {
	leakCheck(t)
	key := uniq(t)
	var inside, overlaps, holds atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		s := newStore(t, dial(t, "", 0))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) {
					tok := rand.Text()
					ok, _, err := s.TryAcquire(context.Background(), key, tok, time.Second, false)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					holds.Add(1)
					time.Sleep(time.Millisecond)
					if ok, _, err := s.Extend(context.Background(), key, tok, time.Second, false); !ok || err != nil {
						t.Errorf("Extend by the holder: %v, %v", ok, err)
					}
					inside.Add(-1)
					if ok, err := s.Release(context.Background(), key, tok); !ok || err != nil {
						t.Errorf("Release by the holder: %v, %v", ok, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d of %d critical sections overlapped another", n, holds.Load())
	}
	if holds.Load() < 10 {
		t.Errorf("only %d holds in 3s", holds.Load())
	}
}

// TestServerRestart: a lock outlives a restart of the ZooKeeper server
// (its data directory kept) while its holder's session lives: the holder
// extends it once its connection is back, another process still finds the
// key held, and the fences drawn after the restart are higher than before.
func TestServerRestart(t *testing.T) {
	leakCheck(t)
	srv := servers.StartZooKeeper(t)
	const session = 30 * time.Second
	holder := newStore(t, dial(t, srv.Addr(), session))
	other := newStore(t, dial(t, srv.Addr(), session))
	key := uniq(t)
	before := mustAcquire(t, holder, key, "holder", time.Minute, true)
	srv.Stop()
	srv.Restart(t)
	var fence int64
	eventually(t, 20*time.Second, "the holder could not extend its lock after the restart", func() bool {
		ok, f, err := holder.Extend(ctx(t), key, "holder", time.Minute, true)
		if err == nil && !ok {
			t.Fatal("the holder's lock was lost in the restart")
		}
		fence = f
		return ok
	})
	if fence <= before {
		t.Errorf("fence %d after the restart; want above %d", fence, before)
	}
	eventually(t, 20*time.Second, "the other process could not reach the restarted server", func() bool {
		ok, _, err := other.TryAcquire(ctx(t), key, "other", time.Minute, true)
		if ok {
			t.Fatal("another process took the key held across the restart")
		}
		return err == nil
	})
	if ok, err := holder.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	if next := mustAcquire(t, other, key, "other", time.Minute, true); next <= fence {
		t.Errorf("fence %d of the next holder; want above %d", next, fence)
	}
}
