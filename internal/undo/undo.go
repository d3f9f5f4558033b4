// Package undo is the clean-up of failed lock attempts that reqlock's
// stores share (the Redis store of core, the rueidis, Memcached and SQL
// stores): a compare-and-delete of the attempt's token, sent again until it
// deletes the key or cannot matter any more.
//
// An attempt to take a lock fails with an error after its command may have
// reached the store (a lost reply, a deadline, a stalled server). A
// clean-up that finds nothing proves nothing: the attempt's command may
// still wait in a stalled connection (a frozen server keeps what its
// clients sent, including on connections they have closed since, and runs
// it when it resumes, in an order of its own; a partitioned link delivers
// it when it heals), and then sets the key for a whole TTL with no holder to
// release it. So a clean-up is retried every Interval, in the background,
// until one of these:
//
//   - it deleted the key: the late command has run and is undone;
//   - the store has answered for a whole TTL of the attempt since its first
//     answer (a reply, or a refused connection: the process that had
//     received the command is gone, and the command with it): a command
//     that was still on its way when the server came back has arrived by
//     then (or, arriving later still, it sets a key that expires by itself,
//     as before);
//   - Horizon has passed since the attempt (a server frozen longer than
//     that is treated as gone);
//   - the queue is closed.
//
// While the store does not answer, a clean-up keeps trying: a server frozen
// for longer than the TTL runs the late command when it resumes, which is
// when the clean-up is needed. One goroutine per queue sends the clean-ups
// that are due (a new one at once, then every Interval) in one round, and
// ends when none is left; at most MaxPending are pending at a time (beyond
// that, the oldest is dropped: it has been tried the most).
package undo

import (
	"context"
	"sync"
	"time"
)

const (
	// Interval is the time between two compare-and-deletes of a clean-up.
	Interval = 250 * time.Millisecond
	// Horizon bounds a clean-up from its attempt (or the attempt's TTL when
	// that is longer).
	Horizon = 10 * time.Minute
	// MaxPending bounds the clean-ups pending at a time.
	MaxPending = 4096
)

// Outcome is what one compare-and-delete of a clean-up found.
type Outcome int

const (
	// NoAnswer: the store did not answer (a timeout, a broken connection):
	// the attempt's command may still arrive.
	NoAnswer Outcome = iota
	// Answered: the store answered, and the key did not hold the token.
	// An error that proves as much counts too: an error reply (the server
	// processes commands), or a refused connection (no server listens: the
	// process that had received the attempt is gone, and what it had
	// received with it).
	Answered
	// Done: the key held the token and is deleted; or nothing can be sent
	// any more (the store's client is closed).
	Done
)

// Attempt is the clean-up of one failed attempt.
type Attempt struct {
	// Key and Token are the attempt's.
	Key, Token string

	ttl     time.Duration
	horizon time.Time // given up then at the latest
	until   time.Time // zero until the store answered; then given up at
	next    time.Time // when its next compare-and-delete is due
}

// answered records that the store answered a compare-and-delete at now that
// did not delete the key.
func (a *Attempt) answered(now time.Time) {
	if a.until.IsZero() {
		a.until = now.Add(a.ttl)
	}
}

// over reports whether the clean-up may stop at now, the key not deleted.
func (a *Attempt) over(now time.Time) bool {
	return !now.Before(a.horizon) || (!a.until.IsZero() && !now.Before(a.until))
}

// Sweep sends the compare-and-delete of each attempt of batch within ctx
// (one pipeline where the store has one) and returns their outcomes, in
// the order of batch.
type Sweep func(ctx context.Context, batch []*Attempt) []Outcome

// Queue holds the pending clean-ups of one store and runs them on a
// goroutine of its own. Its methods are safe for concurrent use.
type Queue struct {
	sweep   Sweep
	timeout func() time.Duration

	mu      sync.Mutex
	pending []*Attempt
	running bool          // the goroutine of loop runs
	kick    chan struct{} // a clean-up is due at once
	closed  bool
	ctx     context.Context // cancelled by Close: cuts the round in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewQueue returns a queue whose rounds run sweep, each bounded by
// timeout() (the store's I/O timeout) and by two intervals at most. With a
// nil timeout a round has no deadline of its own (Close still cuts it):
// sweep bounds each of its calls, for a store that cannot send a whole
// round at once.
func NewQueue(sweep Sweep, timeout func() time.Duration) *Queue {
	q := &Queue{sweep: sweep, timeout: timeout, kick: make(chan struct{}, 1)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	return q
}

// Undo removes what a failed attempt (token on key, with ttl, sent at sent)
// may have set: first(ctx), a compare-and-delete at once within ctx (the
// attempt's context, whose deadline is the I/O timeout) if ctx has time
// left, then in the background until it no longer matters (see the package
// documentation). It never holds the caller past ctx.
func (q *Queue) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time, first func(ctx context.Context) Outcome) {
	a := newAttempt(key, token, ttl, sent)
	if ctx.Err() == nil && !pastDeadline(ctx) { // the store's error may come a moment before ctx's timer fires
		switch first(ctx) {
		case Done:
			return
		case Answered:
			a.answered(time.Now())
		}
	}
	q.add(a)
}

// Add queues the clean-up of an attempt (token on key, with ttl, sent at
// sent) without a first compare-and-delete: its first one is due at once.
func (q *Queue) Add(key, token string, ttl time.Duration, sent time.Time) {
	q.add(newAttempt(key, token, ttl, sent))
}

func newAttempt(key, token string, ttl time.Duration, sent time.Time) *Attempt {
	return &Attempt{Key: key, Token: token, ttl: ttl, horizon: sent.Add(max(ttl, Horizon))}
}

// pastDeadline reports whether ctx's deadline has passed.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// add queues a, due at once, and starts the goroutine of loop if none runs.
func (q *Queue) add(a *Attempt) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.pending) >= MaxPending { // pending is in the order of add
		copy(q.pending, q.pending[1:])
		q.pending = q.pending[:len(q.pending)-1]
	}
	a.next = time.Now()
	q.pending = append(q.pending, a)
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go q.loop()
		return
	}
	select {
	case q.kick <- struct{}{}:
	default: // one pending is enough
	}
}

// Pending returns the number of clean-ups pending, and whether the
// goroutine that sends them runs.
func (q *Queue) Pending() (n int, running bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending), q.running
}

// loop sends each pending clean-up when it is due (at once when it is
// queued, then every Interval), those due together in one round, until
// none is left or the queue is closed.
func (q *Queue) loop() {
	defer q.wg.Done()
	timer := time.NewTimer(0) // the first round at once
	defer timer.Stop()
	for {
		select {
		case <-q.ctx.Done(): // closed: add starts no other goroutine
			q.mu.Lock()
			q.running = false
			q.mu.Unlock()
			return
		case <-timer.C:
		case <-q.kick:
		}
		now := time.Now()
		var batch []*Attempt
		q.mu.Lock()
		for _, a := range q.pending {
			if !a.next.After(now) {
				batch = append(batch, a)
			}
		}
		q.mu.Unlock()
		var finished map[*Attempt]bool
		if len(batch) > 0 {
			finished = q.round(batch)
		}
		q.mu.Lock()
		next := time.Now().Add(Interval)
		for _, a := range batch {
			a.next = next
		}
		left := q.pending[:0]
		for _, a := range q.pending {
			if !finished[a] {
				left = append(left, a)
				if a.next.Before(next) { // one queued during the round is due at once
					next = a.next
				}
			}
		}
		clear(q.pending[len(left):])
		q.pending = left
		if len(left) == 0 || q.closed {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		timer.Reset(time.Until(next))
	}
}

// round sends the compare-and-delete of each clean-up of batch and returns
// those that are finished. A round is bounded by the I/O timeout, and by
// two intervals at most: against a frozen server a round waits for
// nothing, so that once the server resumes the next round comes within
// about half a second, not a whole I/O timeout later; a round cut short is
// only tried again. Without a timeout (see NewQueue), the sweep bounds its
// calls itself.
func (q *Queue) round(batch []*Attempt) map[*Attempt]bool {
	ctx := q.ctx
	if q.timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(q.ctx, min(q.timeout(), 2*Interval))
		defer cancel()
	}
	outcomes := q.sweep(ctx, batch)
	now := time.Now()
	finished := make(map[*Attempt]bool)
	for i, a := range batch {
		o := NoAnswer
		if i < len(outcomes) {
			o = outcomes[i]
		}
		switch o {
		case Done:
			finished[a] = true
			continue
		case Answered:
			a.answered(now)
		}
		if a.over(now) {
			finished[a] = true
		}
	}
	return finished
}

// Close ends the clean-ups: the round in flight is cancelled, the pending
// ones are dropped (keys they could not remove yet expire with their TTL),
// and Close waits for the goroutine. Clean-ups added after Close are
// dropped; Undo still sends its first compare-and-delete.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	clear(q.pending)
	q.pending = nil
	q.cancel()
	q.mu.Unlock()
	q.wg.Wait()
}
