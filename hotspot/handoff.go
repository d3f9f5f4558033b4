package hotspot

import (
	"github.com/reqlock/reqlock/core"
)

// Local hand-off (lock cohorting, WithHandoff): a holder that releases while
// goroutines of this process wait for the same name gives its Redis lock,
// together with the local lock, to one of them, which the Locker turns into a
// lease of its own without a round trip to Redis (or with one
// compare-and-extend when little of the TTL is left).
//
// The Locker drives it: at a release, it offers the lease to the turn (Pass)
// before it releases in Redis, and only for a lease that still holds its
// lock; the waiter that gets it finds it in its turn (Passed) and the Locker
// takes the lock over. The lease travels over the entry's unbuffered pass
// channel, sent without blocking: the send succeeds only if a waiter is
// parked on the channel at that moment, and then that waiter has taken the
// lease, in one step. A waiter that gives up (its context ends, its deadline
// passes) leaves the channel before the send or receives the lease and owns
// it; there is no moment when a lease is on its way to nobody. When no waiter
// is parked, the holder releases to Redis as usual.

// Pass hands lease, the Redis lock of the turn's holder, to a goroutine
// parked on the same local lock, with the local lock, if hand-off is on and
// fewer than k hand-offs were made in a row; it reports whether the lease
// went. After true the turn is over: the receiver holds the local lock.
func (t *turn) Pass(lease *core.Lease) bool {
	if t.ended {
		return false
	}
	t.settle(lease)
	e := t.e
	if e.pass == nil || e.streak >= t.g.cfg.handoff {
		return false
	}
	e.streak++ // the receiver reads it after the send
	select {
	case e.pass <- lease:
		t.end() // the local lock went with the lease
		return true
	default:
		e.streak--
		return false
	}
}

// settle learns, at the end of the turn, whether the lease handed off at
// Enter was taken over: the Locker takes a lock over with the lease's own
// token, and acquires in Redis (with a new token) when it cannot, because the
// lease was lost meanwhile or belongs to another Locker sharing the Guard
// (which then releases it in its own Redis). A takeover counts as a hand-off;
// a lock taken in Redis starts a new streak. lease is the turn's own lease,
// nil when the Locker ends the turn without one (a failed acquire, or the
// release of a lost lease, which is not handed on).
func (t *turn) settle(lease *core.Lease) {
	if t.settled || t.passed == nil {
		return
	}
	t.settled = true
	switch {
	case lease != nil && lease.Token() == t.passed.Token():
		t.g.handoffs.Add(1)
	case lease != nil:
		t.e.streak = 0 // taken in Redis after all
		t.g.refused.Add(1)
	}
}
