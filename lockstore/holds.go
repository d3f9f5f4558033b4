package lockstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrModeMismatch marks an attempt to hold a name in a mode that disagrees
// with its current holders': a shared hold while permit holders hold it, or
// Permits(n) while holders hold it with another n. Exclusive against shared
// or permits is no mismatch: it is ordinary contention. The store answers it
// as an error (not a failed attempt) wrapping ErrModeMismatch; the Locker
// passes it on wrapped in ErrInvalidOption too, since callers that disagree
// are misconfigured.
var ErrModeMismatch = errors.New("reqlock: the name is held in another mode")

// MaxPermits bounds n in a Hold of permits (core.Permits).
const MaxPermits = 1024

// Hold says how a Sharer's holder holds a name beside others.
//
//   - Shared (N == 0): any number of shared holders at once, a read lock of a
//     read-write lock (Curator's InterProcessReadWriteLock, Redisson's
//     RReadWriteLock);
//   - Permits (N >= 1): at most N holders at once, each in its own slot
//     0..N-1, the lowest free one (Curator's InterProcessSemaphoreV2 with
//     numbered leases; the "segmented lock" of a hot item's stock).
//
// An exclusive holder (Store.TryAcquire) excludes both.
type Hold struct {
	// N is the number of permits; 0 for a shared hold.
	N int
}

// Shared reports whether h is a shared hold.
func (h Hold) Shared() bool { return h.N == 0 }

// String returns "shared" or "permits(N)".
func (h Hold) String() string {
	if h.N == 0 {
		return "shared"
	}
	return fmt.Sprintf("permits(%d)", h.N)
}

// Check reports a Hold out of range (N < 0 or N > MaxPermits) as an error
// wrapping ErrInvalidOption.
func (h Hold) Check() error {
	if h.N < 0 || h.N > MaxPermits {
		return fmt.Errorf("%w: permits(%d): n must be between 1 and %d", ErrInvalidOption, h.N, MaxPermits)
	}
	return nil
}

// Sharer is the optional capability of a Store whose names several holders
// can hold at once: shared holds and numbered permits (core.Shared,
// core.Permits). A store without it refuses those modes with a clear error.
//
// The contract, which core/storetest checks:
//
//   - While shares (shared holds or permits) of key are live, key itself is
//     held: Store.TryAcquire and TryAcquireWaiting of key fail (no error), and
//     Store.Release and Store.Extend of key with a share's token do nothing,
//     like any token key does not hold. Conversely, while key is held
//     exclusively, TryAcquireShare fails.
//   - Each share has its own token and TTL and expires on its own: a share
//     whose holder died frees its place at its TTL, whatever the others do.
//     Once no share is live, key is free.
//   - Shared holds coexist with shared holds only; permits of one N coexist
//     up to N at once, in distinct slots; a hold in another mode while
//     shares are live is ErrModeMismatch.
//   - Writers do not starve: TryAcquireWaiting records that an exclusive
//     holder waits; while that record is live, TryAcquireShare fails even
//     where it would otherwise succeed.
//   - Fences: a fenced share draws the next fencing token of key, from the
//     same counter as exclusive holds, so fences of a name only increase
//     whatever the mode.
//
// Release and Extend of a share by a token that holds no share of key do
// nothing and report false; no call ever removes another token's share.
type Sharer interface {
	Store

	// TryAcquireShare takes a share of key for token, in mode h, for ttl,
	// unless key is held exclusively, a waiting exclusive holder is
	// recorded (see TryAcquireWaiting), or (permits) all h.N slots are
	// live. It reports whether token now holds a share and, for permits,
	// its slot (0 otherwise). A token that already holds a share of key (a
	// re-sent attempt) keeps its slot and has its TTL reset. With fenced it
	// draws a fencing token as TryAcquire does. A hold that disagrees with
	// the live shares' is an error wrapping ErrModeMismatch.
	TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h Hold, fenced bool) (ok bool, slot int, fence int64, err error)

	// ReleaseShare removes token's share of key and reports whether it held
	// one.
	ReleaseShare(ctx context.Context, key, token string) (ok bool, err error)

	// ExtendShare resets the TTL of token's share of key to ttl if it is
	// live, and reports whether it was; with fenced it draws a new fencing
	// token as Extend does.
	ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok bool, fence int64, err error)

	// TryAcquireWaiting is TryAcquire for an exclusive waiter that has
	// already failed once. When it fails because shares hold key, it also
	// records, for patience from now, that an exclusive holder waits, so
	// that no new share is taken meanwhile (the waiter renews the record at
	// each attempt; a waiter that gives up lets it expire). When it
	// succeeds it clears the record.
	TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (ok bool, fence int64, err error)
}

// MultiAcquirer is the optional capability of a Store that takes several
// keys in one atomic step (core.Locker.AcquireAll): the Redis stores, for
// keys that one script may touch (any keys on a standalone server or
// Sentinel; keys of one hash slot on a Cluster).
type MultiAcquirer interface {
	// TryAcquireAll sets every key to token for ttl if none is held, and
	// reports whether it did; it never leaves some of them set and others
	// not. With fenced it draws a fencing token per key, in the order of
	// keys. It returns ok false and no error when one of them is held, and
	// an error wrapping ErrNotAtomic when it cannot take these keys in one
	// step (the caller then takes them one by one, in order).
	TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (ok bool, fences []int64, err error)
}

// ErrNotAtomic is what a MultiAcquirer answers for keys it cannot take in
// one atomic step, such as keys of different hash slots on a Redis Cluster.
var ErrNotAtomic = errors.New("reqlock: these keys cannot be taken in one step")

// ShareUndoer is the optional capability of a Sharer that removes a share
// in the background, as an Undoer removes a lock: a ReleaseShare by token,
// at once within ctx and then again until it succeeds, or the store has
// answered for ttl since sent, or the store is closed. The Locker calls it
// when a share's release failed with a storage error, so that the share
// leaves as soon as the store or the link heals rather than at its TTL.
type ShareUndoer interface {
	UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time)
}
