package storetest

import (
	"github.com/reqlock/reqlock/core"
)

// The properties of a FreeAcquirer (core.FreeAcquirer), the first attempt
// of an Acquire: TryAcquire's contract, whatever the command it sends.
// Skipped for a store that does not implement it.

// freeAcquireIsTryAcquire: TryAcquireFree takes a free key (with a fence
// above the last when fenced), reports false on a key another token holds
// and leaves it to its holder. It may report false for a key its own token
// then holds, as a re-sent transmission does (see core.FreeAcquirer): the
// key is then held all the same (no other token takes it), and the
// token's TryAcquire, the Locker's next attempt, counts it as acquired.
func freeAcquireIsTryAcquire(s *suite) {
	st := s.store()
	f, ok := st.(core.FreeAcquirer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.FreeAcquirer: every attempt is a TryAcquire", st)
	}
	b := s.store()
	try := func(key, tok string, fenced bool) (bool, int64) {
		s.t.Helper()
		ctx, cancel := call()
		defer cancel()
		ok, fence, err := f.TryAcquireFree(ctx, key, tok, s.long, fenced)
		if err != nil {
			s.t.Fatalf("storetest: TryAcquireFree(%q, fenced %v): %v", key, fenced, err)
		}
		return ok, fence
	}
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
		ok, fence := try(key, holder, fenced)
		if !ok {
			// Allowed if holder holds the key: the Locker's next attempt.
			if taken, _ := s.tryAcquire(b, key, token(), s.long, fenced); taken {
				s.t.Fatalf("storetest: TryAcquireFree of the free key %s (fenced %v) reported false and left it free: another token took it", key, fenced)
			}
			if ok, fence = s.tryAcquire(st, key, holder, s.long, fenced); !ok {
				s.t.Fatalf("storetest: TryAcquireFree of the free key %s (fenced %v) reported false, and TryAcquire with its token too", key, fenced)
			}
		}
		if fenced && fence <= last {
			s.t.Fatalf("storetest: TryAcquireFree of %s drew fence %d, not above the last holder's %d", key, fence, last)
		}
		if !fenced && fence != 0 {
			s.t.Fatalf("storetest: TryAcquireFree of %s without fencing returned fence %d, want 0", key, fence)
		}
		if ok, _ := try(key, token(), fenced); ok {
			s.t.Fatalf("storetest: TryAcquireFree of %s, which another token holds, reported true", key)
		}
		if ok, _ := try(key, holder, fenced); !ok {
			if again, _ := s.tryAcquire(st, key, holder, s.long, fenced); !again {
				s.t.Fatalf("storetest: TryAcquire of %s with the token that holds it, after a TryAcquireFree that reported false, reported false", key)
			}
		}
		if !s.release(b, key, holder) {
			s.t.Fatalf("storetest: Release of %s by the holder that TryAcquireFree made reported false: another attempt took it over", key)
		}
	}
}
