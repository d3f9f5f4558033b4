package rueidisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	redisstore "github.com/reqlock/reqlock/stores/redis"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
)

const shareTTL = time.Minute

// The shares of the two clients are one: permits taken through rueidis and
// through go-redis share the slots; a mode mismatch is seen across them;
// the waiting writer of one keeps the other's new shares out; and several
// keys go at once through either.
func TestSharesAcrossClients(t *testing.T) {
	ctx := context.Background()
	rue := newStore(t, newClient(t, shared.Addr()))
	gor := redisstore.New(shared.Client(t))
	defer gor.Close()
	key := "shares:" + t.Name()
	p2 := core.Hold{N: 2}
	for i, s := range []core.Sharer{rue, gor} {
		ok, slot, fence, err := s.TryAcquireShare(ctx, key, []string{"a", "b"}[i], shareTTL, p2, true)
		if !ok || slot != i || fence <= 0 || err != nil {
			t.Fatalf("share %d: %v, slot %d, fence %d, %v; want slot %d and a fence", i, ok, slot, fence, err, i)
		}
	}
	if ok, _, _, err := rue.TryAcquireShare(ctx, key, "c", shareTTL, p2, false); ok || err != nil {
		t.Fatalf("a third permit of 2 = %v, %v", ok, err)
	}
	if _, _, _, err := rue.TryAcquireShare(ctx, key, "c", shareTTL, core.Hold{}, false); !errors.Is(err, core.ErrModeMismatch) {
		t.Fatalf("a shared hold while permits live: %v, want ErrModeMismatch", err)
	}
	if ok, _, err := rue.TryAcquire(ctx, key, "w", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquire while permits live = %v, %v", ok, err)
	}
	if ok, _, err := rue.ExtendShare(ctx, key, "b", shareTTL, false); !ok || err != nil {
		t.Fatalf("ExtendShare through rueidis of a go-redis share = %v, %v", ok, err)
	}
	if ok, _, err := rue.TryAcquireWaiting(ctx, key, "w", shareTTL, shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting while permits live = %v, %v", ok, err)
	}
	for _, tok := range []string{"a", "b"} {
		if ok, err := rue.ReleaseShare(ctx, key, tok); !ok || err != nil {
			t.Fatalf("ReleaseShare(%s) = %v, %v", tok, ok, err)
		}
	}
	if ok, _, _, err := gor.TryAcquireShare(ctx, key, "d", shareTTL, p2, false); ok || err != nil {
		t.Fatalf("a share while the writer waits = %v, %v; want false", ok, err)
	}
	if ok, _, err := rue.TryAcquireWaiting(ctx, key, "w", shareTTL, shareTTL, false); !ok || err != nil {
		t.Fatalf("TryAcquireWaiting of the freed name = %v, %v", ok, err)
	}
	if ok, err := gor.Release(ctx, key, "w"); !ok || err != nil {
		t.Fatalf("Release(w) = %v, %v", ok, err)
	}
	keys := []string{key + ":x", key + ":y"}
	ok, fences, err := rue.TryAcquireAll(ctx, keys, "m", shareTTL, true)
	if !ok || err != nil || len(fences) != 2 || fences[0] <= 0 || fences[1] <= 0 {
		t.Fatalf("TryAcquireAll = %v, %v, %v", ok, fences, err)
	}
	if ok, _, err := gor.TryAcquireAll(ctx, []string{key, keys[1]}, "n", shareTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireAll of a held key through go-redis = %v, %v", ok, err)
	}
	if v, _ := shared.Client(t).Get(ctx, key).Result(); v != "" {
		t.Fatalf("a failed TryAcquireAll set %s to %q", key, v)
	}
	if ok, _, _, err := rue.TryAcquireShare(ctx, key, "s", time.Microsecond, core.Hold{}, false); ok || !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("a share for a µs = %v, %v; want ErrInvalidOption", ok, err)
	}
}

// On a Cluster, keys of several slots are refused with ErrNotAtomic (the
// rueidis builder would panic on such a command: nothing is built); keys of
// one hash tag go in one script; shares work, their keys in the key's slot.
func TestAcquireAllCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0)
	s := newStore(t, newClient(t, cl.Addrs()...))
	cross := []string{"multi:a", "multi:b", "multi:c"}
	if redisscript.OneSlot(cross) {
		t.Fatal("the test's keys share a slot")
	}
	if _, _, err := s.TryAcquireAll(ctx, cross, "t", shareTTL, true); !errors.Is(err, core.ErrNotAtomic) {
		t.Fatalf("TryAcquireAll of keys of several slots: %v, want ErrNotAtomic", err)
	}
	one := []string{"multi:{tag}a", "multi:{tag}b", "multi:{tag}c"}
	ok, fences, err := s.TryAcquireAll(ctx, one, "t", shareTTL, true)
	if !ok || err != nil || len(fences) != 3 {
		t.Fatalf("TryAcquireAll of keys of one hash tag = %v, %v, %v", ok, fences, err)
	}
	c := cl.Client(t)
	for _, k := range one {
		if v := c.Get(ctx, k).Val(); v != "t" {
			t.Fatalf("%s holds %q", k, v)
		}
	}
	key := "share:{tag2}"
	if ok, slot, _, err := s.TryAcquireShare(ctx, key, "r", shareTTL, core.Hold{N: 3}, true); !ok || slot != 0 || err != nil {
		t.Fatalf("TryAcquireShare on a Cluster = %v, %d, %v", ok, slot, err)
	}
	if ok, err := s.ReleaseShare(ctx, key, "r"); !ok || err != nil {
		t.Fatalf("ReleaseShare on a Cluster = %v, %v", ok, err)
	}
}

// A share attempt that fails while the server is frozen is undone when it
// resumes: the clean-up (a release of its share, retried in the
// background) removes the share the late attempt took, if it was sent;
// another token's share is left alone. A second clean-up whose share
// comes after its first try removes it too.
func TestUndoOfAShareOnAFrozenServer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newStore(t, newClient(t, srv.Addr()), rueidisstore.WithIOTimeout(time.Second))
	key := "frozen-share"
	if ok, _, _, err := s.TryAcquireShare(ctx, key, "other", 10*time.Minute, core.Hold{N: 3}, false); !ok || err != nil {
		t.Fatalf("TryAcquireShare(other) = %v, %v", ok, err)
	}
	srv.Freeze(t)
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, _, _, err := s.TryAcquireShare(actx, key, "late", 5*time.Minute, core.Hold{N: 3}, false)
	cancel()
	n, _ := rueidisstore.PendingShareUndos(s)
	srv.Thaw(t)
	if err == nil {
		t.Fatal("TryAcquireShare on a frozen server succeeded")
	}
	if n != 1 {
		t.Fatalf("%d share clean-ups pending after a failed attempt, want 1", n)
	}
	// A clean-up whose share arrives after its first try.
	s.UndoShare(ctx, key, "later", 5*time.Minute, time.Now())
	if ok, _, _, err := s.TryAcquireShare(ctx, key, "later", 5*time.Minute, core.Hold{N: 3}, false); !ok || err != nil {
		t.Fatalf("TryAcquireShare(later) = %v, %v", ok, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		shares := c.ZRange(ctx, redisscript.SharesKey(key), 0, -1).Val()
		if len(shares) == 1 && shares[0] == "other" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the thaw the shares are %v, want [other]", shares)
		}
	}
}
