package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is the Redis store's clean-up of failed attempts (see
// redisStore.TryAcquire): a compare-and-delete of the attempt's token, sent
// again until it deletes the key or cannot matter any more.
//
// A clean-up that finds nothing proves nothing: the attempt's SET may still
// wait in a stalled connection (a frozen server keeps what its clients sent,
// including on connections they have closed since, and runs it when it
// resumes, in an order of its own; a partitioned link delivers it when it
// heals), and then sets the key for a whole TTL with no holder to release
// it. So a clean-up is retried every undoInterval, in the background, until
// one of these:
//
//   - it deleted the key: the late SET has run and is undone;
//   - the store has answered for a whole TTL of the attempt since its first
//     answer (a reply, or a refused connection: the process that had
//     received the SET is gone, and the SET with it): a SET that was still on
//     its way when the server came back has arrived by then (or, arriving
//     later still, it sets a key that expires by itself, as before);
//   - undoHorizon has passed since the attempt (a server frozen longer than
//     that is treated as gone);
//   - the store or its client is closed.
//
// While the store does not answer, a clean-up keeps trying: a server frozen
// for longer than the TTL runs the late SET when it resumes, which is when
// the clean-up is needed. One goroutine per store sends the clean-ups that
// are due (a new one at once, then every undoInterval) in one pipeline per
// round, and ends when none is left; at most maxUndos are pending at a time
// (beyond that, the oldest is dropped: it has been tried the most).

const (
	undoInterval = 250 * time.Millisecond
	undoHorizon  = 10 * time.Minute
	maxUndos     = 4096
)

// undo is the clean-up of one failed attempt.
type undo struct {
	key, token string
	ttl        time.Duration
	horizon    time.Time // given up then at the latest
	until      time.Time // zero until the store answered; then given up at
	next       time.Time // when its next compare-and-delete is due
}

// answered records that the store answered a compare-and-delete at now that
// did not delete the key.
func (u *undo) answered(now time.Time) {
	if u.until.IsZero() {
		u.until = now.Add(u.ttl)
	}
}

// over reports whether the clean-up may stop at now, the key not deleted.
func (u *undo) over(now time.Time) bool {
	return !now.Before(u.horizon) || (!u.until.IsZero() && !now.Before(u.until))
}

// undos are the pending clean-ups of a Redis store.
type undos struct {
	mu      sync.Mutex
	pending []*undo
	running bool          // the goroutine of sweep runs
	kick    chan struct{} // a clean-up is due at once
	closed  bool
	ctx     context.Context // cancelled by close: cuts the call in flight
	cancel  context.CancelFunc
}

// undo removes what a failed attempt (token on key, with ttl, sent at sent)
// may have set: a compare-and-delete at once within ctx (the attempt's
// context, whose deadline is the Locker's I/O timeout) if ctx has time
// left, then in the background until it no longer matters (see above). It
// never holds the caller past ctx.
func (s *redisStore) undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	u := &undo{key: key, token: token, ttl: ttl, horizon: sent.Add(max(ttl, undoHorizon))}
	if ctx.Err() == nil && !pastDeadline(ctx) { // the store's error may come a moment before ctx's timer fires
		n, err := s.release(ctx, key, token)
		switch {
		case err == nil && n == 1, errors.Is(err, redis.ErrClosed):
			return
		case err == nil || isAnswer(err):
			u.answered(time.Now())
		}
	}
	s.undos.add(s, u)
}

// add queues u, due at once (its attempt's context has ended, or a first
// compare-and-delete within it did not delete the key), and starts the
// goroutine of sweep if none runs.
func (q *undos) add(s *redisStore, u *undo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.pending) >= maxUndos { // pending is in the order of add
		copy(q.pending, q.pending[1:])
		q.pending = q.pending[:len(q.pending)-1]
	}
	u.next = time.Now()
	q.pending = append(q.pending, u)
	if !q.running {
		q.running = true
		s.bg.run(s.sweep)
		return
	}
	select {
	case q.kick <- struct{}{}:
	default: // one pending is enough
	}
}

// sweep sends each pending clean-up when it is due (at once when it is
// queued, then every undoInterval), those due together in one round, until
// none is left or the store is closed.
func (s *redisStore) sweep() {
	q := &s.undos
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
		var batch []*undo
		q.mu.Lock()
		for _, u := range q.pending {
			if !u.next.After(now) {
				batch = append(batch, u)
			}
		}
		q.mu.Unlock()
		var finished map[*undo]bool
		if len(batch) > 0 {
			finished = s.sweepOnce(batch)
		}
		q.mu.Lock()
		next := time.Now().Add(undoInterval)
		for _, u := range batch {
			u.next = next
		}
		left := q.pending[:0]
		for _, u := range q.pending {
			if !finished[u] {
				left = append(left, u)
				next = minTime(next, u.next) // one queued during the round is due at once
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

// minTime returns the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sweepOnce sends the compare-and-delete of each clean-up of batch, in one
// pipeline, and returns those that are finished. A round is bounded by the
// I/O timeout, and by two intervals at most: against a frozen server a
// round waits for nothing, so that once the server resumes the next round
// comes within about half a second, not a whole I/O timeout later; a round
// cut short is only tried again.
func (s *redisStore) sweepOnce(batch []*undo) map[*undo]bool {
	ctx, cancel := context.WithTimeout(s.undos.ctx, min(s.undoTimeout(), 2*undoInterval))
	defer cancel()
	// EVALSHA once the script is known to the deployment; EVAL (which
	// caches it) the first time and after a NOSCRIPT (a restarted server).
	seen := s.cached[releaseScript.Script]
	sha := seen.Load()
	cmds := make([]*redis.Cmd, len(batch))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range batch {
			a := s.releaseArgs(u.key, u.token)
			if !sha {
				a.list[0], a.list[1] = "eval", releaseScript.src
			}
			cmds[i] = redis.NewCmd(ctx, a.list...)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	_ = s.failed(err)
	now := time.Now()
	finished := make(map[*undo]bool)
	for i, u := range batch {
		n, err := cmds[i].Int64()
		switch {
		case err == nil && n == 1, errors.Is(err, redis.ErrClosed):
			finished[u] = true // undone; or the client is closed, and nothing can be sent any more
			continue
		case err == nil:
			u.answered(now)
			if !sha {
				seen.Store(true)
			}
		case isAnswer(err):
			u.answered(now)
			if isNoScript(err) {
				seen.Store(false)
			}
		}
		if u.over(now) {
			finished[u] = true
		}
	}
	return finished
}

// close ends the clean-ups: the call in flight is cancelled (go-redis
// notices at the call's deadline, the I/O timeout, at the latest), and the
// pending ones are dropped; keys they could not remove yet expire with their
// TTL. The store's Close then waits for the goroutine of sweep.
func (q *undos) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	clear(q.pending)
	q.pending = nil
	q.cancel()
}

// isAnswer reports an error that tells, as a reply does, that no command
// the server had received before can still run late: an error reply (the
// server is processing commands), or a refused connection (no server
// listens: the process that had received the attempt is gone, and what it
// had received with it).
func isAnswer(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) || errors.Is(err, syscall.ECONNREFUSED)
}

// isNoScript reports the server's NOSCRIPT reply to an EVALSHA.
func isNoScript(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "NOSCRIPT")
}
