package core

import (
	"context"
	"time"
)

// A Locker has three slots for plugins, so that what a plugin sees never
// depends on the order it was given in:
//
//   - one LocalQueue (WithLocalQueue; the hotspot package's Guard): the
//     goroutines of this process that want one name queue here first, so
//     that one of them contends in the store; the lock may pass from one
//     to the next without a store round trip;
//   - Observers (WithObservers; the otel package's Handler and
//     LogHandler): told of every acquire and of every end of a lease
//     (released, lost, handed off locally) once it is over, with typed
//     events;
//   - Handlers (WithHandlers): users' own middleware around acquire and
//     release, in the order given, outermost first.
//
// WithHandlers also accepts a LocalQueue or an Observer and puts it in its
// slot, so hotspot.New() and lockotel.New() work in WithHandlers in any
// order. The pipeline of one Acquire is:
//
//	Handlers → LocalQueue → spin loop → Store   (then every Observer)

// AcquireCall describes one Acquire call as it goes through the Handlers.
// Each call gets its own.
type AcquireCall struct {
	// Name is the lock name given to Acquire.
	Name string
	// Key is the store key that guards Name (see Locker.Key).
	Key string
	// Route is the call's route label (see Route), or "".
	Route string
	// TTL is the lifetime of the lock in the store, after the precedence
	// rule of Locker.Acquire. A Handler may change it before calling next;
	// the spin loop rejects a TTL outside [1ms, MaxTTL] with
	// ErrInvalidOption and uses it in whole milliseconds.
	TTL time.Duration
	// Start is when Acquire was called.
	Start time.Time
	// Deadline is when the wait budget runs out: Start plus the wait, or the
	// context's deadline if that comes first.
	Deadline time.Time
	// Attempts counts the store attempts made so far; read it after next
	// returns.
	Attempts int
	// Mode is how the call holds the name (Shared, Permits), and Permits
	// the n of Permits(n) (0 otherwise). Handlers read them; changing them
	// is not supported.
	Mode    Mode
	Permits int

	// What the innermost link left for Acquire: the lease, the local wait,
	// whether the lock was handed off.
	lease     *Lease
	localWait time.Duration
	handedIn  bool
	nexted    bool
	holder    Holder // written into its tokens, unless WithoutHolder
}

// Request is the former name of AcquireCall.
//
// Deprecated: use AcquireCall.
type Request = AcquireCall

// AcquireFunc is the rest of the pipeline below a Handler's Acquire. It may
// be called once per AcquireCall.
type AcquireFunc func(ctx context.Context, req *AcquireCall) (*Lease, error)

// ReleaseFunc is the rest of the pipeline below a Handler's Release.
type ReleaseFunc func(ctx context.Context, lease *Lease) error

// Handler wraps acquire and release like a middleware wraps an HTTP handler.
// Its contract is held by the types: a Handler sees the lease that next
// returns but cannot hand out another one; when it returns an error although
// next acquired the lock, the lock is released and Acquire fails with that
// error; when it returns nil without calling next, Acquire fails. Release
// always reaches the store, whether or not a Handler calls next (once
// only); a Handler may act before and after it, and its error is Release's.
// A Handler's panic goes on up to the caller, but leaves no lock behind: a
// lock taken below a Handler that panics in Acquire is released (and the
// Observers see the acquire fail with OutcomeError), and a Release whose
// Handler panics still reaches the store and the local queue.
//
// A Handler is shared by every request of a Locker and must be safe for
// concurrent use. Release runs once per lease, with a context that is not
// cancelled. Handlers see no reentrant (nested) acquire.
type Handler interface {
	Acquire(ctx context.Context, req *AcquireCall, next AcquireFunc) error
	Release(ctx context.Context, lease *Lease, next ReleaseFunc) error
}

// HandlerFuncs builds a Handler from two functions. A nil function passes
// straight through to next.
type HandlerFuncs struct {
	OnAcquire func(ctx context.Context, req *AcquireCall, next AcquireFunc) error
	OnRelease func(ctx context.Context, lease *Lease, next ReleaseFunc) error
}

// Acquire calls OnAcquire, or next when it is nil.
func (h HandlerFuncs) Acquire(ctx context.Context, req *AcquireCall, next AcquireFunc) error {
	if h.OnAcquire == nil {
		_, err := next(ctx, req)
		return err
	}
	return h.OnAcquire(ctx, req, next)
}

// Release calls OnRelease, or next when it is nil.
func (h HandlerFuncs) Release(ctx context.Context, lease *Lease, next ReleaseFunc) error {
	if h.OnRelease == nil {
		return next(ctx, lease)
	}
	return h.OnRelease(ctx, lease, next)
}

// Observer is told of every Acquire of a Locker that got past its
// arguments' checks (reentrant ones excepted), once it has ended, and of the
// end of every lease it acquired. Its place among the options does not
// matter: it sees what happened, with the local queue's part in it. It must
// be safe for concurrent use and should return quickly.
type Observer interface {
	// ObserveAcquire is called when an Acquire ends, on its goroutine and
	// with its context (so a span started here is a child of the
	// request's). For an acquired lock it may return a LeaseObserver,
	// which is told how the lease ends; nil otherwise.
	ObserveAcquire(ctx context.Context, e AcquireEvent) LeaseObserver
}

// StartObserver is an Observer that is also told when an Acquire begins,
// after its arguments were checked and before the local queue and the store:
// with ObserveAcquire at its end, it can count the Acquires in progress (the
// requests waiting for a lock; lockotel's reqlock.acquire.pending). It is
// found by interface assertion.
type StartObserver interface {
	Observer
	// ObserveStart is called on the Acquire's goroutine, with its context.
	// ObserveAcquire follows, once, when the Acquire ends.
	ObserveStart(ctx context.Context, e StartEvent)
}

// StartEvent describes an Acquire that begins.
type StartEvent struct {
	Name  string
	Key   string
	Route string        // the route label, "" if none
	TTL   time.Duration // the TTL asked for
	Start time.Time     // when Acquire was called
	Mode  Mode          // how the call holds the name
	// Permits is the n of Permits(n), 0 in the other modes.
	Permits int
}

// LeaseObserver is told how one lease ended. It is the per-lease state of an
// Observer: whatever it needs at the end (a start time, a span) lives in it.
type LeaseObserver interface {
	// ObserveRelease is called once, when Release has ended or the lock was
	// handed off to the next holder in this process.
	ObserveRelease(ctx context.Context, e ReleaseEvent)
}

// AcquireEvent describes one Acquire that has ended.
type AcquireEvent struct {
	Name  string
	Key   string
	Route string        // the route label, "" if none
	TTL   time.Duration // the TTL asked for
	Mode  Mode          // how the call holds the name
	// Permits is the n of Permits(n), 0 in the other modes.
	Permits int
	Start   time.Time // when Acquire was called
	End     time.Time // when it returned
	// Attempts is the number of store attempts; 0 for a lock handed off
	// by the previous holder in this process.
	Attempts int
	// LocalWait is the time spent in the local queue before the store.
	LocalWait time.Duration
	// HandedOver is set when the lock came from the previous holder in this
	// process, without a store acquire.
	HandedOver bool
	Outcome    Outcome
	Err        error  // nil when acquired
	Lease      *Lease // nil unless acquired
}

// ReleaseEvent describes how a lease ended.
type ReleaseEvent struct {
	Lease *Lease
	Start time.Time // when Release was called
	End   time.Time // when it returned
	// Outcome is OutcomeReleased, OutcomeHandedOff, one of the lost
	// outcomes (see Outcome.Lost), or OutcomeUnavailable or OutcomeError.
	Outcome Outcome
	Err     error // Release's error, nil for a clean release or hand-off
}

// LocalQueue serialises the acquires of one process for one name before they
// reach the store (the hotspot package's Guard is one). The Locker calls
// Enter before its spin loop; the turn it gets back lives with the lease,
// and at release the Locker offers the lease to the next waiter (Pass)
// before it releases in the store, then ends the turn (Leave).
type LocalQueue interface {
	// Enter waits for the local turn of key until deadline or until ctx ends,
	// and returns it. It returns a nil turn (and no error) for a key it does
	// not queue. It fails with ErrTimeout when deadline passed first, with
	// ctx's error when ctx ended first; the Locker reports either as its own
	// spin loop would.
	Enter(ctx context.Context, name, key string, deadline time.Time) (LocalTurn, error)
}

// LocalTurn is one goroutine's turn for a key in a LocalQueue.
type LocalTurn interface {
	// Passed returns the lease the previous holder of the turn handed off
	// (see Pass) instead of releasing it, or nil. The Locker takes the lock
	// over from it without a store acquire.
	Passed() *Lease
	// Pass offers lease, whose holder is releasing it, to a goroutine
	// waiting in Enter for the same key, and reports whether one took it.
	// The Locker calls it only for a lease that is not lost; after true it
	// does not release the lease in the store, and does not call Leave.
	Pass(lease *Lease) bool
	// Leave ends the turn: the next waiter may go. The Locker calls it after
	// the store release, or after a failed acquire.
	Leave()
}
