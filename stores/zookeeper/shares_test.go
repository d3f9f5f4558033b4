package zkstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// sharedHold is a shared hold; permits(n) a hold of n permits.
var sharedHold = core.Hold{}

func permits(n int) core.Hold { return core.Hold{N: n} }

// share takes a share of key, failing the test on an error; it returns
// whether it got one and its slot.
func share(t testing.TB, s *zkstore.Store, key, token string, ttl time.Duration, h core.Hold) (bool, int) {
	t.Helper()
	ok, slot, _, err := s.TryAcquireShare(ctx(t), key, token, ttl, h, false)
	if err != nil {
		t.Fatalf("TryAcquireShare(%q, %v): %v", token, h, err)
	}
	return ok, slot
}

// mustShare takes a share of key, failing the test if it cannot; it
// returns its slot.
func mustShare(t testing.TB, s *zkstore.Store, key, token string, ttl time.Duration, h core.Hold) int {
	t.Helper()
	ok, slot := share(t, s, key, token, ttl, h)
	if !ok {
		t.Fatalf("TryAcquireShare(%q, %v) failed; want a share", token, h)
	}
	return slot
}

// mustReleaseShare releases token's share, failing the test unless it was
// live.
func mustReleaseShare(t testing.TB, s *zkstore.Store, key, token string) {
	t.Helper()
	if ok, err := s.ReleaseShare(ctx(t), key, token); !ok || err != nil {
		t.Fatalf("ReleaseShare(%q): %v, %v; want true", token, ok, err)
	}
}

// TestShareSharedHolders: shared holders hold a key together; while they
// do, an exclusive acquire fails, and an exclusive Release or Extend with a
// share's token does nothing; a share is refused while the key is held
// exclusively; once the shares are released the key is free.
func TestShareSharedHolders(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	const ttl = time.Minute
	mustShare(t, a, "k", "r1", ttl, sharedHold)
	mustShare(t, b, "k", "r2", ttl, sharedHold)
	if ok, _, err := b.TryAcquire(ctx(t), "k", "w", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquire while shares are live: %v, %v; want false", ok, err)
	}
	if ok, _, err := b.TryAcquireWaiting(ctx(t), "k", "w0", ttl, time.Millisecond, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while shares are live: %v, %v; want false", ok, err)
	}
	if ok, err := a.Release(ctx(t), "k", "r1"); ok || err != nil {
		t.Errorf("Release with a share's token: %v, %v; want false", ok, err)
	}
	if ok, _, err := a.Extend(ctx(t), "k", "r1", ttl, false); ok || err != nil {
		t.Errorf("Extend with a share's token: %v, %v; want false", ok, err)
	}
	if ok, _, err := a.ExtendShare(ctx(t), "k", "r1", ttl, false); !ok || err != nil {
		t.Errorf("ExtendShare by the holder: %v, %v; want true", ok, err)
	}
	if ok, _, err := a.ExtendShare(ctx(t), "k", "nobody", ttl, false); ok || err != nil {
		t.Errorf("ExtendShare by a stranger: %v, %v; want false", ok, err)
	}
	if ok, err := a.ReleaseShare(ctx(t), "k", "nobody"); ok || err != nil {
		t.Errorf("ReleaseShare by a stranger: %v, %v; want false", ok, err)
	}
	// b releases a's share: a store finds a share it did not take by its
	// token.
	mustReleaseShare(t, b, "k", "r1")
	if ok, _, err := a.ExtendShare(ctx(t), "k", "r1", ttl, false); ok || err != nil {
		t.Errorf("ExtendShare of a released share: %v, %v; want false", ok, err)
	}
	if ok, _, err := a.TryAcquire(ctx(t), "k", "w", ttl, false); ok || err != nil {
		t.Fatalf("TryAcquire while a share is live: %v, %v; want false", ok, err)
	}
	mustReleaseShare(t, b, "k", "r2")
	if ok, err := b.ReleaseShare(ctx(t), "k", "r2"); ok || err != nil {
		t.Errorf("second ReleaseShare: %v, %v; want false", ok, err)
	}
	mustAcquire(t, a, "k", "w", ttl, false)
	if ok, _ := share(t, b, "k", "r3", ttl, sharedHold); ok {
		t.Fatal("TryAcquireShare while the key is held exclusively succeeded")
	}
	if ok, _ := share(t, b, "k", "p3", ttl, permits(3)); ok {
		t.Fatal("TryAcquireShare of a permit while the key is held exclusively succeeded")
	}
	if ok, err := a.ReleaseShare(ctx(t), "k", "w"); ok || err != nil {
		t.Errorf("ReleaseShare with an exclusive holder's token: %v, %v; want false", ok, err)
	}
	if ok, err := a.Release(ctx(t), "k", "w"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	mustShare(t, b, "k", "r4", ttl, sharedHold)
	mustReleaseShare(t, b, "k", "r4")
	eventually(t, 10*time.Second, "the key's nodes linger", func() bool {
		return len(children(t, conn, r+"/k")) == 0
	})
}

// TestSharePermits: permits take the lowest free slots, never more than n
// at once; a released slot is taken again; a hold of another mode while
// permits are live is ErrModeMismatch, and changes nothing.
func TestSharePermits(t *testing.T) {
	leakCheck(t)
	r := root(t)
	a := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	const ttl = time.Minute
	for i, s := range []*zkstore.Store{a, b, a} {
		if slot := mustShare(t, s, "k", "p"+string(rune('0'+i)), ttl, permits(3)); slot != i {
			t.Fatalf("permit %d has slot %d; want %d", i, slot, i)
		}
	}
	if ok, _ := share(t, b, "k", "p3", ttl, permits(3)); ok {
		t.Fatal("a fourth permit of 3 was taken")
	}
	for _, h := range []core.Hold{permits(2), permits(4), sharedHold} {
		ok, _, _, err := b.TryAcquireShare(ctx(t), "k", "x", ttl, h, false)
		if ok || !errors.Is(err, core.ErrModeMismatch) {
			t.Errorf("TryAcquireShare(%v) beside permits(3): %v, %v; want ErrModeMismatch", h, ok, err)
		} else if !strings.HasPrefix(err.Error(), "zkstore: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
	mustReleaseShare(t, a, "k", "p1")
	if slot := mustShare(t, b, "k", "p4", ttl, permits(3)); slot != 1 {
		t.Errorf("a permit after slot 1 was released has slot %d; want 1", slot)
	}
	// A re-sent attempt keeps its slot, also through a store that did not
	// take it.
	for _, s := range []*zkstore.Store{b, a} {
		if slot := mustShare(t, s, "k", "p4", ttl, permits(3)); slot != 1 {
			t.Errorf("a re-sent permit has slot %d; want 1", slot)
		}
	}
	if ok, _, _, err := b.TryAcquireShare(ctx(t), "k", "p4", ttl, sharedHold, false); ok || !errors.Is(err, core.ErrModeMismatch) {
		t.Errorf("a re-sent permit asking to share: %v, %v; want ErrModeMismatch", ok, err)
	}
	for _, tok := range []string{"p0", "p2", "p4"} {
		mustReleaseShare(t, b, "k", tok)
	}
	if slot := mustShare(t, a, "k", "q", ttl, permits(2)); slot != 0 {
		t.Errorf("the first permit of 2 has slot %d; want 0", slot)
	}
	mustReleaseShare(t, a, "k", "q")
}

// TestShareBadInput: a hold out of range and a bad TTL are refused with
// clear errors, and take nothing.
func TestShareBadInput(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	s := newStore(t, conn, zkstore.WithRoot(r), zkstore.WithSessionTimeout(sessionTimeout))
	for _, h := range []core.Hold{{N: -1}, {N: core.MaxPermits + 1}} {
		ok, _, _, err := s.TryAcquireShare(ctx(t), "k", "t", time.Second, h, false)
		if ok || !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("TryAcquireShare(%v): %v, %v; want ErrInvalidOption", h, ok, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, 2 * sessionTimeout} {
		if ok, _, _, err := s.TryAcquireShare(ctx(t), "k", "t", ttl, sharedHold, false); ok || err == nil {
			t.Errorf("TryAcquireShare with TTL %v: %v, %v; want an error", ttl, ok, err)
		}
	}
	if ok, _, err := s.TryAcquireWaiting(ctx(t), "k", "t", time.Second, 0, false); ok || err == nil {
		t.Errorf("TryAcquireWaiting with no patience: %v, %v; want an error", ok, err)
	}
	if got := children(t, conn, r+"/k"); len(got) != 0 {
		t.Errorf("bad input left nodes %q", got)
	}
}

// TestShareExpiresAlone: a share whose holder died frees its place at its
// own TTL while the other shares stay; once no share is live the key is
// free. (TTLs of a second, waits of two.)
func TestShareExpiresAlone(t *testing.T) {
	leakCheck(t)
	r := root(t)
	a := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	mustShare(t, a, "p", "dies", time.Second, permits(2))
	mustShare(t, a, "p", "lives", time.Minute, permits(2))
	mustShare(t, a, "s", "dies", time.Second, sharedHold)
	time.Sleep(2 * time.Second)
	if slot := mustShare(t, b, "p", "next", time.Minute, permits(2)); slot != 0 {
		t.Errorf("the permit after slot 0 expired has slot %d; want 0", slot)
	}
	if ok, _ := share(t, b, "p", "more", time.Minute, permits(2)); ok {
		t.Error("a third permit of 2 was taken")
	}
	if ok, _, err := a.ExtendShare(ctx(t), "p", "dies", time.Minute, false); ok || err != nil {
		t.Errorf("ExtendShare of an expired share: %v, %v; want false", ok, err)
	}
	if ok, err := a.ReleaseShare(ctx(t), "p", "lives"); !ok || err != nil {
		t.Errorf("ReleaseShare of the live share: %v, %v; want true", ok, err)
	}
	mustAcquire(t, b, "s", "w", time.Minute, false) // the lone share expired
	if ok, err := a.ReleaseShare(ctx(t), "s", "dies"); ok || err != nil {
		t.Errorf("ReleaseShare of an expired share: %v, %v; want false", ok, err)
	}
}

// TestShareWriterNotStarved: once an exclusive waiter is recorded
// (TryAcquireWaiting found shares), new shares are refused, also after the
// shares drained, until the waiter takes the key and clears its record; a
// record whose waiter gave up expires after its patience.
func TestShareWriterNotStarved(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	a := newStore(t, conn, zkstore.WithRoot(r))
	b := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	const ttl = time.Minute
	mustShare(t, a, "k", "r1", ttl, sharedHold)
	mustShare(t, a, "k", "r2", ttl, sharedHold)
	if ok, _, err := b.TryAcquireWaiting(ctx(t), "k", "w", ttl, ttl, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while shares are live: %v, %v; want false", ok, err)
	}
	if ok, _ := share(t, a, "k", "r3", ttl, sharedHold); ok {
		t.Fatal("a new share was taken while an exclusive waiter waits")
	}
	if ok, _ := share(t, a, "k", "r1", ttl, sharedHold); !ok {
		t.Error("a re-sent attempt of a live share was refused")
	}
	mustReleaseShare(t, a, "k", "r1")
	mustReleaseShare(t, a, "k", "r2")
	if ok, _ := share(t, a, "k", "r4", ttl, sharedHold); ok {
		t.Fatal("a share was taken after the shares drained, before the waiter took the key")
	}
	if ok, _, err := b.TryAcquireWaiting(ctx(t), "k", "w", ttl, ttl, false); !ok || err != nil {
		t.Fatalf("TryAcquireWaiting of the drained key: %v, %v; want true", ok, err)
	}
	if ok, err := b.Release(ctx(t), "k", "w"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	mustShare(t, a, "k", "r5", ttl, sharedHold)
	// A waiter that gives up: its record expires after its patience.
	if ok, _, err := b.TryAcquireWaiting(ctx(t), "k", "w2", ttl, time.Second, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while a share is live: %v, %v; want false", ok, err)
	}
	if ok, _ := share(t, a, "k", "r6", ttl, sharedHold); ok {
		t.Fatal("a share was taken while an exclusive waiter waits")
	}
	time.Sleep(2 * time.Second)
	mustShare(t, a, "k", "r6", ttl, sharedHold)
	mustReleaseShare(t, a, "k", "r5")
	mustReleaseShare(t, a, "k", "r6")
	eventually(t, 10*time.Second, "the key's nodes linger", func() bool {
		return len(children(t, conn, r+"/k")) == 0
	})
}

// TestShareFences: fences of a key only increase whatever the mode:
// exclusive, shared, a fenced ExtendShare, permits, exclusive again.
func TestShareFences(t *testing.T) {
	leakCheck(t)
	a := newStore(t, dial(t, "", 0))
	b := newStore(t, dial(t, "", 0))
	key := uniq(t)
	const ttl = time.Minute
	var last int64
	next := func(what string, fence int64) {
		t.Helper()
		if fence <= last {
			t.Errorf("%s: fence %d after %d; want it higher", what, fence, last)
		}
		last = fence
	}
	next("exclusive", mustAcquire(t, a, key, "x1", ttl, true))
	if ok, err := a.Release(ctx(t), key, "x1"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for i, s := range []*zkstore.Store{a, b} {
		tok := "s" + string(rune('0'+i))
		ok, _, fence, err := s.TryAcquireShare(ctx(t), key, tok, ttl, sharedHold, true)
		if !ok || err != nil {
			t.Fatalf("TryAcquireShare: %v, %v", ok, err)
		}
		next("shared", fence)
	}
	ok, fence, err := a.ExtendShare(ctx(t), key, "s0", ttl, true)
	if !ok || err != nil {
		t.Fatalf("ExtendShare: %v, %v", ok, err)
	}
	next("ExtendShare", fence)
	mustReleaseShare(t, a, key, "s0")
	mustReleaseShare(t, a, key, "s1")
	ok, _, fence, err = b.TryAcquireShare(ctx(t), key, "p", ttl, permits(2), true)
	if !ok || err != nil {
		t.Fatalf("TryAcquireShare(permits): %v, %v", ok, err)
	}
	next("permit", fence)
	mustReleaseShare(t, b, key, "p")
	next("exclusive again", mustAcquire(t, b, key, "x2", ttl, true))
}

// TestShareUndo: Undo of a token deletes its share, and no other token's
// node. The key's exclusive waiter's record is no token's: Undo of the
// token that wrote it leaves it (it dies after its patience), and a
// waiter's attempt with another token that takes the key deletes it.
func TestShareUndo(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	s := newStore(t, conn, zkstore.WithRoot(r))
	const ttl = time.Minute
	mustShare(t, s, "k", "a", ttl, sharedHold)
	mustShare(t, s, "k", "b", ttl, sharedHold)
	if ok, _, err := s.TryAcquireWaiting(ctx(t), "k", "w", ttl, ttl, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	if got := children(t, conn, r+"/k"); len(got) != 3 || !slices.Contains(got, "w") {
		t.Fatalf("children %q; want two shares and the waiter's record \"w\"", got)
	}
	s.Undo(ctx(t), "k", "a", ttl, time.Now())
	s.Undo(ctx(t), "k", "w", ttl, time.Now())
	eventually(t, 10*time.Second, "Undo left the share of its token", func() bool {
		return len(children(t, conn, r+"/k")) == 2
	})
	if got := children(t, conn, r+"/k"); !slices.Contains(got, "w") {
		t.Fatalf("children %q after Undo; want the key's waiter's record left", got)
	}
	if ok, _ := share(t, s, "k", "c", ttl, sharedHold); ok {
		t.Error("a share beside a shared holder was taken while an exclusive waiter's record was live")
	}
	if ok, _, err := s.ExtendShare(ctx(t), "k", "a", ttl, false); ok || err != nil {
		t.Errorf("ExtendShare of an undone share: %v, %v; want false", ok, err)
	}
	mustReleaseShare(t, s, "k", "b")
	if ok, _, err := s.TryAcquireWaiting(ctx(t), "k", "x", ttl, ttl, false); !ok || err != nil {
		t.Fatalf("TryAcquireWaiting with another token once the shares were gone: %v, %v; want true", ok, err)
	}
	if got := children(t, conn, r+"/k"); len(got) != 1 || got[0] == "w" {
		t.Fatalf("children %q after a waiter took the key; want its lock only", got)
	}
	if ok, err := s.Release(ctx(t), "k", "x"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	mustShare(t, s, "k", "c", ttl, sharedHold)
	mustReleaseShare(t, s, "k", "c")
}

// TestShareOverlap: goroutines on four connections take one key in shared
// and exclusive mode (an exclusive waiter with TryAcquireWaiting, keeping
// its token until it holds), and another with permits(3), renewing and
// releasing what they take; an exclusive holder never overlaps another
// holder, and permit holders never share a slot (so they are never more
// than 3). The TTL (5 s) outlasts any stall of a holder.
func TestShareOverlap(t *testing.T) {
	leakCheck(t)
	rw, sem := uniq(t), uniq(t)
	const ttl = 5 * time.Second
	var (
		readers, writers atomic.Int64 // inside rw's critical section
		sharedOverlap    atomic.Bool  // two readers were inside at once
		holds            atomic.Int64
		mu               sync.Mutex
		slots            = map[int]bool{} // sem's slots in use
	)
	stores := make([]*zkstore.Store, 4)
	for i := range stores {
		stores[i] = newStore(t, dial(t, "", 0))
	}
	fail := func(format string, args ...any) { t.Errorf(format, args...) }
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range stores {
		for g := range 3 {
			wg.Go(func() {
				bg := context.Background()
				tok := rand.Text()
				for contend(start, &holds) {
					switch (i + g) % 3 {
					case 0: // exclusive: a waiter keeps its token until it holds
						ok, _, err := s.TryAcquireWaiting(bg, rw, tok, ttl, time.Second, false)
						if err != nil {
							fail("TryAcquireWaiting: %v", err)
							return
						}
						if !ok {
							time.Sleep(time.Millisecond)
							continue
						}
						if writers.Add(1) > 1 || readers.Load() > 0 {
							fail("an exclusive holder overlapped another holder")
						}
						holds.Add(1)
						time.Sleep(time.Millisecond)
						if readers.Load() > 0 {
							fail("a shared holder came in beside an exclusive one")
						}
						writers.Add(-1)
						if ok, err := s.Release(bg, rw, tok); !ok || err != nil {
							fail("Release: %v, %v", ok, err)
						}
					case 1: // shared
						ok, _, _, err := s.TryAcquireShare(bg, rw, tok, ttl, sharedHold, false)
						if err != nil {
							fail("TryAcquireShare: %v", err)
							return
						}
						if !ok {
							time.Sleep(time.Millisecond)
							continue
						}
						if readers.Add(1) > 1 {
							sharedOverlap.Store(true)
						}
						if writers.Load() > 0 {
							fail("a shared holder overlapped an exclusive one")
						}
						holds.Add(1)
						time.Sleep(5 * time.Millisecond)
						if ok, _, err := s.ExtendShare(bg, rw, tok, ttl, false); !ok || err != nil {
							fail("ExtendShare by the holder: %v, %v", ok, err)
						}
						readers.Add(-1)
						if ok, err := s.ReleaseShare(bg, rw, tok); !ok || err != nil {
							fail("ReleaseShare: %v, %v", ok, err)
						}
					case 2: // permits
						ok, slot, _, err := s.TryAcquireShare(bg, sem, tok, ttl, permits(3), false)
						if err != nil {
							fail("TryAcquireShare(permits): %v", err)
							return
						}
						if !ok {
							time.Sleep(time.Millisecond)
							continue
						}
						mu.Lock()
						if slot < 0 || slot >= 3 || slots[slot] {
							fail("permit slot %d is out of range or in use (in use: %v)", slot, slots)
						}
						slots[slot] = true
						mu.Unlock()
						holds.Add(1)
						time.Sleep(time.Millisecond)
						mu.Lock()
						delete(slots, slot)
						mu.Unlock()
						if ok, err := s.ReleaseShare(bg, sem, tok); !ok || err != nil {
							fail("ReleaseShare(permits): %v, %v", ok, err)
						}
					}
					tok = rand.Text()
				}
			})
		}
	}
	wg.Wait()
	if holds.Load() < 10 {
		t.Errorf("only %d holds in %v", holds.Load(), maxContention)
	}
	t.Logf("%d holds; shared holders overlapped: %v", holds.Load(), sharedOverlap.Load()) // a matter of timing
}

// TestFailedShareIsUndone: a TryAcquireShare and a TryAcquireAll whose
// context ends before the server's reply fail with the context's error, and
// the nodes their creates made are deleted in the background: the keys are
// free soon after, long before the attempts' TTL. The connection holds back
// the server's replies while the attempts run (as TestFailedAttemptIsUndone
// does), and the contexts end once the nodes are there.
func TestFailedShareIsUndone(t *testing.T) {
	leakCheck(t)
	var g gate
	slow := newStore(t, dialVia(t, "", 0, g.dialer()))
	oconn := dial(t, "", 0)
	other := newStore(t, oconn)
	k1, k2 := uniq(t), uniq(t)
	for _, k := range []string{k1, k2} {
		mustAcquire(t, other, k, "first", time.Minute, false) // the keys' parent nodes exist
	}
	dir := func(key string) string { return "/reqlock/" + strings.ReplaceAll(key, "#", "%23") }
	has := func(key, prefix string) bool {
		for _, name := range children(t, oconn, dir(key)) {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		}
		return false
	}
	g.shut()
	shut := true
	defer func() {
		if shut {
			g.open()
		}
	}()
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 2)
	go func() {
		_, _, _, err := slow.TryAcquireShare(c, k1, "late", time.Minute, sharedHold, false)
		errc <- err
	}()
	go func() {
		_, _, err := slow.TryAcquireAll(c, []string{k1, k2}, "lateall", time.Minute, false)
		errc <- err
	}()
	eventually(t, 20*time.Second, "the attempts' creates never made their nodes", func() bool {
		return has(k1, "l-%Slate-") && has(k1, "l-lateall-") && has(k2, "l-lateall-")
	})
	cancel()
	for range 2 {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("an attempt cut by its context: %v; want context.Canceled", err)
		}
	}
	g.open()
	shut = false
	for _, k := range []string{k1, k2} {
		if ok, err := other.Release(ctx(t), k, "first"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
		eventually(t, 20*time.Second, "a key was still held by a failed attempt", func() bool {
			ok, _, err := other.TryAcquire(ctx(t), k, "next", time.Minute, false)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if ok, err := other.Release(ctx(t), k, "next"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
}

// TestShareFenceFollowsConcurrentDraws: a share's fence is higher than a
// fence drawn while its attempt ran, after its node was made: the reply to
// its create is held back until another share's fenced ExtendShare has
// drawn its fence. (The node's czxid, drawn when it was made, would be
// lower.)
func TestShareFenceFollowsConcurrentDraws(t *testing.T) {
	leakCheck(t)
	var g gate
	slow := newStore(t, dialVia(t, "", 0, g.dialer()))
	oconn := dial(t, "", 0)
	other := newStore(t, oconn)
	key := uniq(t)
	const ttl = time.Minute
	mustShare(t, other, key, "s0", ttl, sharedHold)
	dir := "/reqlock/" + strings.ReplaceAll(key, "#", "%23")
	g.shut()
	shut := true
	defer func() {
		if shut {
			g.open()
		}
	}()
	type result struct {
		ok    bool
		fence int64
		err   error
	}
	res := make(chan result, 1)
	go func() {
		ok, _, fence, err := slow.TryAcquireShare(context.Background(), key, "s1", ttl, sharedHold, true)
		res <- result{ok, fence, err}
	}()
	eventually(t, 20*time.Second, "the attempt's create never made its node", func() bool {
		for _, name := range children(t, oconn, dir) {
			if strings.HasPrefix(name, "l-%Ss1-") {
				return true
			}
		}
		return false
	})
	ok, drawn, err := other.ExtendShare(ctx(t), key, "s0", ttl, true)
	if !ok || err != nil {
		t.Fatalf("ExtendShare: %v, %v", ok, err)
	}
	g.open()
	shut = false
	r := <-res
	if !r.ok || r.err != nil {
		t.Fatalf("TryAcquireShare: %v, %v", r.ok, r.err)
	}
	if r.fence <= drawn {
		t.Errorf("the share's fence %d is not above %d, drawn while its attempt ran", r.fence, drawn)
	}
	mustReleaseShare(t, other, key, "s0")
	mustReleaseShare(t, slow, key, "s1")
}
