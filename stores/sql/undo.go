package sqlstore

import (
	"context"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// This file is the clean-up of failed attempts (see Store.TryAcquire), as
// core.Store asks of every store: an acquire whose answer was lost may have
// taken the key all the same, for a whole TTL, with no holder to release
// it. The clean-up frees the key if the attempt's token holds it (the undo
// query: compare-and-delete on PostgreSQL, compare-and-free on MySQL), at
// once and then again in the background until it freed the key, the
// database has answered for a whole TTL of the attempt, a horizon has
// passed, or the store is closed. internal/undo holds the queue and its
// rules, shared with the other stores; here are the SQL statements.

// undoParallel bounds the statements in flight at once in one round.
const undoParallel = 8

// newUndos returns the clean-up queue of s. Its rounds have no deadline of
// their own: sweep gives each statement the I/O timeout.
func newUndos(s *Store) *undo.Queue {
	return undo.NewQueue(s.sweep, nil)
}

// Undo cleans up after the failed attempt of token on key (with ttl, sent
// at sent), or a release that failed (core.Undoer): once within ctx if ctx
// has time left, then in the background. It never holds the caller past ctx.
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.undos.Undo(ctx, key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		return undoOutcome(s.free(ctx, key, token))
	})
}

// sweep is a round of clean-ups: the undo query of each, at most
// undoParallel at a time, each within ctx and the I/O timeout.
func (s *Store) sweep(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	out := make([]undo.Outcome, len(batch))
	var wg sync.WaitGroup
	sem := make(chan struct{}, undoParallel)
	for i, a := range batch {
		sem <- struct{}{}
		if ctx.Err() != nil { // closed: NoAnswer for the rest
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(ctx, core.DefaultIOTimeout)
			defer cancel()
			out[i] = undoOutcome(s.free(ctx, a.Key, a.Token))
		}()
	}
	wg.Wait()
	return out
}

// undoOutcome is the outcome of an undo query: only a statement that ran is
// an answer.
func undoOutcome(freed bool, err error) undo.Outcome {
	switch {
	case freed:
		return undo.Done
	case err == nil:
		return undo.Answered
	}
	return undo.NoAnswer
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
