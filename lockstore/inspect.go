package lockstore

import (
	"context"
	"time"
)

// MaxListLimit is the largest page an Inspector's List returns; core's
// Locker.List and the reqlock command ask for at most this many keys at a
// time, so that no call holds a store up for long.
const MaxListLimit = 1000

// Inspector is the optional capability of a Store that lets an operator see
// its locks: which keys are held, by whom, for how long still, with which
// fence, and who waits in the key's fair queue. It reads only: no call of
// an Inspector changes a lock, a queue or a fence, and none blocks the
// store (Redis lists with SCAN, never KEYS; a database reads without
// taking row locks).
//
// What it reports is a snapshot that may be stale by the time it returns: a
// holder may have released, a waiter may have left. Operators act on it
// only through calls that compare the token they saw (Release,
// ReleaseShare), never by deleting a key.
type Inspector interface {
	// List returns keys of locks held now whose key begins with prefix,
	// at most limit of them (1..MaxListLimit), and the cursor of the next
	// page: "" to begin, "" back when the listing is done. A page may hold
	// fewer than limit keys, even none, before the end; a key held for the
	// whole listing is on at least one page, and may be on more than one
	// (Redis's SCAN gives that guarantee and no more). Only lock keys are
	// listed, as the Locker passes them to TryAcquire, never a store's
	// companion keys (fence counters, queues, share records). A key held
	// only by waiters in its queue is not held. A limit out of range or a
	// cursor this store did not hand out is an error wrapping
	// ErrInvalidOption.
	List(ctx context.Context, prefix, cursor string, limit int) (keys []string, next string, err error)

	// Inspect returns the state of key: its holders (none when it is free),
	// the waiters of its fair queue in order (Queuer), the exclusive holder
	// that waits for its shares to drain (Sharer.TryAcquireWaiting), and
	// the last fence drawn for it.
	Inspect(ctx context.Context, key string) (KeyState, error)
}

// KeyState is what an Inspector knows of one key.
type KeyState struct {
	// Key is the key inspected.
	Key string
	// Holders are the tokens that hold key: one exclusive holder, or the
	// shares of a Sharer in slot order (shared holds in the order the
	// store keeps them). Empty when key is free.
	Holders []HolderState
	// Waiters are the live entries of key's fair queue (Queuer), head
	// first. A store that is not a Queuer, or a queue without waiters,
	// leaves it empty. Waiters that spin (a Locker without WithFair) are
	// not in the store and are not listed.
	Waiters []WaiterState
	// Writer is the token of an exclusive holder that waits for key's
	// shares to drain (Sharer.TryAcquireWaiting), "" if none.
	Writer string
	// Fence is the last fencing token drawn for key, 0 if none was drawn
	// or the store does not keep one readable.
	Fence int64
}

// Held reports whether key has a holder.
func (s KeyState) Held() bool { return len(s.Holders) > 0 }

// HolderState is one holder of a key.
type HolderState struct {
	// Token is the holder's token, as its TryAcquire or TryAcquireShare
	// was given it: the only handle an operator may release it by.
	Token string
	// Exclusive is set for an exclusive holder (Store.TryAcquire); a share
	// (Sharer.TryAcquireShare) has Hold and Slot instead.
	Exclusive bool
	// Hold is a share's hold: Hold{0} shared, Hold{n} n permits.
	Hold Hold
	// Slot is a share's slot under permits (0..n-1); 0 otherwise.
	Slot int
	// TTL is how long the store holds it still, from the moment of the
	// answer as the store counts it; 0 when the store cannot tell.
	TTL time.Duration
	// Fence is the fencing token the holder drew last, 0 if none or if the
	// store cannot tell one holder's from the key's.
	Fence int64
}

// WaiterState is one entry of a key's fair queue.
type WaiterState struct {
	// Token is the waiter's token.
	Token string
	// TTL is the TTL the waiter asked for, 0 when the store does not keep
	// it readable.
	TTL time.Duration
	// Patience is how long its place lives without a call from it, from
	// the moment of the answer; 0 when the store cannot tell.
	Patience time.Duration
}
