package hotspot

import (
	"context"
	"errors"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Local handoff (lock cohorting, WithHandoff): a holder that releases while
// goroutines of this process wait for the same name gives its Redis lock,
// together with the local lock, to one of them, which turns it into a lease
// of its own with core.Lease.Handoff.
//
// The lease travels over the entry's unbuffered pass channel, sent without
// blocking: the send succeeds only if a waiter is parked on the channel at
// that moment, and then that waiter has taken the lease, in one step. A waiter
// that gives up (its context ends, its deadline passes) leaves the channel
// before the send or receives the lease and owns it; there is no moment when
// a lease is on its way to nobody. When no waiter is parked, the holder
// releases to Redis as usual.

// handOff passes lease, with the local lock of e held by its releaser, to a
// waiter parked on e, if handoff is on, fewer than k handoffs were made in a
// row, and the lease still holds its lock. It reports whether the lease went.
//
// A lease that no longer holds its lock (core.Lease.Lost: its validity
// passed, an Extend found the key gone, or its watchdog gave up while Redis
// was unreachable) is not passed on: the caller releases it through next,
// whose compare-and-delete removes its key if the key still holds its token.
// Should the lease be lost between this check and the waiter's takeover,
// core.Lease.Handoff refuses it and deletes its key, and the waiter takes the
// lock in Redis (see takeOver).
func (g *Guard) handOff(lease *core.Lease, e *entry) bool {
	if e.pass == nil || e.streak >= g.cfg.handoff || lease.Lost() {
		return false
	}
	e.streak++ // the receiver reads it after the send
	select {
	case e.pass <- lease:
		return true
	default:
		e.streak--
		return false
	}
}

// passFor returns the channel on which the waiter of req may be handed a
// lease: e's, or nil (never ready) when handoff is off or when Handoff would
// refuse req's TTL, which would strand the lock in Redis with nobody to
// release it.
func (g *Guard) passFor(req *core.Request, e *entry) <-chan *core.Lease {
	if req.TTL < time.Millisecond || req.TTL > core.MaxTTL {
		return nil
	}
	return e.pass
}

// takeOver makes prev, handed off to the waiter of req, the waiter's own
// lease. It reports ok false, with no error, when prev's lock was lost in the
// meantime: the caller then takes the lock in Redis. On other errors (the
// context ended or Redis failed during a refreshing extend) Handoff has
// removed the lock from Redis.
func (g *Guard) takeOver(ctx context.Context, req *core.Request, prev *core.Lease) (lease *core.Lease, ok bool, err error) {
	lease, err = prev.Handoff(ctx, req)
	switch {
	case err == nil:
		g.handoffs.Add(1)
		return lease, true, nil
	case errors.Is(err, core.ErrNotHeld):
		return nil, false, nil
	}
	return nil, false, err
}
