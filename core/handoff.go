package core

import (
	"context"
	"fmt"
	"time"
)

// handoff ends l, whose holder passed it through the local queue (its state
// is passing), without releasing its lock in the store, and returns a new
// lease for name that holds the same key with the same token: the lock passes
// from one holder to the next without a release and a re-acquire (lock
// cohorting).
//
// The new lease keeps l's expiry while at least two thirds of ttl remain, and
// costs no round trip then; so does a lock that the fair queue granted for
// less than its TTL and that its watchdog has not extended yet (WithFair):
// the new lease's watchdog extends it in the background. Otherwise handoff
// resets the lock's lifetime to ttl with one compare-and-extend. With WithFencing it always makes that
// round trip, whose script also draws the new lease's own, higher fencing
// token: the holders that follow each other through a hand-off are fenced
// from each other like any two holders. With WithWatchdog the new lease is
// renewed by a watchdog of its own. l is handed off: its Done closes, its
// watchdog stops, and later calls of Extend on it touch nothing in the store.
//
// handoff fails with an error wrapping ErrNotHeld when l can no longer be
// handed off: not passing (released, lost, handed off already), or found
// gone by the extend. Whenever it fails, it deletes the key where it still
// holds the token, so that no lock is left without a holder.
func (l *Lease) handoff(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	ttl, err := checkTTL(ttl, "handoff")
	if err != nil {
		return nil, err
	}
	locker := l.locker
	l.mu.Lock()
	if l.state != statePassing {
		// A lease lost by its watchdog while it was being passed may still
		// hold its key, and its holder ran no store release: delete it
		// rather than strand it until its TTL.
		undo, held := l.state == stateLost, l.ttl
		if undo {
			l.state = stateReleased
		}
		l.mu.Unlock()
		if undo {
			locker.undo(ctx, l.key, l.token, held)
		}
		return nil, fmt.Errorf("%w: handoff %q: the lease was released or lost", ErrNotHeld, l.name)
	}
	l.state = stateHandedOff
	l.closeDoneLocked() // also stops l's watchdog: the next lease runs its own
	validUntil, heldTTL := l.validUntil, l.ttl
	l.mu.Unlock()
	stopped := l.stopWatchdog()
	l.mu.Lock()
	unsure := l.unsureTTL > 0
	l.mu.Unlock()
	if !stopped || unsure {
		// An extend of l (a renewal that stopping the watchdog cut at the
		// client, a failed Extend) may still land in the store, after any
		// extend sent now, and cut the lock back to its TTL under the next
		// holder's feet: no lease can count on the hold. End it instead;
		// the next holder takes the name from the store with a token of
		// its own, which no late extend of l can touch.
		locker.undo(ctx, l.key, l.token, heldTTL)
		return nil, fmt.Errorf("%w: handoff %q: an extend of the lease may still land", ErrNotHeld, l.name)
	}

	fencing := locker.cfg.fencing
	if !fencing && time.Until(validUntil) >= ttl-ttl/3 {
		return locker.newLease(name, l.key, l.token, l.fence, heldTTL, validUntil, hold{}), nil
	}
	if !fencing && l.want > 0 && time.Until(validUntil) >= heldTTL/3 {
		// A lock granted by the fair queue for the waiter's patience, not
		// extended yet: the next holder takes it as it is, and its own
		// watchdog extends it in the background, in time.
		return locker.shortLease(name, l.key, l.token, l.fence, heldTTL, validUntil, ttl), nil
	}
	ioCtx, cancel := context.WithTimeout(ctx, locker.cfg.ioTimeout)
	sent := time.Now()
	ok, fence, err := locker.store.Extend(ioCtx, l.key, l.token, ttl, fencing)
	cancel()
	if err != nil || !ok {
		// l is ended and no lease takes the hold: whatever is left of it (a
		// storage error or a cancellation may hide a hold; with a quorum store, a
		// minority of nodes may hold the key after a quorum was missed)
		// would otherwise stay locked without a holder until its TTL ends.
		// Compare-and-delete only ever deletes our own token.
		locker.undo(ctx, l.key, l.token, max(ttl, heldTTL))
	}
	switch {
	case err != nil:
		if cerr := callerErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, locker.storageErr("handoff", name, err)
	case !ok:
		return nil, fmt.Errorf("%w: handoff %q: the lock had expired", ErrNotHeld, name)
	}
	if !fencing {
		fence = l.fence
	}
	return locker.newLease(name, l.key, l.token, fence, ttl, validity(sent, ttl), hold{}), nil
}
