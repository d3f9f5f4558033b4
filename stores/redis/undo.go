package redisstore

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/undo"
)

// This file is the Redis store's clean-up of failed attempts (see
// Store.TryAcquire): a compare-and-delete of the attempt's token (the
// release script), sent again until it deletes the key or cannot matter any
// more. internal/undo holds the queue and its rules, shared with the other
// stores; here are the Redis calls.

// newUndos returns the clean-up queue of s.
func newUndos(s *Store) *undo.Queue {
	return undo.NewQueue(s.sweep, s.undoTimeout)
}

// Undo removes what a failed attempt (token on key, with ttl, sent at sent)
// may have set, a lock the Locker gives up, or the place of a fair waiter
// that has gone (lockstore.Undoer): a compare-and-delete at once within ctx if
// ctx has time left, then in the background until it no longer matters (see
// internal/undo). The release script is the compare-and-delete: it also
// takes a token that does not hold the key out of the key's queue. It never
// holds the caller past ctx.
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.undos.Undo(ctx, key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		n, err := s.release(ctx, key, token)
		return undoOutcome(n, err)
	})
}

// undoOutcome is the outcome of a compare-and-delete that replied n, err.
func undoOutcome(n int64, err error) undo.Outcome {
	switch {
	case err == nil && n == 1, errors.Is(err, redis.ErrClosed):
		return undo.Done // undone; or the client is closed, and nothing can be sent any more
	case err == nil || isAnswer(err):
		return undo.Answered
	}
	return undo.NoAnswer
}

// sweep sends the compare-and-delete of each clean-up of batch, in one
// pipeline, within ctx (see undo.Queue for its bounds).
func (s *Store) sweep(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	// EVALSHA once the script is known to the deployment; EVAL (which
	// caches it) the first time and after a NOSCRIPT (a restarted server).
	seen := s.cached[releaseScript.Script]
	sha := seen.Load()
	cmds := make([]*redis.Cmd, len(batch))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range batch {
			a := s.releaseArgs(u.Key, u.Token)
			if !sha {
				a.list[0], a.list[1] = "eval", releaseScript.src
			}
			cmds[i] = redis.NewCmd(ctx, a.list...)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	_ = s.failed(err)
	outcomes := make([]undo.Outcome, len(batch))
	for i := range batch {
		n, err := cmds[i].Int64()
		outcomes[i] = undoOutcome(n, err)
		switch {
		case err == nil && !sha:
			seen.Store(true)
		case isNoScript(err):
			seen.Store(false)
		}
	}
	return outcomes
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
