package storetest

import (
	"time"

	"github.com/reqlock/reqlock/core"
)

// The properties of a HeldAcquirer (core.HeldAcquirer), the later
// exclusive attempts of an Acquire: TryAcquire's contract, whatever the
// command it sends, and on a Sharer, shares told apart from an exclusive
// holder with nothing written. Skipped for a store that does not
// implement it.

// heldAcquirer returns a new client of the store as a core.HeldAcquirer,
// or skips the property if the store is not one.
func (s *suite) heldAcquirer() (core.Store, core.HeldAcquirer) {
	s.t.Helper()
	st := s.store()
	h, ok := st.(core.HeldAcquirer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.HeldAcquirer: later attempts are TryAcquire or TryAcquireWaiting", st)
	}
	return st, h
}

// tryHeld calls h.TryAcquireHeld and fails the subtest on an error. A lock
// it takes is released when the subtest ends.
func (s *suite) tryHeld(st core.Store, h core.HeldAcquirer, key, tok string, ttl time.Duration, fenced bool) (ok, shared bool, fence int64) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, shared, fence, err := h.TryAcquireHeld(ctx, key, tok, ttl, fenced)
	if err != nil {
		s.t.Fatalf("storetest: TryAcquireHeld(%q, ttl %v, fenced %v): %v", key, ttl, fenced, err)
	}
	if ok && shared {
		s.t.Fatalf("storetest: TryAcquireHeld of %s reported both ok and shared", key)
	}
	if ok {
		s.t.Cleanup(func() {
			ctx, cancel := call()
			defer cancel()
			_, _ = st.Release(ctx, key, tok)
		})
	}
	return ok, shared, fence
}

// heldAcquireIsTryAcquire: TryAcquireHeld takes a free key (with a fence
// above the last when fenced), reports false and not shared on a key
// another token holds exclusively and leaves it to its holder, and counts
// a re-sent attempt of the holder as acquired, with its TTL reset.
func heldAcquireIsTryAcquire(s *suite) {
	st, h := s.heldAcquirer()
	b := s.store()
	for _, fenced := range []bool{false, true} {
		key, holder := s.key(), token()
		last := int64(0)
		if fenced {
			before := token()
			last = s.acquire(b, key, before, s.long, true)
			if !s.release(b, key, before) {
				s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
			}
		}
		ok, _, fence := s.tryHeld(st, h, key, holder, s.long, fenced)
		if !ok {
			s.t.Fatalf("storetest: TryAcquireHeld of the free key %s (fenced %v) reported false", key, fenced)
		}
		if fenced && fence <= last {
			s.t.Fatalf("storetest: TryAcquireHeld of %s drew fence %d, not above the last holder's %d", key, fence, last)
		}
		if !fenced && fence != 0 {
			s.t.Fatalf("storetest: TryAcquireHeld of %s without fencing returned fence %d, want 0", key, fence)
		}
		if ok, shared, _ := s.tryHeld(st, h, key, token(), s.long, fenced); ok || shared {
			s.t.Fatalf("storetest: TryAcquireHeld of %s, which another token holds exclusively, reported ok %v, shared %v; want neither", key, ok, shared)
		}
		if ok, _, _ := s.tryHeld(st, h, key, holder, s.long, fenced); !ok {
			s.t.Fatalf("storetest: TryAcquireHeld of %s sent again with the token that holds it reported false: a retried attempt would wait for itself", key)
		}
		if !s.release(b, key, holder) {
			s.t.Fatalf("storetest: Release of %s by the holder that TryAcquireHeld made reported false: another attempt took it over", key)
		}
	}
	// A re-sent attempt resets the TTL, as TryAcquire's does
	// (ResentAcquireSucceedsAndResetsTTL).
	for ttl := s.ttl; ; ttl *= 2 {
		key, holder := s.key(), token()
		start := time.Now()
		s.acquire(st, key, holder, ttl, false)
		set := time.Now()
		if ok, _, _ := s.tryHeld(st, h, key, holder, s.long, false); !ok {
			s.t.Fatalf("storetest: TryAcquireHeld of %s sent again with the token that holds it reported false", key)
		}
		if time.Since(start) >= s.earliest(ttl) {
			if ttl >= s.long {
				s.t.Fatalf("storetest: this process stalled past the TTL between every acquire and its resending, up to a TTL of %v: cannot tell whether a resent TryAcquireHeld resets the TTL", ttl)
			}
			continue
		}
		sleepUntil(set.Add(s.surelyExpired(ttl) + s.slack))
		if !s.held(b, key) {
			s.t.Fatalf("storetest: %s was free %v after a lock with TTL %v that TryAcquireHeld sent again with TTL %v: the resent attempt did not reset the TTL",
				key, time.Since(start).Round(time.Millisecond), ttl, s.long)
		}
		return
	}
}

// heldAcquireReportsShares: on a Sharer, TryAcquireHeld of a key that
// shares (shared holds or permits) hold reports shared and writes nothing:
// the shares stay, and a new share still comes in (no waiting writer is
// recorded: the Locker records it with TryAcquireWaiting); once the shares
// are gone, it takes the key.
func heldAcquireReportsShares(s *suite) {
	shs := s.sharers(2)
	a, c := shs[0], shs[1]
	h, ok := core.Store(a).(core.HeldAcquirer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.HeldAcquirer", a)
	}
	for _, hold := range []core.Hold{shared, permits(3)} {
		for _, fenced := range []bool{false, true} {
			key, r1, r2 := s.key(), token(), token()
			s.share(a, key, r1, s.long, hold, fenced, "of a free key")
			ok, isShared, fence := s.tryHeld(a, h, key, token(), s.long, fenced)
			if ok || !isShared || fence != 0 {
				s.t.Fatalf("storetest: TryAcquireHeld of %s, which a %v holds (fenced %v), reported ok %v, shared %v, fence %d; want shared only",
					key, hold, fenced, ok, isShared, fence)
			}
			s.share(c, key, r2, s.long, hold, fenced, "after a TryAcquireHeld that found shares: it must write nothing, no waiting writer's record")
			for _, r := range []string{r1, r2} {
				sh := a
				if r == r2 {
					sh = c
				}
				if !s.releaseShare(sh, key, r) {
					s.t.Fatalf("storetest: ReleaseShare of %s by a %v holder reported false after TryAcquireHeld: the attempt touched the shares", key, hold)
				}
			}
			if ok, isShared, _ := s.tryHeld(a, h, key, token(), s.long, fenced); !ok || isShared {
				s.t.Fatalf("storetest: TryAcquireHeld of %s once its shares were released reported ok %v, shared %v; want it taken", key, ok, isShared)
			}
		}
	}
}
