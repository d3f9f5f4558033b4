package rueidisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/undo"
)

// This file is the Store's shares (core.Sharer: shared holds and permits,
// and the exclusive waiter they let in) and its atomic multi-key acquire
// (core.MultiAcquirer), on the scripts the go-redis store runs
// (internal/redisscript's share.lua family and acquire_all.lua): either
// client's holders see the other's.

var (
	_ core.Sharer        = (*Store)(nil)
	_ core.MultiAcquirer = (*Store)(nil)
	_ core.ShareUndoer   = (*Store)(nil)
)

// checkTTL refuses a duration the scripts cannot set (PX takes whole ms,
// at least 1), before anything is sent.
func checkTTL(what string, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: rueidisstore: the %s %v is under a millisecond", core.ErrInvalidOption, what, d)
	}
	return nil
}

// TryAcquireShare takes a share of key for token (acquire_share.lua, one
// round trip): a shared hold (h.N == 0) or one of h.N permits in the
// lowest free slot, unless key is held exclusively, an exclusive waiter is
// recorded, or all h.N permits are live. A hold in another mode than the
// live shares' is an error wrapping core.ErrModeMismatch. An attempt that
// fails after it may have reached Redis is undone: its share is released
// by token, at once and in the background (UndoShare).
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("rueidisstore: share of %s: %w", key, err)
	}
	if err := checkTTL("TTL", ttl); err != nil {
		return false, 0, 0, err
	}
	sent := time.Now()
	r, err := s.run(ctx, acquireShareScript, redisscript.ShareKeys(key), token, ms(ttl), strconv.Itoa(h.N), redisscript.Flag(fenced), ms(redisscript.FenceGrace)).AsIntSlice()
	if err != nil {
		if mayHaveApplied(err) {
			s.UndoShare(ctx, key, token, ttl, sent)
		}
		return false, 0, 0, fmt.Errorf("rueidisstore: share of %s: %w", key, err)
	}
	ok, slot, fence, mismatch, theirs, err := redisscript.ParseShare(r)
	switch {
	case err != nil:
		return false, 0, 0, fmt.Errorf("rueidisstore: share of %s: %w", key, err)
	case mismatch:
		return false, 0, 0, fmt.Errorf("rueidisstore: %s as %v, while it is held as %v: %w", key, h, core.Hold{N: theirs}, core.ErrModeMismatch)
	}
	return ok, slot, fence, nil
}

// ReleaseShare removes token's share of key (release_share.lua, one round
// trip); the last share out frees key, and once Announce was called
// publishes on the key's release channel.
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	n, err := s.run(ctx, releaseShareScript, redisscript.ShareKeys(key), s.releaseShareArgs(key, token)...).AsInt64()
	if err != nil {
		return false, fmt.Errorf("rueidisstore: release a share of %s: %w", key, err)
	}
	return n == 1, nil
}

// releaseShareArgs are the arguments of release_share.lua for key and
// token.
func (s *Store) releaseShareArgs(key, token string) []string {
	return []string{token, redisscript.Channel(key), redisscript.Flag(s.announce.Load())}
}

// ExtendShare resets the TTL of token's live share of key (extend_share.lua,
// one round trip), and with fenced draws a new fence for it.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := checkTTL("TTL", ttl); err != nil {
		return false, 0, err
	}
	n, err := s.run(ctx, extendShareScript, redisscript.ShareKeys(key), token, ms(ttl), redisscript.Flag(fenced), ms(redisscript.FenceGrace)).AsInt64()
	switch {
	case err != nil:
		return false, 0, fmt.Errorf("rueidisstore: extend a share of %s: %w", key, err)
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
	n, err := s.run(ctx, acquireWaitingScript, redisscript.ShareKeys(key), token, ms(ttl), ms(patience), redisscript.Flag(fenced), ms(redisscript.FenceGrace)).AsInt64()
	switch {
	case err != nil:
		if mayHaveApplied(err) {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, fmt.Errorf("rueidisstore: acquire %s: %w", key, err)
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
// with an error wrapping core.ErrNotAtomic before anything is sent (the
// Locker then takes them one by one); keys of one hash tag share a slot.
// Any keys go in one script on a standalone server or a Sentinel-managed
// master. A failed attempt is not undone here: the Locker undoes it key by
// key (Undo).
func (s *Store) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if len(keys) == 0 {
		return false, nil, fmt.Errorf("%w: rueidisstore: acquire all: no keys", core.ErrInvalidOption)
	}
	if err := checkTTL("TTL", ttl); err != nil {
		return false, nil, err
	}
	if s.client.Mode() == rueidis.ClientModeCluster && !redisscript.OneSlot(keys) {
		return false, nil, fmt.Errorf("rueidisstore: %d keys of several Cluster hash slots (%s, ...): %w", len(keys), keys[0], core.ErrNotAtomic)
	}
	r, err := s.run(ctx, acquireAllScript, redisscript.AllKeys(keys), token, ms(ttl), redisscript.Flag(fenced), ms(redisscript.FenceGrace)).AsIntSlice()
	if err != nil {
		return false, nil, fmt.Errorf("rueidisstore: acquire all of %s, ...: %w", keys[0], err)
	}
	ok, fences, err := redisscript.ParseAll(r, len(keys))
	if err != nil {
		return false, nil, fmt.Errorf("rueidisstore: acquire all of %s, ...: %w", keys[0], err)
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
		n, err := s.run(ctx, releaseShareScript, redisscript.ShareKeys(key), s.releaseShareArgs(key, token)...).AsInt64()
		return undoOutcome(n, err)
	})
}

// sweepShares sends the ReleaseShare of each clean-up of batch, in one
// pipeline, within ctx (see sweep).
func (s *Store) sweepShares(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	seen := &s.scripts[releaseShareScript]
	sha := seen.Load()
	cmds := make(rueidis.Commands, 0, len(batch))
	outcomes := make([]undo.Outcome, len(batch))
	sent := make([]int, 0, len(batch)) // the attempts of cmds, by index in batch
	for i, a := range batch {
		keys, args := redisscript.ShareKeys(a.Key), s.releaseShareArgs(a.Key, a.Token)
		if s.oneSlot(keys) != nil {
			outcomes[i] = undo.Done // no script can run on its keys: nothing to undo by one
			continue
		}
		sent = append(sent, i)
		if sha {
			cmds = append(cmds, s.client.B().Evalsha().Sha1(releaseShareSHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		} else {
			cmds = append(cmds, s.client.B().Eval().Script(redisscript.ReleaseShare).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
	}
	if len(cmds) == 0 {
		return outcomes
	}
	results := s.client.DoMulti(ctx, cmds...)
	for j, i := range sent {
		n, err := results[j].AsInt64()
		outcomes[i] = undoOutcome(n, err)
		switch reply, isReply := rueidis.IsRedisErr(err); {
		case err == nil && !sha:
			seen.Store(true)
		case isReply && reply.IsNoScript():
			seen.Store(false)
		}
	}
	return outcomes
}
