package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// watchdog is the goroutine that renews a lease (WithWatchdog).
type watchdog struct {
	stopOnce sync.Once
	stop     chan struct{} // closed to end the renewals
	moved    chan struct{} // Extend changed the expiry: reschedule
	cancel   context.CancelFunc
	exited   chan struct{} // closed when the goroutine has returned
}

// startWatchdog starts renewing l; called once, by Locker.newLease.
func (l *Lease) startWatchdog() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchdog{stop: make(chan struct{}), moved: make(chan struct{}, 1), cancel: cancel, exited: make(chan struct{})}
	l.watch = w
	go l.renew(ctx, w)
}

// signal asks the watchdog to stop and cancels a renewal in flight, without
// waiting; nil-safe. The lease's mutex may be held.
func (w *watchdog) signal() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() {
		close(w.stop)
		w.cancel()
	})
}

// reschedule tells the watchdog that Extend moved the lease's expiry (and
// maybe its TTL), so that the next renewal is timed from it: an Extend to a
// shorter TTL would otherwise expire before the renewal planned for the old
// one. Nil-safe; it does not block.
func (w *watchdog) reschedule() {
	if w == nil {
		return
	}
	select {
	case w.moved <- struct{}{}:
	default: // one pending is enough
	}
}

// stopWatchdog stops l's watchdog and waits until it has returned, so that
// no renewal is in flight afterwards, and reports whether it has. It waits
// up to the I/O timeout: a renewal stuck in a client that ignores context
// deadlines (ContextTimeoutEnabled off) is left to end on its own, as it
// can only reset the TTL of a key that still holds the lease's token, never
// recreate one. It must not run on the watchdog's own goroutine.
func (l *Lease) stopWatchdog() bool {
	if l.watch == nil {
		return true
	}
	l.watch.signal()
	t := time.NewTimer(l.locker.cfg.ioTimeout)
	defer t.Stop()
	select {
	case <-l.watch.exited:
		return true
	case <-t.C:
		return false
	}
}

// renewEvery is the renewal interval for a lease of the given TTL: the
// configured interval, or a third of the TTL when none is set or when the
// TTL is shorter than two intervals.
func (l *Locker) renewEvery(ttl time.Duration) time.Duration {
	every := l.cfg.watchdogInterval
	if every <= 0 || ttl < 2*every {
		every = ttl / 3
	}
	return max(every, time.Millisecond/3)
}

// renew is the watchdog loop. Every interval it resets the lock's lifetime to
// the lease's TTL with compare-and-extend. A renewal that finds the lock gone
// ends the lease (extend closes Done). One that fails in the store is retried
// every quarter interval until only one interval of validity is left; the
// lease is then given up as lost, so that Done closes while the lock is still
// ours in the store, not after it may have passed to someone else.
//
// Renewals are timed from when the command that set the current expiry was
// sent (see untilRenewal), not from when its reply came back: on a slow link
// the schedule would otherwise slip by a round trip per renewal towards the
// give-up time, which is fixed by the expiry.
func (l *Lease) renew(ctx context.Context, w *watchdog) {
	defer close(w.exited)
	timer := time.NewTimer(l.untilRenewal())
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.moved:
			timer.Reset(l.untilRenewal())
			continue
		case <-timer.C:
		}
		l.mu.Lock()
		every := l.locker.renewEvery(l.basis)
		l.mu.Unlock()
		giveUp := l.ValidUntil().Add(-every)
		rctx, cancel := context.WithDeadline(ctx, giveUp) // a renewal past giveUp is too late
		// A client without ContextTimeoutEnabled ignores rctx's deadline
		// and waits for its own read timeout: give the lease up at giveUp
		// all the same, while the call is still running.
		late := time.AfterFunc(time.Until(giveUp), func() {
			select {
			case <-w.stop: // released or handed off meanwhile
			default:
				l.giveUp()
			}
		})
		err := l.extend(rctx, 0) // the lease's TTL once an Extend in flight is done
		late.Stop()
		cancel()
		switch {
		case err == nil && !l.locker.cfg.watchdog:
			return // a granted lease caught up with its TTL (see want)
		case err == nil:
			timer.Reset(l.untilRenewal())
		case errors.Is(err, ErrNotHeld):
			return // lost, released or handed off; Done is closed
		default: // the store failed, or giveUp passed, or stop cancelled the call
			select {
			case <-w.stop:
				return
			default:
			}
			left := time.Until(giveUp)
			if left <= 0 {
				l.giveUp()
				return
			}
			timer.Reset(min(every/4, left))
		}
	}
}

// untilRenewal returns how long the watchdog waits for l's next renewal: one
// interval after the command that set l's expiry was sent. A lease handed off
// without a round trip inherits an older expiry, and is renewed sooner.
func (l *Lease) untilRenewal() time.Duration {
	l.mu.Lock()
	ttl, validUntil := l.basis, l.validUntil
	l.mu.Unlock()
	sent := validUntil.Add(-validFor(ttl))
	return max(0, time.Until(sent.Add(l.locker.renewEvery(ttl))))
}

// giveUp marks a lease lost that the watchdog could not renew in time.
func (l *Lease) giveUp() {
	l.lose(OutcomeGaveUp)
}
