package core

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// This file is the fair acquire (WithFair): instead of spinning, a waiter
// queues in the store (Queuer) and is granted the lock by the release of the
// holder before it.

// DefaultFairPatience is how long, with WithFair, a waiter's place in the
// queue outlives its last poll, unless WithFairPatience says otherwise.
const DefaultFairPatience = time.Second

// WithFair makes waiters queue in the store in arrival order, and makes a
// release grant the lock to the first waiter directly, instead of a race of
// spinning waiters that any of them may win (and that a process which just
// released often wins again). It needs a store that keeps queues (Queuer):
// the Redis store does; a Redlock quorum does not, and NewRedlock reports
// WithFair as an invalid option.
//
// The Redis store queues a waiter whose attempt finds the name held in the
// same round trip as that attempt (a sorted set and a hash next to the lock,
// in its hash slot). A release grants the lock to the first live waiter in
// the release script (the key is set to the waiter's token, with a fence
// drawn if the waiter asked for one) and tells it by pub/sub: a hand-over
// between processes costs the releaser's one round trip and the new holder
// none. A waiter that misses the message learns of its grant at its next
// poll.
//
// Waiters poll every third of their patience (WithFairPatience, default 1
// s), which keeps their place alive: a waiter that stops polling (its
// process died, or stalls) is skipped once its patience has passed, so a
// dead waiter delays those behind it by about its patience. A lock granted
// to a waiter is set for at most its patience at first, so that a lock
// granted to a waiter that died is freed by the same bound, not by its TTL;
// a live waiter extends it to its TTL when it holds it that long (at a third
// of the patience, one round trip, in the background). A waiter that gives
// up (wait budget, context) leaves the queue in one round trip; a grant that
// reached it meanwhile passes on to the next waiter.
//
// The uncontended path is unchanged: one round trip to acquire, one to
// release. With a LocalQueue (hotspot.Guard) only a process's local turn
// holder queues in the store, so a process has at most one entry per name,
// and its cohort hand-overs stay bounded by the Guard's WithHandoff.
// Lockers that share names should all use WithFair: a Locker without it
// takes a free name without looking at the queue.
func WithFair() Option {
	return func(c *config) { c.fair = true }
}

// WithFairPatience enables WithFair and sets how long a waiter's place in
// the queue outlives its last poll (default DefaultFairPatience): the bound
// on how long a dead waiter delays those behind it, and on how long a lock
// granted to a dead waiter stays taken. Waiters poll three times per
// patience, so a short patience costs more round trips while waiting. It
// must be at least 30 ms.
func WithFairPatience(d time.Duration) Option {
	return func(c *config) {
		c.fair = true
		c.fairPatience = d
	}
}

// minFairPatience is the smallest patience WithFairPatience takes.
const minFairPatience = 30 * time.Millisecond

// waitInLine is spin for WithFair: queue in the store, wait for a grant (by
// pub/sub, or found at a poll), give up at the deadline.
func (l *Locker) waitInLine(ctx context.Context, req *Request) (*Lease, error) {
	patience := l.cfg.fairPatience
	poll := patience / 3
	// One token for the whole wait: it is the waiter's place in the queue.
	// It is never used again after a failed call, whose clean-up the store
	// may still be running in the background.
	token := rand.Text()
	var timer *time.Timer
	var grants <-chan Grant
	stop := func() {}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		stop()
	}()
	for {
		if err := ctx.Err(); err != nil {
			l.leaveLine(ctx, req, token)
			return nil, err
		}
		req.Attempts++
		sent := time.Now()
		ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
		g, err := l.queuer.Enqueue(ioCtx, req.Key, token, req.TTL, patience, l.cfg.fencing)
		cancel()
		if err != nil {
			if cerr := callerErr(ctx); cerr != nil {
				return nil, cerr
			}
			return nil, l.storageErr("acquire", req.Name, err)
		}
		if g.OK {
			return l.grantedLease(req, token, g, sent), nil
		}
		left := time.Until(req.Deadline)
		if left <= 0 {
			l.leaveLine(ctx, req, token)
			return nil, l.timeoutErr(ctx, req)
		}
		if timer == nil {
			timer = time.NewTimer(min(poll, left))
			grants, stop = l.queuer.Grants(req.Key, token)
		} else {
			timer.Reset(min(poll, left))
		}
		select {
		case <-ctx.Done():
			l.leaveLine(ctx, req, token)
			return nil, ctx.Err()
		case <-timer.C:
		case g := <-grants:
			timer.Stop()
			if g.OK {
				// The grant came after our last poll found the name held,
				// so after that poll was sent: the lock lives at least
				// g.TTL from then, whenever the message arrived.
				return l.grantedLease(req, token, g, sent), nil
			}
			// a poll request: a grant may have been missed
		}
	}
}

// leaveLine takes token out of the queue of req's name: the waiter gives
// up. A grant that reached it meanwhile is passed on by the store. It is
// bounded by the I/O timeout; if it fails, the waiter's place dies after
// its patience all the same.
func (l *Locker) leaveLine(ctx context.Context, req *Request, token string) {
	ioCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ioTimeout)
	defer cancel()
	_ = l.queuer.Dequeue(ioCtx, req.Key, token)
}

// grantedLease is the lease of a waiter that holds req's name: taken at a
// poll sent at sent, or granted by a release. A grant may be set for less
// than req.TTL (the waiter's patience): the lease then extends it to req.TTL
// in the background, on the watchdog's schedule, once.
func (l *Locker) grantedLease(req *Request, token string, g Grant, sent time.Time) *Lease {
	ttl := g.TTL
	if ttl <= 0 || ttl > req.TTL {
		ttl = req.TTL
	}
	return l.shortLease(req.Name, req.Key, token, g.Fence, ttl, validity(sent, ttl), req.TTL)
}

// shortLease is newLease for a lock held for ttl that the lease should hold
// for want: when ttl is shorter, its watchdog (started here even without
// WithWatchdog) extends the lock to want in the background, a third of ttl
// after the command that set it.
func (l *Locker) shortLease(name, key, token string, fence int64, ttl time.Duration, validUntil time.Time, want time.Duration) *Lease {
	lease := &Lease{
		locker:     l,
		name:       name,
		key:        key,
		token:      token,
		fence:      fence,
		ttl:        ttl,
		validUntil: validUntil,
	}
	if ttl < want {
		lease.want = want
	}
	if l.cfg.watchdog || lease.want > 0 {
		lease.startWatchdog()
	}
	return lease
}

// checkFair reports why s cannot serve WithFair.
func checkFair(s Store) error {
	if _, ok := s.(Queuer); ok {
		return nil
	}
	if _, ok := s.(*redlockStore); ok {
		return fmt.Errorf("%w: WithFair: a Redlock quorum keeps no queue: each node would order its waiters apart, and no grant would hold a quorum", ErrInvalidOption)
	}
	return fmt.Errorf("%w: WithFair: the store (%T) keeps no queue (core.Queuer)", ErrInvalidOption, s)
}
