package core

import (
	"context"
	"errors"
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
// to req.TTL with one compare-and-extend. l is ended as by Release: its Done
// closes and later calls of Release and Extend on it touch nothing in Redis.
//
// Handoff fails with an error wrapping ErrNotHeld when l no longer holds the
// lock: released (its Redis release ran), lost, handed off already, or found
// gone by the extend. It fails with ErrInvalidOption when req is nil, names
// another key or has a TTL out of bounds, and leaves l untouched then. A
// nested lease cannot be handed off. When the extend fails with ErrStorage or
// the context's error, Handoff deletes the key if it still holds the token,
// so that no lock is left without a holder.
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
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: handoff %q: the lease was released or lost", ErrNotHeld, l.name)
	}
	l.handedOff = true
	l.released = true
	l.closeDoneLocked()
	validUntil, heldTTL := l.validUntil, l.ttl
	l.mu.Unlock()

	next := &Lease{
		locker:     l.locker,
		name:       req.Name,
		key:        l.key,
		token:      l.token,
		fence:      l.fence,
		ttl:        heldTTL,
		validUntil: validUntil,
	}
	if time.Until(validUntil) >= ttl-ttl/3 {
		return next, nil
	}
	if err := next.Extend(ctx, ttl); err != nil {
		if !errors.Is(err, ErrNotHeld) {
			l.locker.undo(ctx, l.key, l.token)
		}
		return nil, err
	}
	return next, nil
}
