package memcachedstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/core"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
)

var (
	sharedHold = core.Hold{}
	permits3   = core.Hold{N: 3}
)

// share takes a share of key for token in mode h, failing the test if it
// cannot, and returns its slot and fence.
func share(t *testing.T, s *memcachedstore.Store, key, token string, h core.Hold, fenced bool) (int, int64) {
	t.Helper()
	ok, slot, fence, err := s.TryAcquireShare(ctx(t), key, token, 10*time.Second, h, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquireShare(%q, %s) by %s: %v, %v", key, h, token, ok, err)
	}
	return slot, fence
}

// noShare checks that a share of key in mode h is refused without an error.
func noShare(t *testing.T, s *memcachedstore.Store, key, token string, h core.Hold, why string) {
	t.Helper()
	if ok, _, _, err := s.TryAcquireShare(ctx(t), key, token, 10*time.Second, h, false); err != nil || ok {
		t.Fatalf("TryAcquireShare(%q, %s) %s: %v, %v; want false, nil", key, h, why, ok, err)
	}
}

// acquire takes key for token, failing the test if it cannot.
func acquire(t *testing.T, s *memcachedstore.Store, key, token string, ttl time.Duration, fenced bool) int64 {
	t.Helper()
	ok, fence, err := s.TryAcquire(ctx(t), key, token, ttl, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquire(%q) of a free key: %v, %v", key, ok, err)
	}
	return fence
}

// release releases key for token, failing the test if it cannot.
func release(t *testing.T, s *memcachedstore.Store, key, token string) {
	t.Helper()
	if ok, err := s.Release(ctx(t), key, token); err != nil || !ok {
		t.Fatalf("Release(%q) by its holder: %v, %v", key, ok, err)
	}
}

// unshare releases token's share of key, failing the test if it cannot.
func unshare(t *testing.T, s *memcachedstore.Store, key, token string) {
	t.Helper()
	if ok, err := s.ReleaseShare(ctx(t), key, token); err != nil || !ok {
		t.Fatalf("ReleaseShare(%q) by %s: %v, %v", key, token, ok, err)
	}
}

// TestSharedHoldsExcludeExclusive: shared holders hold a key together; while
// one is live, an exclusive acquire fails and an exclusive Release or Extend
// with a share's token does nothing; while the key is held exclusively, a
// share fails; once the last share is released, the key is free.
func TestSharedHoldsExcludeExclusive(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, shared.Addr()), newStore(t, shared.Addr())
	key := uniq(t)

	share(t, a, key, "r1", sharedHold, false)
	share(t, b, key, "r2", sharedHold, false)
	if ok, _, err := b.TryAcquire(ctx(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire while shares are live: %v, %v", ok, err)
	}
	if ok, err := a.Release(ctx(t), key, "r1"); err != nil || ok {
		t.Fatalf("Release with a share's token: %v, %v", ok, err)
	}
	if ok, _, err := a.Extend(ctx(t), key, "r1", 10*time.Second, false); err != nil || ok {
		t.Fatalf("Extend with a share's token: %v, %v", ok, err)
	}
	unshare(t, a, key, "r1")
	if ok, _, err := b.TryAcquire(ctx(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire while one share is live: %v, %v", ok, err)
	}
	if ok, err := a.ReleaseShare(ctx(t), key, "r1"); err != nil || ok {
		t.Fatalf("ReleaseShare of a released share: %v, %v", ok, err)
	}
	unshare(t, a, key, "r2") // taken through b: a looks it up
	acquire(t, b, key, "w", 10*time.Second, false)
	noShare(t, a, key, "r3", sharedHold, "while the key is held exclusively")
	noShare(t, a, key, "p1", permits3, "while the key is held exclusively")
	if ok, err := a.ReleaseShare(ctx(t), key, "w"); err != nil || ok {
		t.Fatalf("ReleaseShare with the exclusive holder's token: %v, %v", ok, err)
	}
	if ok, _, err := a.ExtendShare(ctx(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("ExtendShare with the exclusive holder's token: %v, %v", ok, err)
	}
	release(t, b, key, "w")
	share(t, a, key, "r3", sharedHold, false)
	unshare(t, a, key, "r3")
}

// TestPermitsHaveDistinctSlots: Permits(3) lets three holders in, in slots
// 0, 1 and 2, refuses a fourth, and gives a freed slot to the next one; an
// attempt sent again keeps its slot.
func TestPermitsHaveDistinctSlots(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, shared.Addr()), newStore(t, shared.Addr())
	key := uniq(t)
	for i, s := range []*memcachedstore.Store{a, b, a} {
		if slot, _ := share(t, s, key, fmt.Sprint("p", i), permits3, false); slot != i {
			t.Fatalf("holder %d got slot %d", i, slot)
		}
	}
	noShare(t, b, key, "p3", permits3, "with every slot taken")
	if slot, _ := share(t, b, key, "p1", permits3, false); slot != 1 {
		t.Fatalf("an attempt sent again got slot %d, had 1", slot)
	}
	unshare(t, b, key, "p1")
	if slot, _ := share(t, b, key, "p3", permits3, false); slot != 1 {
		t.Fatalf("the freed slot 1 went to slot %d", slot)
	}
	noShare(t, a, key, "p4", permits3, "with every slot taken again")
	for _, tok := range []string{"p0", "p2", "p3"} {
		unshare(t, a, key, tok)
	}
	acquire(t, a, key, "w", 10*time.Second, false)
	release(t, a, key, "w")
}

// TestModeMismatch: a share in another mode than the live shares' is an
// error wrapping core.ErrModeMismatch, and takes nothing.
func TestModeMismatch(t *testing.T) {
	a := newStore(t, shared.Addr())
	key := uniq(t)
	mismatch := func(token string, h core.Hold) {
		t.Helper()
		ok, _, _, err := a.TryAcquireShare(ctx(t), key, token, 10*time.Second, h, false)
		if ok || !errors.Is(err, core.ErrModeMismatch) {
			t.Fatalf("TryAcquireShare(%s) beside shares of another mode: %v, %v; want ErrModeMismatch", h, ok, err)
		}
	}
	share(t, a, key, "r", sharedHold, false)
	mismatch("p", permits3)
	unshare(t, a, key, "r")
	share(t, a, key, "p", permits3, false)
	mismatch("r", sharedHold)
	mismatch("q", core.Hold{N: 5})
	mismatch("q", core.Hold{N: 30})
	unshare(t, a, key, "p")
	share(t, a, key, "q", core.Hold{N: 5}, false)
	unshare(t, a, key, "q")
	if _, _, _, err := a.TryAcquireShare(ctx(t), key, "x", 10*time.Second, core.Hold{N: -1}, false); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Hold{N: -1}: %v", err)
	}
}

// TestShareExpiresOnItsOwn: a share whose holder stops extending it frees
// its slot at its TTL while another share lives on; once none is live the
// key is free for an exclusive holder.
func TestShareExpiresOnItsOwn(t *testing.T) {
	leakCheck(t)
	a := newStore(t, shared.Addr())
	key := uniq(t)
	one := core.Hold{N: 2}
	if ok, _, _, err := a.TryAcquireShare(ctx(t), key, "dies", time.Second, one, false); err != nil || !ok {
		t.Fatalf("the short share: %v, %v", ok, err)
	}
	share(t, a, key, "lives", one, false)
	noShare(t, a, key, "next", one, "with both slots live")
	// Wait for the dead holder's share to expire: the next holder gets
	// its slot, 0.
	var slot int
	waitFor(t, 30*time.Second, "the short share to expire", func() bool {
		ok, sl, _, err := a.TryAcquireShare(ctx(t), key, "next", 10*time.Second, one, false)
		if err != nil {
			t.Fatal(err)
		}
		slot = sl
		return ok
	})
	if slot != 0 {
		t.Fatalf("the expired share's slot 0 went to slot %d", slot)
	}
	if ok, _, err := a.ExtendShare(ctx(t), key, "dies", 10*time.Second, false); err != nil || ok {
		t.Fatalf("ExtendShare of an expired share: %v, %v", ok, err)
	}
	if ok, _, err := a.ExtendShare(ctx(t), key, "lives", 20*time.Second, false); err != nil || !ok {
		t.Fatalf("ExtendShare of a live share: %v, %v", ok, err)
	}
	unshare(t, a, key, "lives")
	unshare(t, a, key, "next")
	acquire(t, a, key, "w", 10*time.Second, false)
	release(t, a, key, "w")
}

// waitFor polls cond every 100 ms until it holds, failing the test after d
// (a bound far above what the wait takes).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWaitingWriterBlocksNewShares: an exclusive waiter that failed because
// of shares records itself, and no new share is taken while the record is
// live, even after the shares drained; the waiter then takes the key and
// clears the record.
func TestWaitingWriterBlocksNewShares(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, shared.Addr()), newStore(t, shared.Addr())
	key := uniq(t)
	share(t, a, key, "r1", sharedHold, false)
	if ok, _, err := b.TryAcquireWaiting(ctx(t), key, "w", 10*time.Second, 30*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting beside a share: %v, %v", ok, err)
	}
	noShare(t, a, key, "r2", sharedHold, "while a writer waits")
	unshare(t, a, key, "r1")
	noShare(t, a, key, "r2", sharedHold, "after the shares drained, while a writer waits")
	ok, fence, err := b.TryAcquireWaiting(ctx(t), key, "w", 10*time.Second, 30*time.Second, true)
	if err != nil || !ok || fence == 0 {
		t.Fatalf("TryAcquireWaiting of a drained key: %v, %d, %v", ok, fence, err)
	}
	release(t, b, key, "w")
	share(t, a, key, "r2", sharedHold, false)
	unshare(t, a, key, "r2")
}

// TestWaiterRecordExpires: a waiter that gives up lets its record expire
// after its patience; shares are then taken again.
func TestWaiterRecordExpires(t *testing.T) {
	leakCheck(t)
	a := newStore(t, shared.Addr())
	key := uniq(t)
	share(t, a, key, "r1", sharedHold, false)
	if ok, _, err := a.TryAcquireWaiting(ctx(t), key, "w", 10*time.Second, time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting beside a share: %v, %v", ok, err)
	}
	noShare(t, a, key, "r2", sharedHold, "while a writer waits")
	waitFor(t, 30*time.Second, "the waiter record to expire", func() bool {
		ok, _, _, err := a.TryAcquireShare(ctx(t), key, "r2", 10*time.Second, sharedHold, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	unshare(t, a, key, "r1")
	unshare(t, a, key, "r2")
}

// TestShareFences: fenced shares draw fences from the counter of exclusive
// holds: they increase whatever the mode.
func TestShareFences(t *testing.T) {
	a := newStore(t, shared.Addr())
	key := uniq(t)
	f1 := acquire(t, a, key, "w1", 10*time.Second, true)
	release(t, a, key, "w1")
	_, f2 := share(t, a, key, "r1", sharedHold, true)
	_, f3 := share(t, a, key, "r2", sharedHold, true)
	ok, f4, err := a.ExtendShare(ctx(t), key, "r1", 10*time.Second, true)
	if err != nil || !ok {
		t.Fatalf("fenced ExtendShare: %v, %v", ok, err)
	}
	unshare(t, a, key, "r1")
	unshare(t, a, key, "r2")
	f5 := acquire(t, a, key, "w2", 10*time.Second, true)
	release(t, a, key, "w2")
	if !(f1 < f2 && f2 < f3 && f3 < f4 && f4 < f5) {
		t.Fatalf("fences %d (exclusive), %d, %d (shares), %d (share extended), %d (exclusive): not increasing", f1, f2, f3, f4, f5)
	}
}

// TestSharesAtOnce: goroutines of several stores take shares of one name
// in a loop, in random modes, and report every overlap: never more than n
// permit holders, never two permit holders in one slot, never an exclusive
// holder beside anyone.
func TestSharesAtOnce(t *testing.T) {
	leakCheck(t)
	stores := []*memcachedstore.Store{newStore(t, shared.Addr()), newStore(t, shared.Addr()), newStore(t, shared.Addr())}
	for _, mode := range []core.Hold{permits3, sharedHold} {
		t.Run(mode.String(), func(t *testing.T) {
			key := uniq(t)
			var (
				mu        sync.Mutex
				inside    = map[int]string{} // slot -> token (permits); token -> "" (shared)
				readers   int
				exclusive bool
				most      int
				errs      []string
			)
			enter := func(excl bool, slot int, token string) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case excl && (len(inside) > 0 || readers > 0 || exclusive):
					errs = append(errs, fmt.Sprintf("exclusive %s beside %d shares", token, max(len(inside), readers)))
				case !excl && exclusive:
					errs = append(errs, fmt.Sprintf("share %s beside an exclusive holder", token))
				}
				if excl {
					exclusive = true
					return
				}
				if mode.Shared() {
					readers++
					most = max(most, readers)
					return
				}
				if other, ok := inside[slot]; ok {
					errs = append(errs, fmt.Sprintf("%s and %s both in slot %d", other, token, slot))
				}
				inside[slot] = token
				if slot < 0 || slot >= mode.N || len(inside) > mode.N {
					errs = append(errs, fmt.Sprintf("%d permit holders, slot %d", len(inside), slot))
				}
				most = max(most, len(inside))
			}
			leave := func(excl bool, slot int) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case excl:
					exclusive = false
				case mode.Shared():
					readers--
				default:
					delete(inside, slot)
				}
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					s := stores[g%len(stores)]
					for i := range 15 {
						token := fmt.Sprintf("g%d-%d", g, i)
						excl := i%5 == 4
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						var ok bool
						var slot int
						var err error
						if excl {
							ok, _, err = s.TryAcquire(ctx, key, token, 10*time.Second, false)
						} else {
							ok, slot, _, err = s.TryAcquireShare(ctx, key, token, 10*time.Second, mode, false)
						}
						if err != nil || !ok {
							cancel()
							if err != nil {
								t.Error(err)
								return
							}
							time.Sleep(5 * time.Millisecond)
							continue
						}
						enter(excl, slot, token)
						time.Sleep(2 * time.Millisecond)
						leave(excl, slot)
						if excl {
							ok, err = s.Release(ctx, key, token)
						} else {
							ok, err = s.ReleaseShare(ctx, key, token)
						}
						cancel()
						if err != nil || !ok {
							t.Errorf("release of %s: %v, %v", token, ok, err)
							return
						}
					}
				})
			}
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			t.Logf("at most %d shares at once", most)
		})
	}
}

// TestListedButExpiredSharesFreeTheKey: a lock's item that lists only
// shares whose share items are gone (their holders died) is free for an
// exclusive holder before the item itself expires; one that lists a live
// share is not.
func TestListedButExpiredSharesFreeTheKey(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	list := "\x00reqlock-shares 3\n0 5 \"dead\"\n"
	if err := admin.Set(&memcache.Item{Key: key, Value: []byte(list), Expiration: 600}); err != nil {
		t.Fatal(err)
	}
	// A dead share of permits(3) is no mismatch: it is dropped.
	share(t, s, key, "r", sharedHold, false)
	unshare(t, s, key, "r")
	// Nor does it hold the key.
	if err := admin.Set(&memcache.Item{Key: key, Value: []byte(list), Expiration: 600}); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, key, "w0", 10*time.Second, false)
	release(t, s, key, "w0")
	if slot, _ := share(t, s, key, "p", permits3, false); slot != 0 {
		t.Fatalf("a share of a free key got slot %d", slot)
	}
	if ok, _, err := s.TryAcquire(ctx(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire beside a live share: %v, %v", ok, err)
	}
	// p's share item goes, as if it expired: the key is free at once.
	if err := admin.Delete(key + ":share:p"); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, key, "w", 10*time.Second, false)
	if it, err := admin.Get(key); err != nil || string(it.Value) != "w" {
		t.Fatalf("the lock's item after the exclusive acquire: %v, %v", it, err)
	}
	release(t, s, key, "w")
}

// TestShareRoundTrips: the round trips of shares, as the package
// documentation counts them.
func TestShareRoundTrips(t *testing.T) {
	leakCheck(t)
	client, n := counted(t, shared.Addr())
	s := storeOn(t, client)
	key := uniq(t)
	measure := func(what string, want int64, f func()) {
		t.Helper()
		n.Store(0)
		f()
		if got := n.Load(); got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	measure("the first share", 3, func() { share(t, s, key, "r1", sharedHold, false) })
	measure("a second share", 4, func() { share(t, s, key, "r2", sharedHold, false) })
	measure("an extend", 3, func() {
		if ok, _, err := s.ExtendShare(ctx(t), key, "r1", 10*time.Second, false); err != nil || !ok {
			t.Fatalf("ExtendShare: %v, %v", ok, err)
		}
	})
	measure("a release", 3, func() { unshare(t, s, key, "r1") })
	measure("the last release", 3, func() { unshare(t, s, key, "r2") })
}

// TestWaiterRecordOrdersARacingShare: a share attempt that read the lock's
// item before a writer recorded itself as waiting, and stores its list
// after, fails (the writer stored the lock's item again, which changed its
// CAS unique), and then sees the record.
func TestWaiterRecordOrdersARacingShare(t *testing.T) {
	leakCheck(t)
	key := uniq(t)
	writer := newStore(t, shared.Addr())
	var once sync.Once
	client := hookedClient(t, shared.Addr(), func(cmd []byte) {
		if bytes.HasPrefix(cmd, []byte("cas "+key+" ")) {
			once.Do(func() { // the writer comes between the gets and the cas
				if ok, _, err := writer.TryAcquireWaiting(ctx(t), key, "w", 10*time.Second, 30*time.Second, false); err != nil || ok {
					t.Errorf("TryAcquireWaiting beside a share: %v, %v", ok, err)
				}
			})
		}
	})
	s := storeOn(t, client)
	share(t, writer, key, "r1", sharedHold, false)
	noShare(t, s, key, "r2", sharedHold, "whose cas came after a writer recorded itself")
	unshare(t, writer, key, "r1")
	if ok, _, err := writer.TryAcquireWaiting(ctx(t), key, "w", 10*time.Second, 30*time.Second, false); err != nil || !ok {
		t.Fatalf("TryAcquireWaiting after the shares drained: %v, %v", ok, err)
	}
	release(t, writer, key, "w")
}

// TestShareAttemptCutByItsContextIsUndone: a share attempt whose context
// ends before its add of the list reaches memcached returns the context's
// error, and the add, arriving late, is undone in the background well
// before the share's TTL: the list no longer holds the share, and the slot
// is free. The add is held back until the attempt has returned, and the
// test waits for memcached's answer to it: no timer decides what comes
// first.
func TestShareAttemptCutByItsContextIsUndone(t *testing.T) {
	leakCheck(t)
	key := uniq(t)
	admin := newClient(t, shared.Addr())
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned, landed := make(chan struct{}), make(chan struct{})
	var once, stored sync.Once
	var sent atomic.Bool
	client := newClient(t, shared.Addr())
	var d net.Dialer
	client.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &spyConn{Conn: conn,
			write: func(cmd []byte) {
				if bytes.HasPrefix(cmd, []byte("add "+key+" ")) {
					once.Do(func() {
						cancel()
						<-returned // the add goes out after the attempt has failed
						sent.Store(true)
					})
				}
			},
			read: func(reply []byte) {
				if sent.Load() && bytes.Contains(reply, []byte("STORED")) {
					stored.Do(func() { close(landed) })
				}
			},
		}, nil
	}
	s := storeOn(t, client)
	_, _, _, err := s.TryAcquireShare(c, key, "late", time.Minute, core.Hold{N: 1}, false)
	close(returned)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquireShare cut by its context: %v; want context.Canceled", err)
	}
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		t.Fatal("the late add never landed: nothing to check")
	}
	deadline := time.Now().Add(20 * time.Second) // well within the TTL of a minute
	for {
		it, err := admin.Get(key)
		if errors.Is(err, memcache.ErrCacheMiss) || err == nil && !bytes.Contains(it.Value, []byte(`"late"`)) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the late add of a share attempt cut by its context was not undone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	share(t, newStore(t, shared.Addr()), key, "next", core.Hold{N: 1}, false)
}

// spyConn shows the commands written to a connection and the replies read
// from it.
type spyConn struct {
	net.Conn
	write, read func([]byte)
}

func (c *spyConn) Write(p []byte) (int, error) {
	c.write(p)
	return c.Conn.Write(p)
}

func (c *spyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read(p[:n])
	return n, err
}
