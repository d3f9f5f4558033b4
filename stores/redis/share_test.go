package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

const shareTTL = time.Minute

var (
	shared0  = lockstore.Hold{}
	permits2 = lockstore.Hold{N: 2}
)

// share takes a share of key for token and fails t unless its outcome is
// want; it returns the slot and fence.
func share(t *testing.T, s *redisstore.Store, key, token string, h lockstore.Hold, fenced, want bool) (int, int64) {
	t.Helper()
	ok, slot, fence, err := s.TryAcquireShare(context.Background(), key, token, shareTTL, h, fenced)
	if err != nil {
		t.Fatalf("TryAcquireShare(%s, %s, %v): %v", key, token, h, err)
	}
	if ok != want {
		t.Fatalf("TryAcquireShare(%s, %s, %v) = %v, want %v", key, token, h, ok, want)
	}
	return slot, fence
}

// Shared holds coexist; while they live the key is held (TryAcquire fails,
// Release and Extend of a share's token do nothing); the last one out
// frees the key and every companion key.
func TestSharesHoldTheKey(t *testing.T) {
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	key := uniq(t)
	share(t, s, key, "r1", shared0, false, true)
	share(t, s, key, "r2", shared0, false, true)
	if ok, _, err := s.TryAcquire(ctx, key, "w", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquire while shares live = %v, %v; want false", ok, err)
	}
	if ok, _, err := s.TryAcquireFree(ctx, key, "w", shareTTL, true); ok || err != nil {
		t.Fatalf("TryAcquireFree (fenced) while shares live = %v, %v; want false", ok, err)
	}
	if ok, err := s.Release(ctx, key, "r1"); ok || err != nil {
		t.Fatalf("Release with a share's token = %v, %v; want false", ok, err)
	}
	if ok, _, err := s.Extend(ctx, key, "r1", shareTTL, false); ok || err != nil {
		t.Fatalf("Extend with a share's token = %v, %v; want false", ok, err)
	}
	if v := c.Get(ctx, key).Val(); v != redisscript.MarkerPrefix+"0" {
		t.Fatalf("the key holds %q while shared holds live, want the marker", v)
	}
	if ok, err := s.ReleaseShare(ctx, key, "nobody"); ok || err != nil {
		t.Fatalf("ReleaseShare of a token without a share = %v, %v; want false", ok, err)
	}
	if ok, err := s.ReleaseShare(ctx, key, "r1"); !ok || err != nil {
		t.Fatalf("ReleaseShare(r1) = %v, %v; want true", ok, err)
	}
	if ok, err := s.ReleaseShare(ctx, key, "r1"); ok || err != nil {
		t.Fatalf("a second ReleaseShare(r1) = %v, %v; want false", ok, err)
	}
	if ok, _, err := s.TryAcquire(ctx, key, "w", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquire while r2 lives = %v, %v; want false", ok, err)
	}
	if ok, err := s.ReleaseShare(ctx, key, "r2"); !ok || err != nil {
		t.Fatalf("ReleaseShare(r2) = %v, %v; want true", ok, err)
	}
	if n := c.Exists(ctx, redisscript.ShareKeys(key)...).Val(); n != 0 {
		t.Fatalf("%d of the keys %v are left after the last share", n, redisscript.ShareKeys(key))
	}
	if ok, _, err := s.TryAcquire(ctx, key, "w", shareTTL, false); !ok || err != nil {
		t.Fatalf("TryAcquire after the last share = %v, %v; want true", ok, err)
	}
	share(t, s, key, "r3", shared0, false, false) // held exclusively
	if ok, err := s.ReleaseShare(ctx, key, "w"); ok || err != nil {
		t.Fatalf("ReleaseShare by the exclusive holder's token = %v, %v; want false", ok, err)
	}
	if v := c.Get(ctx, key).Val(); v != "w" {
		t.Fatalf("the exclusive lock holds %q after share calls, want w", v)
	}
}

// Permits: at most N, each in the lowest free slot; a re-sent attempt keeps
// its slot; another N or a shared hold is a mode mismatch.
func TestPermitSlots(t *testing.T) {
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	key := uniq(t)
	if slot, _ := share(t, s, key, "a", permits2, false, true); slot != 0 {
		t.Fatalf("first permit in slot %d, want 0", slot)
	}
	if slot, _ := share(t, s, key, "b", permits2, false, true); slot != 1 {
		t.Fatalf("second permit in slot %d, want 1", slot)
	}
	share(t, s, key, "c", permits2, false, false)
	if slot, _ := share(t, s, key, "b", permits2, false, true); slot != 1 {
		t.Fatalf("a re-sent attempt of b got slot %d, want its slot 1", slot)
	}
	for _, h := range []lockstore.Hold{shared0, {N: 3}, {N: 1}} {
		_, _, _, err := s.TryAcquireShare(ctx, key, "x", shareTTL, h, false)
		if !errors.Is(err, lockstore.ErrModeMismatch) {
			t.Fatalf("TryAcquireShare as %v while permits(2) live: %v, want ErrModeMismatch", h, err)
		}
	}
	if ok, err := s.ReleaseShare(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("ReleaseShare(a) = %v, %v", ok, err)
	}
	if slot, _ := share(t, s, key, "c", permits2, false, true); slot != 0 {
		t.Fatalf("c got slot %d after a left slot 0, want 0", slot)
	}
	for _, h := range []lockstore.Hold{{N: -1}, {N: lockstore.MaxPermits + 1}} {
		_, _, _, err := s.TryAcquireShare(ctx, key, "x", shareTTL, h, false)
		if !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Fatalf("TryAcquireShare as %v: %v, want ErrInvalidOption", h, err)
		}
	}
	// Shared holds against permits, the other way round.
	key2 := uniq(t)
	share(t, s, key2, "r", shared0, false, true)
	if _, _, _, err := s.TryAcquireShare(ctx, key2, "p", shareTTL, permits2, false); !errors.Is(err, lockstore.ErrModeMismatch) {
		t.Fatalf("permits while shared holds live: %v, want ErrModeMismatch", err)
	}
}

// Each share expires on its own, at its TTL: a short one frees its slot
// while a long one keeps the key held. The short TTL is a second, and the
// test waits two.
func TestSharesExpireOnTheirOwn(t *testing.T) {
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	key := uniq(t)
	if ok, slot, _, err := s.TryAcquireShare(ctx, key, "short", time.Second, permits2, false); !ok || slot != 0 || err != nil {
		t.Fatalf("short share: %v, slot %d, %v", ok, slot, err)
	}
	if slot, _ := share(t, s, key, "long", permits2, false, true); slot != 1 {
		t.Fatalf("long share in slot %d, want 1", slot)
	}
	time.Sleep(2 * time.Second)
	if ok, _, err := s.ExtendShare(ctx, key, "short", shareTTL, false); ok || err != nil {
		t.Fatalf("ExtendShare of an expired share = %v, %v; want false", ok, err)
	}
	if slot, _ := share(t, s, key, "new", permits2, false, true); slot != 0 {
		t.Fatalf("the slot of the expired share: got %d, want 0", slot)
	}
	if ok, _, err := s.TryAcquire(ctx, key, "w", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquire while long lives = %v, %v", ok, err)
	}
	// The marker lives as long as the latest share.
	if pttl := c.PTTL(ctx, key).Val(); pttl < shareTTL-10*time.Second {
		t.Fatalf("the marker expires in %v, want about %v (the latest share)", pttl, shareTTL)
	}
	if ok, _, err := s.ExtendShare(ctx, key, "long", 2*shareTTL, false); !ok || err != nil {
		t.Fatalf("ExtendShare(long) = %v, %v", ok, err)
	}
	if pttl := c.PTTL(ctx, key).Val(); pttl < 2*shareTTL-10*time.Second {
		t.Fatalf("after an extend the marker expires in %v, want about %v", pttl, 2*shareTTL)
	}
	for _, k := range redisscript.ShareKeys(key)[2:4] {
		if got, want := c.PExpireTime(ctx, k).Val(), c.PExpireTime(ctx, key).Val(); got != want {
			t.Fatalf("%s expires at %v, the marker at %v: they must go together", k, got, want)
		}
	}
}

// A waiting exclusive holder keeps new shares out (writers do not starve),
// re-sent shares keep theirs, and once it takes the key its record goes.
func TestWaitingWriter(t *testing.T) {
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	key := uniq(t)
	share(t, s, key, "r1", shared0, false, true)
	if ok, _, err := s.TryAcquireWaiting(ctx, key, "w", shareTTL, shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while r1 lives = %v, %v", ok, err)
	}
	share(t, s, key, "r2", shared0, false, false)
	share(t, s, key, "r1", shared0, false, true) // a re-sent attempt of a holder
	if ok, err := s.ReleaseShare(ctx, key, "r1"); !ok || err != nil {
		t.Fatalf("ReleaseShare(r1) = %v, %v", ok, err)
	}
	share(t, s, key, "r2", shared0, false, false) // the name is free, and kept for the writer
	if ok, _, err := s.TryAcquireWaiting(ctx, key, "w", shareTTL, shareTTL, true); !ok || err != nil {
		t.Fatalf("TryAcquireWaiting of a free name = %v, %v", ok, err)
	}
	if n := c.Exists(ctx, redisscript.WriterKey(key)).Val(); n != 0 {
		t.Fatal("the waiter's record is left after it took the key")
	}
	if ok, err := s.Release(ctx, key, "w"); !ok || err != nil {
		t.Fatalf("Release(w) = %v, %v", ok, err)
	}
	share(t, s, key, "r2", shared0, false, true)
	// A waiter that gives up lets its record expire: a second's patience.
	if ok, _, err := s.TryAcquireWaiting(ctx, key, "w2", shareTTL, time.Second, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while r2 lives = %v, %v", ok, err)
	}
	share(t, s, key, "r3", shared0, false, false)
	time.Sleep(2 * time.Second)
	share(t, s, key, "r3", shared0, false, true)
	// No record while the key is held exclusively: only shares are waited out.
	key2 := uniq(t)
	if ok, _, _ := s.TryAcquire(ctx, key2, "x", shareTTL, false); !ok {
		t.Fatal("TryAcquire of a fresh key failed")
	}
	if ok, _, err := s.TryAcquireWaiting(ctx, key2, "w", shareTTL, shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting of a held key = %v, %v", ok, err)
	}
	if n := c.Exists(ctx, redisscript.WriterKey(key2)).Val(); n != 0 {
		t.Fatal("a waiter behind an exclusive holder left a record")
	}
}

// Fences of a name increase whatever the mode: exclusive, shares, their
// extends, exclusive again; a re-sent share keeps its fence.
func TestShareFences(t *testing.T) {
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	key := uniq(t)
	var last int64
	up := func(what string, f int64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s drew fence %d after %d", what, f, last)
		}
		last = f
	}
	ok, f, err := s.TryAcquire(ctx, key, "x", shareTTL, true)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	up("exclusive", f)
	if ok, _ := s.Release(ctx, key, "x"); !ok {
		t.Fatal("release x")
	}
	_, f = share(t, s, key, "a", permits2, true, true)
	up("share a", f)
	fa := f
	_, f = share(t, s, key, "b", permits2, true, true)
	up("share b", f)
	if _, f := share(t, s, key, "a", permits2, true, true); f != fa {
		t.Fatalf("a re-sent share drew fence %d, want its own %d", f, fa)
	}
	ok, f, err = s.ExtendShare(ctx, key, "a", shareTTL, true)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	up("extend of a", f)
	if _, f := share(t, s, key, "c", permits2, false, false); f != 0 {
		t.Fatal("a failed share answered a fence")
	}
	for _, tok := range []string{"a", "b"} {
		if ok, _ := s.ReleaseShare(ctx, key, tok); !ok {
			t.Fatalf("release share %s", tok)
		}
	}
	ok, f, err = s.TryAcquireWaiting(ctx, key, "y", shareTTL, shareTTL, true)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	up("exclusive after shares", f)
}

// TryAcquireAll takes every key or none, with a fence per key.
func TestAcquireAll(t *testing.T) {
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	keys := []string{uniq(t), uniq(t), uniq(t)}
	if ok, _, _ := s.TryAcquire(ctx, keys[1], "other", shareTTL, false); !ok {
		t.Fatal("TryAcquire")
	}
	if ok, fences, err := s.TryAcquireAll(ctx, keys, "t", shareTTL, true); ok || fences != nil || err != nil {
		t.Fatalf("TryAcquireAll with one key held = %v, %v, %v", ok, fences, err)
	}
	if n := c.Exists(ctx, keys[0], keys[2]).Val(); n != 0 {
		t.Fatalf("a failed TryAcquireAll left %d keys set", n)
	}
	_, _ = s.Release(ctx, keys[1], "other")
	ok, fences, err := s.TryAcquireAll(ctx, keys, "t", shareTTL, true)
	if !ok || err != nil || len(fences) != 3 {
		t.Fatalf("TryAcquireAll of free keys = %v, %v, %v", ok, fences, err)
	}
	for i, k := range keys {
		if f := fences[i]; f <= 0 {
			t.Fatalf("fence %d of %s", f, k)
		}
		if v := c.Get(ctx, k).Val(); v != "t" {
			t.Fatalf("%s holds %q after TryAcquireAll", k, v)
		}
	}
	again, fences2, err := s.TryAcquireAll(ctx, keys, "t", shareTTL, true) // a re-sent attempt
	if !again || err != nil || fmt.Sprint(fences2) != fmt.Sprint(fences) {
		t.Fatalf("a re-sent TryAcquireAll = %v, %v, %v; want true and the fences %v", again, fences2, err, fences)
	}
	share(t, s, keys[0], "r", shared0, false, false)
	for _, k := range keys {
		if ok, _ := s.Release(ctx, k, "t"); !ok {
			t.Fatalf("release %s", k)
		}
	}
	share(t, s, keys[2], "r", shared0, false, true)
	if ok, _, err := s.TryAcquireAll(ctx, keys, "t2", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireAll while a share holds a key = %v, %v", ok, err)
	}
	if _, _, err := s.TryAcquireAll(ctx, nil, "t", shareTTL, false); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Fatalf("TryAcquireAll of no keys: %v, want ErrInvalidOption", err)
	}
}

// On a Cluster, keys of several slots are refused with ErrNotAtomic before
// anything is sent; keys of one hash tag go in one script.
func TestAcquireAllCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0)
	c := cl.Client(t)
	rounds := &redistest.RoundTrips{}
	c.AddHook(rounds)
	s := redisstore.New(c)
	defer s.Close()
	// redisscript.Slot agrees with the server's CLUSTER KEYSLOT, hash tags
	// included.
	for _, k := range []string{"", "foo", "123456789", "multi:a", "prefix{name}", "prefix{name}:shares", "{user1000}.following",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "a{b", "a}b{c}", "lock:{héllo}"} {
		want, err := cl.Slot(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if got := redisscript.Slot(k); got != want {
			t.Fatalf("Slot(%q) = %d, the server says %d", k, got, want)
		}
	}
	rounds.N.Store(0)
	cross := []string{"multi:a", "multi:b", "multi:c"}
	if redisscript.OneSlot(cross) {
		t.Fatal("the test's keys share a slot")
	}
	_, _, err := s.TryAcquireAll(ctx, cross, "t", shareTTL, true)
	if !errors.Is(err, lockstore.ErrNotAtomic) {
		t.Fatalf("TryAcquireAll of keys of several slots: %v, want ErrNotAtomic", err)
	}
	if n := rounds.N.Load(); n != 0 {
		t.Fatalf("TryAcquireAll refused the keys after %d round trips, want none", n)
	}
	one := []string{"multi:{tag}a", "multi:{tag}b", "multi:{tag}c"}
	ok, fences, err := s.TryAcquireAll(ctx, one, "t", shareTTL, true)
	if !ok || err != nil || len(fences) != 3 {
		t.Fatalf("TryAcquireAll of keys of one hash tag = %v, %v, %v", ok, fences, err)
	}
	for _, k := range one {
		if v := c.Get(ctx, k).Val(); v != "t" {
			t.Fatalf("%s holds %q", k, v)
		}
	}
	// Shares on a Cluster: the companion keys share the key's slot.
	key := "share:{tag2}"
	share(t, s, key, "r", permits2, true, true)
	if ok, err := s.ReleaseShare(ctx, key, "r"); !ok || err != nil {
		t.Fatalf("ReleaseShare on a Cluster = %v, %v", ok, err)
	}
}

// The marker is never taken for a token: the fair queue of the name waits
// while shares live, and gets the name once they end.
func TestSharesAndTheFairQueue(t *testing.T) {
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	key := uniq(t)
	share(t, s, key, "r", shared0, false, true)
	g, err := s.Enqueue(ctx, key, "q", shareTTL, shareTTL, false)
	if err != nil || g.OK {
		t.Fatalf("Enqueue while a share lives = %+v, %v; want a wait", g, err)
	}
	i, g, err := s.Poll(ctx, key, []lockstore.Waiter{{Token: "q", TTL: shareTTL}}, shareTTL, false)
	if err != nil || i >= 0 {
		t.Fatalf("Poll while a share lives = %d, %+v, %v; want a wait", i, g, err)
	}
	if ok, err := s.ReleaseShare(ctx, key, "r"); !ok || err != nil {
		t.Fatalf("ReleaseShare = %v, %v", ok, err)
	}
	g, err = s.Enqueue(ctx, key, "q", shareTTL, shareTTL, false)
	if err != nil || !g.OK {
		t.Fatalf("Enqueue after the last share = %+v, %v; want the name", g, err)
	}
}

// Redlock keeps one holder per name: it is no Sharer, and a Locker on it
// refuses shared holds and permits with a clear ErrInvalidOption, sending
// nothing. AcquireAll takes its names one by one (it is no MultiAcquirer).
func TestRedlockRefusesShares(t *testing.T) {
	nodes := redistest.StartNodes(t, 3)
	r := redisstore.NewRedlock(nodes.Clients(t))
	if _, ok := any(r).(lockstore.Sharer); ok {
		t.Fatal("Redlock is a Sharer: shares on a quorum of masters are not designed")
	}
	if _, ok := any(r).(lockstore.MultiAcquirer); ok {
		t.Fatal("Redlock is a MultiAcquirer")
	}
	l := core.NewWithStore(r, core.WithTTL(shareTTL))
	defer l.Close()
	for _, opt := range []core.CallOption{core.Shared(), core.Permits(2)} {
		lease, err := l.Acquire(context.Background(), uniq(t), opt)
		if !errors.Is(err, core.ErrInvalidOption) {
			if lease != nil {
				_ = lease.Release(context.Background())
			}
			t.Fatalf("a shared hold on Redlock: %v, want ErrInvalidOption", err)
		}
		if !strings.Contains(err.Error(), "Sharer") {
			t.Fatalf("the error does not say what is missing: %v", err)
		}
		t.Log(err)
	}
	names := []string{uniq(t), uniq(t)}
	lease, err := l.AcquireAll(context.Background(), names)
	if err != nil {
		t.Fatalf("AcquireAll on Redlock: %v", err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Through Sentinel (a failover client, a *redis.Client) any keys go in one
// script, whatever their slots: one master runs it.
func TestAcquireAllSentinel(t *testing.T) {
	ctx := context.Background()
	d := redistest.StartSentinel(t)
	s := redisstore.New(d.Client(t))
	defer s.Close()
	keys := []string{"multi:a", "multi:b", "multi:c"}
	ok, fences, err := s.TryAcquireAll(ctx, keys, "t", shareTTL, true)
	if !ok || err != nil || len(fences) != 3 {
		t.Fatalf("TryAcquireAll of keys of several slots through Sentinel = %v, %v, %v", ok, fences, err)
	}
	share(t, s, "share", "r", permits2, true, true)
}
