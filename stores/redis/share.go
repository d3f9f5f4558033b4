package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/undo"
	"github.com/reqlock/reqlock/lockstore"
)

// This file is the store's shares (lockstore.Sharer: shared holds and
// permits, and the exclusive waiter they let in) and its atomic
// multi-key acquire (lockstore.MultiAcquirer). The scripts are
// internal/redisscript's share.lua family and acquire_all.lua; the package
// documentation describes the keys.

var (
	acquireShareScript   = redis.NewScript(redisscript.AcquireShare)
	releaseShareScript   = redis.NewScript(redisscript.ReleaseShare)
	extendShareScript    = redis.NewScript(redisscript.ExtendShare)
	acquireWaitingScript = redis.NewScript(redisscript.AcquireWaiting)
	acquireAllScript     = redis.NewScript(redisscript.AcquireAll)
)

var (
	_ lockstore.Sharer        = (*Store)(nil)
	_ lockstore.MultiAcquirer = (*Store)(nil)
	_ lockstore.ShareUndoer   = (*Store)(nil)
)

// checkTTL refuses a duration the scripts cannot set (PX takes whole ms,
// at least 1), before anything is sent.
func checkTTL(what string, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: redisstore: the %s %v is under a millisecond", lockstore.ErrInvalidOption, what, d)
	}
	return nil
}

// TryAcquireShare takes a share of key for token (acquire_share.lua, one
// round trip): a shared hold (h.N == 0) or one of h.N permits in the
// lowest free slot, unless key is held exclusively, an exclusive waiter is
// recorded, or all h.N permits are live. A hold in another mode than the
// live shares' is an error wrapping lockstore.ErrModeMismatch. An attempt
// that fails after it may have reached Redis is undone as TryAcquire's
// are: its share is released by token, at once and in the background.
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h lockstore.Hold, fenced bool) (bool, int, int64, error) {
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("redisstore: share of %s: %w", key, err)
	}
	if err := checkTTL("TTL", ttl); err != nil {
		return false, 0, 0, err
	}
	sent := time.Now()
	r, err := s.run(ctx, acquireShareScript, redisscript.ShareKeys(key), token, ttl.Milliseconds(), h.N, redisscript.Flag(fenced), fenceGrace.Milliseconds()).Int64Slice()
	if err != nil {
		if mayHaveApplied(err) {
			s.UndoShare(ctx, key, token, ttl, sent)
		}
		return false, 0, 0, s.failed(err)
	}
	ok, slot, fence, mismatch, theirs, err := redisscript.ParseShare(r)
	switch {
	case err != nil:
		return false, 0, 0, fmt.Errorf("redisstore: share of %s: %w", key, err)
	case mismatch:
		return false, 0, 0, fmt.Errorf("redisstore: %s as %v, while it is held as %v: %w", key, h, lockstore.Hold{N: theirs}, lockstore.ErrModeMismatch)
	}
	return ok, slot, fence, nil
}

// ReleaseShare removes token's share of key (release_share.lua, one round
// trip); the last share out frees key, and once Announce was called
// publishes on the key's release channel.
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	n, err := s.releaseShare(ctx, key, token)
	return n == 1, s.failed(err)
}

func (s *Store) releaseShare(ctx context.Context, key, token string) (int64, error) {
	return s.run(ctx, releaseShareScript, redisscript.ShareKeys(key), token, channelOf(key), redisscript.Flag(s.announce.Load())).Int64()
}

// ExtendShare resets the TTL of token's live share of key (extend_share.lua,
// one round trip), and with fenced draws a new fence for it.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := checkTTL("TTL", ttl); err != nil {
		return false, 0, err
	}
	n, err := s.run(ctx, extendShareScript, redisscript.ShareKeys(key), token, ttl.Milliseconds(), redisscript.Flag(fenced), fenceGrace.Milliseconds()).Int64()
	switch {
	case err != nil:
		return false, 0, s.failed(err)
	case n == 0:
		return false, 0, nil
	case fenced:
		return true, n, nil
	}
	return true, 0, nil
}

// TryAcquireWaiting is TryAcquire for an exclusive waiter that shares must
// let in (acquire_waiting.lua, one round trip): when shares hold key it
// records the waiter for patience, which keeps new shares out; when it
// takes key it clears the record. A failed attempt is undone as
// TryAcquire's are (a record it may have left expires with patience).
func (s *Store) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	if err := checkTTL("TTL", ttl); err != nil {
		return false, 0, err
	}
	if err := checkTTL("patience", patience); err != nil {
		return false, 0, err
	}
	sent := time.Now()
	n, err := s.run(ctx, acquireWaitingScript, redisscript.ShareKeys(key), token, ttl.Milliseconds(), patience.Milliseconds(), redisscript.Flag(fenced), fenceGrace.Milliseconds()).Int64()
	switch {
	case err != nil:
		if mayHaveApplied(err) {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, s.failed(err)
	case n == 0:
		return false, 0, nil
	case fenced:
		return true, n, nil
	}
	return true, 0, nil
}

// TryAcquireAll sets every key to token for ttl if none is held, in one
// script (acquire_all.lua), with a fence per key when fenced. A Cluster
// runs a script on one slot's master: keys of several slots are refused
// with an error wrapping lockstore.ErrNotAtomic before anything is sent
// (the Locker then takes them one by one); keys of one hash tag share a
// slot. Any keys go in one script on a standalone server or a
// Sentinel-managed master (a *redis.Client); a Ring, or any other
// client, gets ErrNotAtomic. A failed attempt is not
// undone here: the Locker undoes it key by key (Undo), as what it may
// have set is an exclusive lock of each key.
func (s *Store) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if len(keys) == 0 {
		return false, nil, fmt.Errorf("%w: redisstore: acquire all: no keys", lockstore.ErrInvalidOption)
	}
	if err := checkTTL("TTL", ttl); err != nil {
		return false, nil, err
	}
	switch s.client.(type) {
	case *redis.Client: // one server (standalone, or Sentinel's master): any keys
	case *redis.ClusterClient:
		if !redisscript.OneSlot(keys) {
			return false, nil, fmt.Errorf("redisstore: %d keys of several Cluster hash slots (%s, ...): %w", len(keys), keys[0], lockstore.ErrNotAtomic)
		}
	default:
		// A Ring shards by its own consistent hash of the tag, not by
		// Cluster slot: keys of one slot may live on two shards, and a
		// script on one would set the other's key where nobody looks.
		return false, nil, fmt.Errorf("redisstore: %d keys on a %T, which shards by a hash of its own: %w", len(keys), s.client, lockstore.ErrNotAtomic)
	}
	r, err := s.run(ctx, acquireAllScript, redisscript.AllKeys(keys), token, ttl.Milliseconds(), redisscript.Flag(fenced), fenceGrace.Milliseconds()).Int64Slice()
	if err != nil {
		return false, nil, s.failed(err)
	}
	ok, fences, err := redisscript.ParseAll(r, len(keys))
	if err != nil {
		return false, nil, fmt.Errorf("redisstore: acquire all of %s, ...: %w", keys[0], err)
	}
	return ok, fences, nil
}

// UndoShare removes what a failed TryAcquireShare (token's share of key,
// with ttl, sent at sent) may have taken: a ReleaseShare of the token at
// once within ctx if ctx has time left, then in the background until it
// no longer matters, as Undo does for exclusive attempts (internal/undo).
// It never removes another token's share.
func (s *Store) UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.shareUndos.Undo(ctx, key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		return undoOutcome(s.releaseShare(ctx, key, token))
	})
}

// sweepShares sends the ReleaseShare of each clean-up of batch, in one
// pipeline, within ctx (see sweep).
func (s *Store) sweepShares(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	seen := s.cached[releaseShareScript]
	sha := seen.Load()
	announce := redisscript.Flag(s.announce.Load())
	cmds := make([]*redis.Cmd, len(batch))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range batch {
			keys := redisscript.ShareKeys(u.Key)
			args := []any{evalCmd(sha), nil, len(keys)}
			if sha {
				args[1] = releaseShareScript.Hash()
			} else {
				args[1] = redisscript.ReleaseShare
			}
			for _, k := range keys {
				args = append(args, k)
			}
			args = append(args, u.Token, channelOf(u.Key), announce)
			cmds[i] = redis.NewCmd(ctx, args...)
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

// evalCmd returns the command that runs a script: EVALSHA when it is
// cached, EVAL otherwise.
func evalCmd(sha bool) string {
	if sha {
		return "evalsha"
	}
	return "eval"
}
