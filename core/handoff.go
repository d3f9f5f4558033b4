package core

import (
	"context"
	"fmt"
	"time"
)

// Handoff ends l without releasing its lock in Redis and returns a new lease
// for req that holds the same key with the same token: the lock passes from
// one holder to the next without a release and a re-acquire. It is meant for
// handlers that queue local waiters for a name, such as the hotspot guard's
// lock cohorting: the releasing holder's Release handler does not call next,
// and the waiter that takes over calls Handoff with its own Request instead of
// calling next in its Acquire.
//
// The new lease keeps l's expiry while at least two thirds of req.TTL remain,
// and costs no round trip then; otherwise Handoff resets the lock's lifetime
// to req.TTL with one compare-and-extend. With WithFencing it always makes
// that round trip, whose script also draws the new lease's own, higher
// fencing token: the holders that follow each other through Handoff are
// fenced from each other like any two holders. With WithWatchdog the new
// lease is renewed by a watchdog of its own. l is ended as by Release: its
// Done closes, its watchdog stops, and later calls of Release and Extend on
// it touch nothing in Redis.
//
// Handoff fails with an error wrapping ErrNotHeld when l no longer holds the
// lock: released (its Redis release ran), lost, handed off already, or found
// gone by the extend. It fails with ErrInvalidOption when req is nil, names
// another key or has a TTL out of bounds, and leaves l untouched then. A
// nested lease cannot be handed off. Whenever the extend fails (ErrNotHeld,
// ErrStorage or the context's error), Handoff deletes the key where it still
// holds the token, so that no lock is left without a holder.
func (l *Lease) Handoff(ctx context.Context, req *Request) (*Lease, error) {
	if l == nil || l.parent != nil {
		return nil, fmt.Errorf("%w: handoff of a nil or nested lease", ErrNotHeld)
	}
	if req == nil || req.Key != l.key {
		return nil, fmt.Errorf("%w: Handoff: the request is nil or names another key than %q", ErrInvalidOption, l.key)
	}
	ttl, err := checkTTL(req.TTL, "Handoff")
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.deleted || l.lost || l.handedOff {
		// A lease lost by its watchdog may still hold its key, and nobody
		// ran its release: delete it rather than strand it until its TTL.
		undo := l.lost && !l.deleted && !l.handedOff
		l.deleted = l.deleted || undo
		l.mu.Unlock()
		if undo {
			l.locker.undo(ctx, l.key, l.token)
		}
		return nil, fmt.Errorf("%w: handoff %q: the lease was released or lost", ErrNotHeld, l.name)
	}
	l.handedOff = true
	l.released = true
	l.closeDoneLocked() // also stops l's watchdog: the next lease runs its own
	validUntil, heldTTL := l.validUntil, l.ttl
	l.mu.Unlock()
	stopped := l.stopWatchdog()

	locker := l.locker
	fencing := locker.cfg.fencing
	if !fencing && time.Until(validUntil) >= ttl-ttl/3 {
		return locker.newLease(req.Name, l.key, l.token, l.fence, heldTTL, validUntil), nil
	}
	ioCtx, cancel := context.WithTimeout(ctx, locker.cfg.ioTimeout)
	sent := time.Now()
	ok, fence, err := locker.store.extend(ioCtx, l.key, l.token, ttl, fencing)
	cancel()
	if err != nil || !ok {
		// l is ended and no lease takes the hold: whatever is left of it (a
		// storage error or a cancellation may hide a hold; with Redlock, a
		// minority of nodes may hold the key after a quorum was missed)
		// would otherwise stay locked without a holder until its TTL ends.
		// Compare-and-delete only ever deletes our own token.
		locker.undo(ctx, l.key, l.token)
	}
	switch {
	case err != nil:
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, locker.storageErr("handoff", req.Name, err)
	case !ok:
		return nil, fmt.Errorf("%w: handoff %q: the lock had expired", ErrNotHeld, req.Name)
	}
	if !fencing {
		fence = l.fence
	}
	validUntil = validity(sent, ttl)
	if !stopped {
		// A renewal of l still in flight may land after this extend and
		// cut the lock back to l's TTL: count on no more than that.
		validUntil = validity(sent, min(ttl, heldTTL))
	}
	return locker.newLease(req.Name, l.key, l.token, fence, ttl, validUntil), nil
}
