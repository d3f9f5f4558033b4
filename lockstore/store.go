package lockstore

import (
	"context"
	"errors"
	"time"
)

// ErrInvalidOption marks a configuration that is out of range or that a
// store cannot serve. core.ErrInvalidOption is the same value: a store's
// option errors and a Checker's errors wrap it, and the Locker reports
// them from Err and every Acquire.
var ErrInvalidOption = errors.New("reqlock: invalid option")

// The settings a store assumes until a Locker tunes it (Tuner): the
// Locker's own defaults.
const (
	// DefaultIOTimeout bounds each call to the store (core.WithIOTimeout).
	DefaultIOTimeout = time.Second
	// DefaultNotifyLinger is how long a name stays subscribed after its
	// last waiter left (core.WithNotifyLinger).
	DefaultNotifyLinger = 5 * time.Second
)

// Store keeps the locks of a Locker in three atomic calls. The Locker does
// the rest once, for every store: the spin loop and its wait budget, the
// per-request TTL, the watchdog, Done, fencing bookkeeping, reentrancy, the
// local queue and the plugins. See the package documentation for keys,
// tokens, TTLs, fences and failures.
type Store interface {
	// TryAcquire sets key to token for ttl unless key is held, and reports
	// whether key now holds token. An attempt that finds key holding token
	// already (a re-sent attempt) counts as acquired and resets the TTL to
	// ttl. With fenced, it also draws the next fencing token of key in the
	// same atomic step and returns it (> 0); fence is 0 otherwise.
	//
	// When TryAcquire fails with an error after its command may have reached
	// the store, the store removes what the attempt may have set
	// (compare-and-delete by token), so that no lock is left without a
	// holder, and without holding the caller up past ctx. A removal that
	// finds nothing is no proof: a stalled store or link may still apply the
	// attempt's command later. So the store keeps trying in the background,
	// bounded in time (the Redis store: at once, then every 250 ms, until it
	// deletes the key or the store has answered for the attempt's TTL), and
	// stops when it is closed (io.Closer) without waiting for them to
	// succeed.
	TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok bool, fence int64, err error)

	// Release deletes key if it holds token, and reports whether it did.
	Release(ctx context.Context, key, token string) (ok bool, err error)

	// Extend resets the TTL of key to ttl if key holds token, and reports
	// whether it did. With fenced, it also draws a new, higher fencing token
	// for the holder in the same atomic step and returns it (> 0).
	Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok bool, fence int64, err error)
}

// Notifier is the optional capability of a Store that pushes a notice to
// waiters when a lock is released, so that they retry at once instead of at
// the end of their random sleep (core.WithNotify).
type Notifier interface {
	// Announce makes every later Release through the store announce itself
	// to the waiters of every process. A Locker built with WithNotify calls
	// it once, when it is built.
	Announce()
	// Watch returns a channel that receives a value after an announced
	// release of key, until stop is called. Notices may be lost (a dropped
	// connection); waiters still retry at the end of their sleep.
	Watch(key string) (c <-chan struct{}, stop func())
}

// Undoer is the optional capability of a Store that removes a lock in the
// background, as it removes what a failed TryAcquire may have set: a
// compare-and-delete by token, at once within ctx if ctx has time left,
// then again until it deletes the key, or the store has answered for ttl
// since the call was sent at sent, or the store is closed. It never
// removes a key that another token holds.
//
// The Locker calls it where a lock would otherwise be left held by nobody
// until its TTL: a Release that failed with a storage error, and a lock it
// holds without a lease to release it (a hand-off that failed, a lease its
// watchdog gave up). A store without it gets one compare-and-delete within
// the I/O timeout there, and a failed Release leaves the lock to its TTL.
//
// A Queuer's Undo also takes a token that does not hold key out of key's
// queue: the Locker undoes the place of a waiter that has gone when one of
// its calls failed (an Enqueue or a Poll that a stalled store may still run;
// a Dequeue that may have done nothing), with the patience as ttl.
type Undoer interface {
	Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time)
}

// TTLRounder is the optional capability of a Store that does not hold a
// lock for exactly the TTL it is asked for (etcd's leases count whole
// seconds and have a floor). StoreTTL returns how long the store holds a
// lock set with ttl; the Locker reports it as Lease.TTL and counts the
// lease's validity from it.
//
// So a store must never answer more than it holds (less is safe: the lease
// gives up early). The answer depends on ttl alone, and a TTL the store
// answered is held as it is (StoreTTL(StoreTTL(ttl)) == StoreTTL(ttl)),
// since the watchdog renews with it. A store without it holds what it is
// asked.
type TTLRounder interface {
	StoreTTL(ttl time.Duration) time.Duration
}

// FreeAcquirer is the optional capability of a Store whose attempts can
// take a command shaped for the outcome they expect. The Locker's first
// attempt of an Acquire with a wait budget expects a free name, and calls
// TryAcquireFree instead of TryAcquire; later attempts expect a held one,
// and an Acquire without a wait budget makes one TryAcquire.
//
// TryAcquireFree has TryAcquire's contract but one point: it may report
// false for a key that token itself holds, as when the client re-sent a
// command whose first transmission took the key but whose reply was lost
// (the Redis store: a native SET NX PX, which answers a held key without
// saying whose token holds it). So the Locker sends its next attempt with
// the same token, through TryAcquire or its variants, which count a key
// their token holds as acquired; and if it makes no other attempt, it
// releases the token once (compare-and-delete), so that a key the token
// may hold is not left to its TTL.
type FreeAcquirer interface {
	TryAcquireFree(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok bool, fence int64, err error)
}

// HeldAcquirer is the optional capability of a Sharer whose attempts on a
// name that is likely held can take a cheaper command than
// TryAcquireWaiting (the Redis store: one native SET key token NX PX ttl
// GET in place of a script). The Locker's later exclusive attempts of an
// Acquire call TryAcquireHeld until one reports shared; from then on, for
// the rest of that Acquire, it calls TryAcquireWaiting (the first time in
// the same attempt, with the same token), so that a writer that shares keep
// out still records itself and is not starved.
//
// TryAcquireHeld has TryAcquire's contract whole (a re-sent attempt that
// finds key holding token counts as acquired and resets the TTL to ttl;
// with fenced it draws the next fence in the same atomic step; a failed
// attempt that may have reached the store is undone), and one more answer:
// when it fails because shares (Sharer) hold key, it reports shared, and it
// writes nothing then: no waiting writer's record, nothing of token. It
// never clears another writer's record either, which TryAcquireWaiting
// clears when it succeeds: an Acquire that recorded itself goes on with
// TryAcquireWaiting, and a record of another Acquire expires with its
// patience or is cleared by that Acquire.
type HeldAcquirer interface {
	TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok, shared bool, fence int64, err error)
}

// Tuner is the optional capability of a Store that takes the settings of
// the Locker built on it: the Locker calls Tune once, when it is built,
// before any other call. A store bounds its own background calls by
// IOTimeout, and a Notifier keeps a name's subscription NotifyLinger after
// its last watcher left.
type Tuner interface {
	Tune(StoreSettings)
}

// Checker is the optional capability of a Store that cannot serve every
// configuration: the Locker calls Check once, when it is built and its
// options are valid, before Tune. An error, wrapping ErrInvalidOption, is
// reported by the Locker's Err and every Acquire (a Redlock quorum refuses
// WithFair, and WithFencing on nodes that cannot raise a fence).
type Checker interface {
	Check(StoreSettings) error
}

// StoreSettings are the settings a Locker gives its store (Tuner, Checker).
type StoreSettings struct {
	// IOTimeout bounds each call to the store (core.WithIOTimeout).
	IOTimeout time.Duration
	// NotifyLinger is how long a subscription outlives its last watcher
	// (core.WithNotifyLinger).
	NotifyLinger time.Duration
	// Fencing is set when leases draw fencing tokens (core.WithFencing).
	Fencing bool
	// Fair is set when waiters queue in the store (core.WithFair).
	Fair bool
}

// FenceRaiser is the optional capability of a Store that can raise the
// fencing counter of a key to at least fence while key holds token. A
// Redlock quorum needs it for fencing: the quorum's highest token is
// written back to the quorum before the lease is handed out.
type FenceRaiser interface {
	RaiseFence(ctx context.Context, key, token string, fence int64) (ok bool, err error)
}

// Queuer is the optional capability of a Store that keeps the waiters of a
// key in arrival order and, when the key is released, grants it to the first
// live waiter directly (core.WithFair). A Queuer's Release does that grant:
// it sets key to the head waiter's token, with the TTL and fence the waiter
// asked for when it queued, and tells it (Grants).
//
// A queue entry lives only while its waiter keeps calling Enqueue or Poll:
// patience after its last call, the entry is dead, and a release or another
// waiter's Enqueue skips it. A lock granted to a waiter is held for at most
// patience at first (Grant.TTL), so that a lock granted to a waiter that
// died is freed by the same bound; the Locker extends it to the lease's TTL
// when the request holds it longer.
type Queuer interface {
	Store

	// Enqueue is TryAcquire for a waiter that keeps its place in line. It
	// takes key when key is free and no live waiter is ahead of token.
	// Otherwise it puts token at the tail of key's queue on its first call,
	// keeps its place on later calls, and renews the entry for patience. A
	// token to which a release has granted key gets its grant. All in one
	// atomic step.
	Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (Grant, error)

	// Poll renews the places of waiters in key's queue, all of one Locker
	// (one patience and one fencing setting), in one atomic step: each
	// entry is renewed for patience, and a waiter that lost its place (it
	// was skipped as dead) is queued again at the tail. Then a free key is
	// granted to the first live waiter, one of these or not. It returns
	// the index in waiters of the one that holds key with its grant, or
	// -1. A Locker polls once per key for all its waiters, so that the
	// round trips of waiting do not grow with their number.
	Poll(ctx context.Context, key string, waiters []Waiter, patience time.Duration, fenced bool) (int, Grant, error)

	// Dequeue takes token out of key's queue. If key was granted to token
	// meanwhile, it releases it, and the next live waiter gets it: a grant
	// is never lost with a waiter that gives up.
	Dequeue(ctx context.Context, key, token string) error

	// Grants returns a channel that receives token's grant of key when a
	// release grants it, until stop is called. Messages may be lost (a
	// dropped connection): the waiter's next Poll returns the grant.
	Grants(key, token string) (c <-chan Grant, stop func())
}

// Waiter is a waiter's place in a queue, as Queuer.Poll renews it: its
// token and the TTL it asked for.
type Waiter struct {
	Token string
	TTL   time.Duration
}

// Grant is the answer of a Queuer to a waiter.
type Grant struct {
	// OK reports that the waiter holds the key.
	OK bool
	// Fence is the lease's fencing token when the waiter asked for one.
	Fence int64
	// TTL is how long the key is held for the waiter from the moment of the
	// answer: the lease's TTL when the waiter took the key itself, at most
	// the waiter's patience when a release granted it.
	TTL time.Duration
}
