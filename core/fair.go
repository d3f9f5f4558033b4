package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// This file is the fair acquire (WithFair): instead of spinning, a waiter
// queues in the store (Queuer) and is granted the lock by the release of the
// holder before it.

// DefaultFairPatience is how long, with WithFair, a waiter's place in the
// queue outlives its last poll, unless WithFairPatience says otherwise.
const DefaultFairPatience = time.Second

// WithFair makes waiters queue in the store in arrival order, and makes a
// release grant the lock to the first live waiter directly, instead of a
// race of spinning waiters that any of them may win (and that a process
// which just released often wins again). It needs a store that keeps queues
// (Queuer); on any other store, WithFair is an invalid option.
//
// A grant heard by push is a hint, confirmed by a poll at once, and the
// lease is dated from the poll's answer; a waiter that misses it learns of
// its grant at its next poll. A Locker polls every third of the patience
// (WithFairPatience) for all its waiters of a name, in one round trip,
// which keeps their places alive: a waiter that stops polling is skipped
// once its patience has passed, and a lock granted to it is set for at most
// its patience at first, then extended to its TTL when it holds it that
// long. A waiter that gives up leaves the queue, passing on a grant that
// reached it. The uncontended path is unchanged, and with a LocalQueue
// (hotspot.Guard) only a process's local turn holder queues in the store.
// Lockers that share names should all use WithFair: one without it takes a
// free name without looking at the queue.
func WithFair() Option {
	return func(c *config) { c.fair = true }
}

// WithFairPatience enables WithFair and sets how long a waiter's place in
// the queue outlives its last poll (default DefaultFairPatience): the bound
// on how long a dead waiter delays those behind it, and on how long a lock
// granted to a dead waiter stays taken. A Locker polls three times per
// patience for its waiters of a name, so a short patience costs more round
// trips while waiting. It must be at least 30 ms. Where the round trip to
// the store is longer than a third of it, a Locker uses three round trips
// instead, for that name: a place that died between two polls would hand
// the waiter's turn to the one behind it.
func WithFairPatience(d time.Duration) Option {
	return func(c *config) {
		c.fair = true
		c.fairPatience = d
	}
}

// minFairPatience is the smallest patience WithFairPatience takes.
const minFairPatience = 30 * time.Millisecond

// waitInLine is spin for WithFair: queue in the store, wait for a grant
// (heard by pub/sub and confirmed by a poll, or found by the periodic poll
// of the Locker's waiters of the key), give up at the deadline.
func (l *Locker) waitInLine(ctx context.Context, req *AcquireCall) (*Lease, error) {
	// One token for the whole wait: it is the waiter's place in the queue.
	// It is never used again after a failed call, whose clean-up the store
	// may still be running in the background.
	token := l.newToken(req)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req.Attempts++
	patience := l.patience(l.lines.rtt(req.Key))
	sent := time.Now()
	ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
	g, err := l.queuer.Enqueue(ioCtx, req.Key, token, req.TTL, patience, l.cfg.fencing)
	cancel()
	rtt := time.Since(sent)
	if err != nil {
		// The Enqueue may still land (a stalled store runs it when it
		// resumes) and queue a waiter that has gone.
		l.dropPlace(ctx, req.Key, token, patience)
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
		l.leaveLine(ctx, req, token, patience)
		return nil, l.timeoutErr(ctx, req)
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	grants, stop := l.queuer.Grants(req.Key, token)
	defer stop()
	w := l.lines.join(l, req.Key, token, req.TTL, patience, rtt)
	gaveUp := func() {
		req.Attempts += l.lines.leave(w)
		l.leaveLine(ctx, req, token, l.lines.patience(w))
	}
	for {
		select {
		case <-ctx.Done():
			gaveUp()
			return nil, ctx.Err()
		case <-timer.C:
			gaveUp()
			return nil, l.timeoutErr(ctx, req)
		case p := <-w.polled:
			if p.err != nil {
				// The poll may have granted us the lock before it failed,
				// or may still land (a stalled store runs it when it
				// resumes) and queue us again: give up our place, in the
				// background until it can land no more.
				req.Attempts += l.lines.leave(w)
				l.dropPlace(ctx, req.Key, token, l.lines.patience(w))
				if cerr := callerErr(ctx); cerr != nil {
					return nil, cerr
				}
				return nil, l.storageErr("acquire", req.Name, p.err)
			}
			req.Attempts += l.lines.leave(w)
			return l.grantedLease(req, token, p.grant, p.sent), nil
		case <-grants:
			// A grant heard, or a request to poll (a grant may have been
			// missed): either way a hint, confirmed by a poll now. The
			// message may come late (a slow connection, a paused process),
			// after the grant expired and the name passed on; when, the
			// client cannot tell. The poll's answer can: it says whether
			// the store holds the name for us, and for how long from a
			// moment after the poll was sent.
			w.line.kick()
		}
	}
}

// leaveLine takes token, whose place was kept for patience, out of the
// queue of req's name: the waiter gives up. A grant that reached it
// meanwhile is passed on by the store. It is bounded by the I/O timeout; a
// Dequeue that fails is finished by dropPlace.
func (l *Locker) leaveLine(ctx context.Context, req *AcquireCall, token string, patience time.Duration) {
	ioCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ioTimeout)
	defer cancel()
	if l.queuer.Dequeue(ioCtx, req.Key, token) != nil {
		l.dropPlace(ctx, req.Key, token, patience)
	}
}

// dropPlace takes token, a waiter that has gone whose place was kept for
// patience, out of key's queue and
// passes on a grant it holds, where a call of the waiter failed and may
// still land: an Enqueue or a Poll sent into a stalled store runs when it
// resumes and queues the waiter again (a place nobody keeps alive, which
// delays those behind it by a patience, and which a release may grant the
// name to); a failed Dequeue may have done nothing. Through an Undoer (a
// Queuer's Undo takes a token that does not hold the key out of its queue)
// it is sent at once and then in the background until a late call can no
// longer matter (the store has answered for a patience, the life of a
// place); otherwise one Dequeue, and the place dies after its patience. It
// is bounded by the I/O timeout.
func (l *Locker) dropPlace(ctx context.Context, key, token string, patience time.Duration) {
	ioCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ioTimeout)
	defer cancel()
	if u, ok := l.store.(Undoer); ok {
		u.Undo(ioCtx, key, token, patience, time.Now())
		return
	}
	_ = l.queuer.Dequeue(ioCtx, key, token)
}

// lines are a Locker's fair waiters, by key. One goroutine per key with
// waiters polls the store for all of them (Queuer.Poll), every third of the
// patience and when a waiter asks (a grant may have been missed), and hands
// the answer to the waiter it concerns.
//
// A place lives a patience after the store ran the call that renewed it,
// and the polls of a line are sent one after the other: with a round trip
// longer than about two thirds of the patience, a place would die between
// two polls, and a release would grant the lock to the waiter behind it. So
// a line's patience is at least three times its round trip (the longest of
// its recent calls), and its polls are timed from when the one before was
// sent.
type lines struct {
	mu sync.Mutex
	m  map[string]*line
}

// line is the waiters of one key, and its poller's state.
type line struct {
	key      string
	rtt      time.Duration      // the round trip of its calls, recent and long (guarded by lines.mu)
	waiters  map[string]*inLine // by token
	inFlight chan struct{}      // closed when the poll in flight returns; nil when none is
	wake     chan struct{}      // a poll now, please
	quit     chan struct{}      // closed when the last waiter left
}

// inLine is one waiter of a line.
type inLine struct {
	line  *line
	token string
	ttl   time.Duration
	// polls counts the polls that included the waiter, and patience is the
	// longest for which one of its calls kept its place (both guarded by
	// lines.mu).
	polls    int
	patience time.Duration
	polled   chan polled // the grant or the error of a poll, once
}

// polled is a poll's answer to one waiter: the grant of a poll sent at
// sent, or the poll's error.
type polled struct {
	grant Grant
	sent  time.Time
	err   error
}

// join adds the waiter of token, queued for patience by an Enqueue that
// took rtt, to the line of key, and starts the line's poller when it is the
// first.
func (ls *lines) join(l *Locker, key, token string, ttl, patience, rtt time.Duration) *inLine {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ln := ls.m[key]
	if ln == nil {
		if ls.m == nil {
			ls.m = make(map[string]*line)
		}
		ln = &line{key: key, waiters: make(map[string]*inLine), wake: make(chan struct{}, 1), quit: make(chan struct{})}
		ls.m[key] = ln
		go l.keepLine(ln)
	}
	ln.rtt = max(ln.rtt, rtt)
	w := &inLine{line: ln, token: token, ttl: ttl, patience: patience, polled: make(chan polled, 1)}
	ln.waiters[w.token] = w
	return w
}

// rtt returns the round trip of the line of key, 0 when nobody waits.
func (ls *lines) rtt(key string) time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ln := ls.m[key]; ln != nil {
		return ln.rtt
	}
	return 0
}

// patience returns the longest for which a call kept w's place.
func (ls *lines) patience(w *inLine) time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return w.patience
}

// patience is the patience of a line whose calls take rtt: the Locker's,
// or three round trips when that is longer (see lines).
func (l *Locker) patience(rtt time.Duration) time.Duration {
	return max(l.cfg.fairPatience, 3*rtt)
}

// leave takes w out of its line and returns the polls that included it,
// once a poll in flight has returned: a poll that reached the store after
// the waiter's Dequeue, or after the release of the lock it was granted,
// would queue it again, a place nobody keeps alive.
func (ls *lines) leave(w *inLine) int {
	ls.mu.Lock()
	ln := w.line
	delete(ln.waiters, w.token)
	if len(ln.waiters) == 0 && ls.m[ln.key] == ln {
		delete(ls.m, ln.key)
		close(ln.quit)
	}
	inFlight := ln.inFlight
	ls.mu.Unlock()
	if inFlight != nil {
		<-inFlight
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return w.polls
}

// kick asks the line's poller for a poll now.
func (ln *line) kick() {
	select {
	case ln.wake <- struct{}{}:
	default:
	}
}

// keepLine polls the store for the waiters of ln every third of the
// patience (from the sending of one poll to the next), and when asked,
// until its last waiter leaves.
func (l *Locker) keepLine(ln *line) {
	t := time.NewTimer(l.cfg.fairPatience / 3)
	defer t.Stop()
	for {
		select {
		case <-ln.quit:
			return
		case <-t.C:
		case <-ln.wake:
			t.Stop()
		}
		sent := time.Now()
		every := l.pollLine(ln) / 3
		t.Reset(max(every-time.Since(sent), 0))
	}
}

// pollLine sends one poll for the waiters of ln and hands each its answer:
// the grant to the one that holds the key, the error to all. It returns
// the line's patience for the next poll.
func (l *Locker) pollLine(ln *line) time.Duration {
	ls := &l.lines
	ls.mu.Lock()
	patience := l.patience(ln.rtt)
	ws := make([]*inLine, 0, len(ln.waiters))
	places := make([]Waiter, 0, len(ln.waiters))
	for _, w := range ln.waiters {
		ws = append(ws, w)
		places = append(places, Waiter{Token: w.token, TTL: w.ttl})
	}
	done := make(chan struct{})
	ln.inFlight = done
	ls.mu.Unlock()

	var (
		i    = -1
		g    Grant
		err  error
		sent = time.Now()
	)
	if len(places) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ioTimeout)
		i, g, err = l.queuer.Poll(ctx, ln.key, places, patience, l.cfg.fencing)
		cancel()
	}

	ls.mu.Lock()
	if err == nil && len(places) > 0 {
		// Recent round trips count most; a long one is forgotten slowly.
		ln.rtt = max(time.Since(sent), ln.rtt*3/4)
	}
	for j, w := range ws {
		w.polls++
		w.patience = max(w.patience, patience)
		switch {
		case err != nil:
			w.answer(polled{err: err})
		case j == i:
			w.answer(polled{grant: g, sent: sent})
		}
	}
	next := l.patience(ln.rtt)
	ln.inFlight = nil
	ls.mu.Unlock()
	close(done)
	return next
}

// answer gives w a poll's answer, unless it has one already.
func (w *inLine) answer(p polled) {
	select {
	case w.polled <- p:
	default:
	}
}

// grantedLease is the lease of a waiter that holds req's name: taken at a
// poll sent at sent, or granted by a release. A grant may be set for less
// than req.TTL (the waiter's patience): the lease then extends it to req.TTL
// in the background, on the watchdog's schedule, once.
func (l *Locker) grantedLease(req *AcquireCall, token string, g Grant, sent time.Time) *Lease {
	// g.TTL is what the store had left for the key. Less than a
	// millisecond left reads as 0 (a store counting ms): the lease is then born
	// lost, never given a full TTL the store does not hold for it.
	ttl := min(max(g.TTL, time.Millisecond), req.TTL)
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
		basis:      ttl,
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
	return fmt.Errorf("%w: WithFair: the store (%T) keeps no queue (core.Queuer)", ErrInvalidOption, s)
}
