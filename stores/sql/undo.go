package sqlstore

import (
	"context"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
)

// This file is the clean-up of failed attempts (see Store.TryAcquire), as
// core.Store asks of every store: an acquire whose answer was lost may have
// taken the key all the same, for a whole TTL, with no holder to release
// it. The clean-up frees the key if the attempt's token holds it (the undo
// query: compare-and-delete on PostgreSQL, compare-and-free on MySQL).
//
// A clean-up that finds nothing proves nothing: the statement may still
// wait in a stalled connection or server and run later. So it is sent at
// once (within the attempt's context, if time is left), then again every
// undoInterval in the background, until one of these:
//
//   - it freed the key: the attempt's statement had run and is undone;
//   - the database has answered for a whole TTL of the attempt since its
//     first answer: a statement still on its way then would take the key
//     after its TTL would have ended anyway;
//   - undoHorizon has passed since the attempt;
//   - the store is closed.
//
// One goroutine per store sends the clean-ups that are due and ends when
// none is left; at most maxUndos are pending (beyond that, the oldest is
// dropped: its lock expires with its TTL).

const (
	undoInterval = 250 * time.Millisecond
	undoHorizon  = 10 * time.Minute
	maxUndos     = 4096
	undoParallel = 8 // statements in flight at once in one round
)

// undo is the clean-up of one failed attempt.
type undo struct {
	key, token string
	ttl        time.Duration
	horizon    time.Time // given up then at the latest
	until      time.Time // zero until the database answered; then given up at
	next       time.Time // when it is due
}

// answered records that the database answered at now without freeing the
// key.
func (u *undo) answered(now time.Time) {
	if u.until.IsZero() {
		u.until = now.Add(u.ttl)
	}
}

// over reports whether the clean-up may stop at now.
func (u *undo) over(now time.Time) bool {
	return !now.Before(u.horizon) || (!u.until.IsZero() && !now.Before(u.until))
}

// undos are the pending clean-ups of a store.
type undos struct {
	s       *Store
	mu      sync.Mutex
	pending []*undo
	running bool
	closed  bool
	kick    chan struct{}
	ctx     context.Context // cancelled by close: cuts the calls in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newUndos(s *Store) *undos {
	q := &undos{s: s, kick: make(chan struct{}, 1)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	return q
}

// undo cleans up after the failed attempt of token on key (with ttl, sent
// at sent): once within ctx if ctx has time left, then in the background.
// It never holds the caller past ctx.
func (q *undos) undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	u := &undo{key: key, token: token, ttl: ttl, horizon: sent.Add(max(ttl, undoHorizon))}
	if ctx.Err() == nil {
		freed, err := q.s.free(ctx, key, token)
		switch {
		case err == nil && freed:
			return
		case err == nil:
			u.answered(time.Now())
		}
	}
	q.add(u)
}

// free runs the undo query: it frees key if token holds it, expired or not.
func (s *Store) free(ctx context.Context, key, token string) (bool, error) {
	var k any = key
	if s.dialect == PostgreSQL {
		k = []byte(key) // bytea
	}
	res, err := s.exec(ctx, s.q.undo, k, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// add queues u, due at once, and starts the sweeping goroutine if none
// runs.
func (q *undos) add(u *undo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.pending) >= maxUndos {
		q.pending = append(q.pending[:0], q.pending[1:]...)
	}
	u.next = time.Now()
	q.pending = append(q.pending, u)
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go q.sweep()
		return
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// sweep sends the clean-ups that are due, those due together in one round,
// until none is left or the store is closed.
func (q *undos) sweep() {
	defer q.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-q.ctx.Done():
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

		done := make(map[*undo]bool)
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, undoParallel)
		for _, u := range batch {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				ctx, cancel := context.WithTimeout(q.ctx, core.DefaultIOTimeout)
				freed, err := q.s.free(ctx, u.key, u.token)
				cancel()
				at := time.Now()
				mu.Lock()
				defer mu.Unlock()
				if err == nil && !freed {
					u.answered(at)
				}
				done[u] = freed || u.over(at)
				u.next = at.Add(undoInterval)
			}()
		}
		wg.Wait()

		q.mu.Lock()
		kept := q.pending[:0]
		for _, u := range q.pending {
			if !done[u] {
				kept = append(kept, u)
			}
		}
		clear(q.pending[len(kept):])
		q.pending = kept
		if len(kept) == 0 || q.closed {
			q.running = false
			q.mu.Unlock()
			return
		}
		next := kept[0].next
		for _, u := range kept {
			if u.next.Before(next) {
				next = u.next
			}
		}
		q.mu.Unlock()
		timer.Reset(max(time.Until(next), 0))
	}
}

// close ends the clean-ups (cutting the statements in flight) and waits for
// the sweeping goroutine.
func (q *undos) close() {
	q.mu.Lock()
	q.closed = true
	q.pending = nil
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()
}
