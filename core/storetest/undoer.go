package storetest

import (
	"time"

	"github.com/reqlock/reqlock/core"
)

// The properties of an Undoer (core.Undoer), the background removal to
// which the Locker hands a failed release: it removes the key its token
// holds, and never one that another token holds; a Queuer's Undo also
// takes a waiter that has gone out of the queue. Each is skipped for a
// store that does not implement it.

// undoer returns a new client of the store as an Undoer, or skips.
func (s *suite) undoer() (core.Store, core.Undoer) {
	s.t.Helper()
	st := s.store()
	u, ok := st.(core.Undoer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.Undoer: a failed release is left to the lock's TTL", st)
	}
	return st, u
}

// undoRounds is how long the tests give an Undo's background rounds to
// run: internal/undo sends one every 250 ms.
const undoRounds = time.Second

// undoByHolderFreesLock: Undo with the token that holds a key frees it, at
// once or in the background, long before its TTL.
func undoByHolderFreesLock(s *suite) {
	a, u := s.undoer()
	b := s.store()
	key, holder := s.key(), token()
	s.acquire(a, key, holder, s.long, false)
	ctx, cancel := call()
	sent := time.Now()
	u.Undo(ctx, key, holder, s.long, sent)
	cancel()
	for s.held(b, key) {
		if time.Since(sent) > s.long/3 {
			s.t.Fatalf("storetest: Undo of %s by the token that holds it left the lock held for %v (TTL %v)",
				key, time.Since(sent).Round(time.Millisecond), s.long)
		}
		time.Sleep(s.poll)
	}
}

// undoByOtherTokenKeepsLock: Undo with a token that does not hold a key
// leaves it to its holder, then and in the background.
func undoByOtherTokenKeepsLock(s *suite) {
	a, u := s.undoer()
	b := s.store()
	key, holder := s.key(), token()
	s.acquire(a, key, holder, s.long, false)
	ctx, cancel := call()
	u.Undo(ctx, key, token(), s.long, time.Now())
	cancel()
	time.Sleep(undoRounds)
	if !s.held(b, key) {
		s.t.Fatalf("storetest: Undo of %s with a token that does not hold it freed the lock: another token took it", key)
	}
	if !s.release(a, key, holder) {
		s.t.Errorf("storetest: Release of %s by its holder reported false after another token's Undo", key)
	}
}

// undoOfWaiterLeavesQueue: for a store that is a Queuer too, Undo with the
// token of a waiter (which holds nothing) takes it out of the key's queue,
// then and in the background: the holder's release grants the key to
// nobody, where it would grant it to a waiter that has gone.
func undoOfWaiterLeavesQueue(s *suite) {
	st, u := s.undoer()
	q, ok := st.(core.Queuer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.Queuer: no queue to leave", st)
	}
	key, holder, waiter := s.key(), token(), token()
	s.takeFree(q, key, holder)
	s.queue(q, key, waiter, s.long, false)
	ctx, cancel := call()
	u.Undo(ctx, key, waiter, s.long, time.Now())
	cancel()
	time.Sleep(undoRounds)
	if !s.held(st, key) {
		s.t.Fatalf("storetest: Undo of a waiter of %s freed the lock its holder holds", key)
	}
	if !s.release(st, key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false after a waiter's Undo", key)
	}
	if s.held(st, key) {
		s.t.Fatalf("storetest: after Undo of its only waiter, the release of %s granted it (to the waiter that had gone)", key)
	}
}
