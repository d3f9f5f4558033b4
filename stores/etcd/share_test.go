package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

var (
	shared0  = core.Hold{}
	permits3 = core.Hold{N: 3}
)

// share takes a share of key for token in mode h, failing the test if it
// cannot, and returns its slot and fence.
func share(t *testing.T, s *etcdstore.Store, key, token string, h core.Hold, fenced bool) (int, int64) {
	t.Helper()
	ok, slot, fence, err := s.TryAcquireShare(call(t), key, token, 10*time.Second, h, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquireShare(%q, %s) by %s: %v, %v", key, h, token, ok, err)
	}
	return slot, fence
}

// noShare checks that a share of key in mode h is refused without an error.
func noShare(t *testing.T, s *etcdstore.Store, key, token string, h core.Hold, why string) {
	t.Helper()
	if ok, _, _, err := s.TryAcquireShare(call(t), key, token, 10*time.Second, h, false); err != nil || ok {
		t.Fatalf("TryAcquireShare(%q, %s) %s: %v, %v; want false, nil", key, h, why, ok, err)
	}
}

// unshare releases token's share of key, failing the test if it cannot.
func unshare(t *testing.T, s *etcdstore.Store, key, token string) {
	t.Helper()
	if ok, err := s.ReleaseShare(call(t), key, token); err != nil || !ok {
		t.Fatalf("ReleaseShare(%q) by %s: %v, %v", key, token, ok, err)
	}
}

// TestSharedHoldsExcludeExclusive: shared holders hold a key together; while
// one is live, an exclusive acquire fails and an exclusive Release or Extend
// with a share's token does nothing; while the key is held exclusively, a
// share fails; once the last share is released, the key is free.
func TestSharedHoldsExcludeExclusive(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	key := uniq(t)

	share(t, a, key, "r1", shared0, false)
	share(t, b, key, "r2", shared0, false)
	if ok, _, err := b.TryAcquire(call(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire while shares are live: %v, %v", ok, err)
	}
	if ok, err := a.Release(call(t), key, "r1"); err != nil || ok {
		t.Fatalf("Release with a share's token: %v, %v", ok, err)
	}
	if ok, _, err := a.Extend(call(t), key, "r1", 10*time.Second, false); err != nil || ok {
		t.Fatalf("Extend with a share's token: %v, %v", ok, err)
	}
	unshare(t, a, key, "r1")
	if ok, _, err := b.TryAcquire(call(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire while one share is live: %v, %v", ok, err)
	}
	if ok, err := a.ReleaseShare(call(t), key, "r1"); err != nil || ok {
		t.Fatalf("ReleaseShare of a released share: %v, %v", ok, err)
	}
	unshare(t, a, key, "r2") // taken through b: a looks it up
	acquire(t, b, key, "w", 10*time.Second, false)
	noShare(t, a, key, "r3", shared0, "while the key is held exclusively")
	noShare(t, a, key, "p1", permits3, "while the key is held exclusively")
	if ok, err := a.ReleaseShare(call(t), key, "w"); err != nil || ok {
		t.Fatalf("ReleaseShare with the exclusive holder's token: %v, %v", ok, err)
	}
	if ok, _, err := a.ExtendShare(call(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("ExtendShare with the exclusive holder's token: %v, %v", ok, err)
	}
	release(t, b, key, "w")
	share(t, a, key, "r3", shared0, false)
	unshare(t, a, key, "r3")
}

// TestPermitsHaveDistinctSlots: Permits(3) lets three holders in, in slots
// 0, 1 and 2, refuses a fourth, and gives a freed slot to the next one; an
// attempt sent again keeps its slot.
func TestPermitsHaveDistinctSlots(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	key := uniq(t)
	for i, s := range []*etcdstore.Store{a, b, a} {
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
	a := newStore(t, newClient(t, ""))
	key := uniq(t)
	mismatch := func(token string, h core.Hold) {
		t.Helper()
		ok, _, _, err := a.TryAcquireShare(call(t), key, token, 10*time.Second, h, false)
		if ok || !errors.Is(err, core.ErrModeMismatch) {
			t.Fatalf("TryAcquireShare(%s) beside shares of another mode: %v, %v; want ErrModeMismatch", h, ok, err)
		}
	}
	share(t, a, key, "r", shared0, false)
	mismatch("p", permits3)
	unshare(t, a, key, "r")
	share(t, a, key, "p", permits3, false)
	mismatch("r", shared0)
	mismatch("q", core.Hold{N: 5})
	mismatch("q", core.Hold{N: 30})
	unshare(t, a, key, "p")
	share(t, a, key, "q", core.Hold{N: 5}, false)
	unshare(t, a, key, "q")
	if _, _, _, err := a.TryAcquireShare(call(t), key, "x", 10*time.Second, core.Hold{N: -1}, false); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Hold{N: -1}: %v", err)
	}
}

// TestShareExpiresOnItsOwn: a share whose holder stops extending it frees
// its slot at its TTL while another share lives on; once none is live the
// key is free for an exclusive holder.
func TestShareExpiresOnItsOwn(t *testing.T) {
	leakCheck(t)
	a := newStore(t, newClient(t, ""))
	key := uniq(t)
	one := core.Hold{N: 2}
	if ok, _, _, err := a.TryAcquireShare(call(t), key, "dies", time.Second, one, false); err != nil || !ok {
		t.Fatalf("the short share: %v, %v", ok, err)
	}
	share(t, a, key, "lives", one, false)
	noShare(t, a, key, "next", one, "with both slots live")
	// Wait for the dead holder's share to expire: the next holder gets
	// its slot, 0.
	var slot int
	waitFor(t, 30*time.Second, "the short share to expire", func() bool {
		ok, sl, _, err := a.TryAcquireShare(call(t), key, "next", 10*time.Second, one, false)
		if err != nil {
			t.Fatal(err)
		}
		slot = sl
		return ok
	})
	if slot != 0 {
		t.Fatalf("the expired share's slot 0 went to slot %d", slot)
	}
	if ok, _, err := a.ExtendShare(call(t), key, "dies", 10*time.Second, false); err != nil || ok {
		t.Fatalf("ExtendShare of an expired share: %v, %v", ok, err)
	}
	if ok, _, err := a.ExtendShare(call(t), key, "lives", 20*time.Second, false); err != nil || !ok {
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
	a, b := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	key := uniq(t)
	share(t, a, key, "r1", shared0, false)
	if ok, _, err := b.TryAcquireWaiting(call(t), key, "w", 10*time.Second, 30*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting beside a share: %v, %v", ok, err)
	}
	noShare(t, a, key, "r2", shared0, "while a writer waits")
	unshare(t, a, key, "r1")
	noShare(t, a, key, "r2", shared0, "after the shares drained, while a writer waits")
	ok, fence, err := b.TryAcquireWaiting(call(t), key, "w", 10*time.Second, 30*time.Second, true)
	if err != nil || !ok || fence == 0 {
		t.Fatalf("TryAcquireWaiting of a drained key: %v, %d, %v", ok, fence, err)
	}
	release(t, b, key, "w")
	share(t, a, key, "r2", shared0, false)
	unshare(t, a, key, "r2")
}

// TestWaiterRecordExpires: a waiter that gives up lets its record expire
// after its patience; shares are then taken again.
func TestWaiterRecordExpires(t *testing.T) {
	leakCheck(t)
	a := newStore(t, newClient(t, ""))
	key := uniq(t)
	share(t, a, key, "r1", shared0, false)
	if ok, _, err := a.TryAcquireWaiting(call(t), key, "w", 10*time.Second, time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting beside a share: %v, %v", ok, err)
	}
	noShare(t, a, key, "r2", shared0, "while a writer waits")
	waitFor(t, 30*time.Second, "the waiter record to expire", func() bool {
		ok, _, _, err := a.TryAcquireShare(call(t), key, "r2", 10*time.Second, shared0, false)
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
	a := newStore(t, newClient(t, ""))
	key := uniq(t)
	f1 := acquire(t, a, key, "w1", 10*time.Second, true)
	release(t, a, key, "w1")
	_, f2 := share(t, a, key, "r1", shared0, true)
	_, f3 := share(t, a, key, "r2", shared0, true)
	ok, f4, err := a.ExtendShare(call(t), key, "r1", 10*time.Second, true)
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

// TestShareReleaseWakesWriter: a watcher of a key wakes when a share of it
// is released.
func TestShareReleaseWakesWriter(t *testing.T) {
	leakCheck(t)
	a, w := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	key := uniq(t)
	share(t, a, key, "r", shared0, false)
	w.Announce()
	if ok, _, err := w.TryAcquire(call(t), key, "w", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire beside a share: %v, %v", ok, err)
	}
	c, stop := w.Watch(key)
	defer stop()
	unshare(t, a, key, "r")
	if !wait(c, 10*time.Second) {
		t.Fatal("no notice of the share's release")
	}
}

// TestSharesAtOnce: goroutines of several stores take shares of one name
// in a loop, in random modes, and report every overlap: never more than n
// permit holders, never two permit holders in one slot, never an exclusive
// holder beside anyone.
func TestSharesAtOnce(t *testing.T) {
	leakCheck(t)
	stores := []*etcdstore.Store{newStore(t, newClient(t, "")), newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))}
	for _, mode := range []core.Hold{permits3, shared0} {
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

// TestAcquireAllIsAllOrNone: TryAcquireAll takes every key or none: one
// held key (exclusively or by a share) leaves the others free; an attempt
// sent again counts as taken; each key is then released on its own.
func TestAcquireAllIsAllOrNone(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	k1, k2, k3 := uniq(t), uniq(t), uniq(t)
	keys := []string{k1, k2, k3}

	acquire(t, b, k2, "other", 10*time.Second, false)
	if ok, _, err := a.TryAcquireAll(call(t), keys, "all", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireAll with one key held: %v, %v", ok, err)
	}
	release(t, b, k2, "other")
	share(t, b, k3, "reader", shared0, false)
	if ok, _, err := a.TryAcquireAll(call(t), keys, "all", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireAll with one key shared: %v, %v", ok, err)
	}
	for _, k := range []string{k1, k2} {
		acquire(t, b, k, "probe", 10*time.Second, false) // left free
		release(t, b, k, "probe")
	}
	unshare(t, b, k3, "reader")

	ok, fences, err := a.TryAcquireAll(call(t), keys, "all", 10*time.Second, true)
	if err != nil || !ok || len(fences) != 3 || fences[0] == 0 {
		t.Fatalf("TryAcquireAll of free keys: %v, %v, %v", ok, fences, err)
	}
	ok, again, err := a.TryAcquireAll(call(t), keys, "all", 10*time.Second, true)
	if err != nil || !ok || again[1] != fences[1] {
		t.Fatalf("TryAcquireAll sent again: %v, %v (first %v), %v", ok, again, fences, err)
	}
	for _, k := range keys {
		if ok, _, err := b.TryAcquire(call(t), k, "other", 10*time.Second, false); err != nil || ok {
			t.Fatalf("TryAcquire of a key taken by TryAcquireAll: %v, %v", ok, err)
		}
	}
	release(t, a, k1, "all")
	if ok, _, err := a.Extend(call(t), k2, "all", 10*time.Second, false); err != nil || !ok {
		t.Fatalf("Extend of a key of TryAcquireAll after another's release: %v, %v", ok, err)
	}
	release(t, a, k2, "all")
	release(t, a, k3, "all")
	if _, _, err := a.TryAcquireAll(call(t), []string{k1, k1}, "dup", 10*time.Second, false); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("duplicate keys: %v", err)
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprint(k1, i)
	}
	if _, _, err := a.TryAcquireAll(call(t), many, "many", 10*time.Second, false); !errors.Is(err, core.ErrNotAtomic) {
		t.Fatalf("65 keys: %v", err)
	}
}

// TestCallsPerShare: the calls of shares, as the package documentation
// counts them: a share is one transaction (and a grant when no lease of its
// TTL is kept), its release one; a waiting writer's record is put on the
// lease of its last one, renewed, not on a lease granted per attempt.
func TestCallsPerShare(t *testing.T) {
	var n counter
	s := newStore(t, countingClient(t, shared.Addr(), &n))
	key := uniq(t)
	if _, err := s.Release(call(t), key, "nobody"); err != nil { // connects
		t.Fatal(err)
	}
	check := func(what string, unary, streams int64) {
		t.Helper()
		if u, st := n.take(); u != unary || st != streams {
			t.Errorf("%s: %d unary calls and %d streams; want %d and %d", what, u, st, unary, streams)
		}
	}
	n.take()
	share(t, s, key, "r1", shared0, false)
	check("the first share (grant, transaction)", 2, 0)
	unshare(t, s, key, "r1")
	check("a release of a share (transaction)", 1, 0)
	share(t, s, key, "r2", shared0, false)
	check("a share with a kept lease (transaction ∥ keep-alive)", 1, 1)
	if ok, _, err := s.ExtendShare(call(t), key, "r2", 10*time.Second, false); err != nil || !ok {
		t.Fatalf("ExtendShare: %v, %v", ok, err)
	}
	check("an ExtendShare of the same TTL (transaction ∥ keep-alive)", 1, 1)
	for i := range 3 {
		if ok, _, err := s.TryAcquireWaiting(call(t), key, "w", time.Minute, 30*time.Second, false); err != nil || ok {
			t.Fatalf("TryAcquireWaiting beside a share: %v, %v", ok, err)
		}
		if i == 0 {
			// The acquire's lease of a minute is kept; the record's
			// lease of 30 s is granted.
			check("the first waiting attempt (grant, transaction; grant, put)", 4, 0)
		} else {
			check("a later waiting attempt (transaction ∥ keep-alive; put ∥ keep-alive)", 2, 2)
		}
	}
	unshare(t, s, key, "r2")
}

// TestFailedShareAttemptLeavesNoShare: a share attempt whose context ends
// while its transaction is on its way (applied by etcd, its answer held
// back by a client interceptor) fails, and the store revokes its lease,
// which deletes the share key the late transaction put, long before the
// share's TTL: the slot is free again.
func TestFailedShareAttemptLeavesNoShare(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var armed atomic.Bool
	cfg := clientConfig(shared.Addr())
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
		func(c context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method != "/etcdserverpb.KV/Txn" || !armed.CompareAndSwap(true, false) {
				return invoker(c, method, req, reply, cc, opts...)
			}
			if err := invoker(c, method, req, reply, cc, opts...); err != nil {
				return err
			}
			cancel() // applied; the answer comes too late
			return status.FromContextError(c.Err()).Err()
		}))
	client, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client, etcdstore.WithLeasePool(0))
	direct := newClient(t, "")
	key := uniq(t)
	holders := s.Key(key) + "\x00h/"
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	writes := direct.Watch(wctx, holders, clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	<-writes

	armed.Store(true)
	ok, _, _, err := s.TryAcquireShare(ctx, key, "late", time.Minute, core.Hold{N: 1}, false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquireShare whose context ended while its transaction was on its way: %v, %v; want the context's error", ok, err)
	}
	select {
	case resp := <-writes:
		if len(resp.Events) == 0 || string(resp.Events[0].Kv.Value) != "late" {
			t.Fatalf("unexpected watch response %+v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed attempt's transaction never reached etcd: nothing to check")
	}
	start := time.Now()
	for {
		resp, err := direct.Get(call(t), holders, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the share of a failed attempt, set for 1m, was still there 20s after it was set")
		}
		time.Sleep(50 * time.Millisecond)
	}
	share(t, newStore(t, direct), key, "next", core.Hold{N: 1}, false)
}
