package core

import (
	"context"
	"fmt"
	"time"

	"github.com/reqlock/reqlock/lockstore"
)

// Mode is how a lease holds its name: alone (the default), shared with
// other shared holders (Shared), or in one of n numbered slots (Permits).
type Mode uint8

const (
	// ModeExclusive is the default: one holder at a time.
	ModeExclusive Mode = iota
	// ModeShared is a shared hold (Shared): any number of shared holders at
	// once, none beside an exclusive one.
	ModeShared
	// ModePermits is a numbered permit (Permits): up to n holders at once,
	// each in its own slot.
	ModePermits
)

// String returns "exclusive", "shared" or "permits", the value telemetry
// records as the lock's mode.
func (m Mode) String() string {
	switch m {
	case ModeExclusive:
		return "exclusive"
	case ModeShared:
		return "shared"
	case ModePermits:
		return "permits"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// MaxPermits is the largest n Permits accepts.
const MaxPermits = lockstore.MaxPermits

// ErrModeMismatch means the name is held in a mode that disagrees with the
// call's: Shared while it is held with Permits, or Permits(n) while it is
// held with another n. Acquire returns it at once, wrapped together with
// ErrInvalidOption: callers that disagree on a name's mode are
// misconfigured, and are never let in beyond the smaller n.
var ErrModeMismatch = lockstore.ErrModeMismatch

// The seam of shared holds, permits and atomic multi-name acquires lives in
// package lockstore; these names keep it reachable from core.
type (
	// Sharer keeps names that several holders hold at once (see
	// lockstore.Sharer).
	Sharer = lockstore.Sharer
	// Hold is how a Sharer's holder holds a name (see lockstore.Hold).
	Hold = lockstore.Hold
	// MultiAcquirer takes several keys in one step (see
	// lockstore.MultiAcquirer).
	MultiAcquirer = lockstore.MultiAcquirer
	// ShareUndoer removes shares in the background (see
	// lockstore.ShareUndoer).
	ShareUndoer = lockstore.ShareUndoer
)

// ErrNotAtomic is what a MultiAcquirer answers for keys it cannot take in
// one step (see lockstore.ErrNotAtomic).
var ErrNotAtomic = lockstore.ErrNotAtomic

// Shared takes the name in shared mode, the read side of a read-write lock:
// any number of shared holders at once, none while an exclusive holder
// holds it. Writers do not starve: once an exclusive Acquire of the name
// waits, later shared Acquires wait behind it. Each shared lease has its
// own token, TTL, watchdog, Done and fence, and a holder that dies frees
// only its own share, at its own TTL.
//
// The store must be a Sharer (the Redis, etcd, ZooKeeper, SQL and
// Memcached stores are); a Locker built WithFair refuses it with
// ErrInvalidOption (its queue orders exclusive holders only). Shared holds
// bypass the local queue (WithLocalQueue): shared holders of one process
// run together.
func Shared() CallOption {
	return func(c *callConfig) { c.mode, c.permits = ModeShared, 0 }
}

// Permits lets up to n holders hold the name at once, each in its own slot
// (Lease.Slot, 0 to n-1, the lowest free one): a hot item's stock split in
// n segments, or a per-tenant concurrency cap (Curator's semaphore, the
// "segmented lock"). A holder that dies frees its slot at its TTL. n must
// be between 1 and MaxPermits. Callers that hold one name with different n
// at once get ErrModeMismatch, never more holders than the smaller n.
// Like Shared, it needs a Sharer, is refused WithFair and bypasses the
// local queue; an exclusive Acquire of the name waits for every permit.
func Permits(n int) CallOption {
	return func(c *callConfig) {
		c.mode, c.permits = ModePermits, n
		if n < 1 || n > MaxPermits {
			c.setErr(fmt.Errorf("%w: Permits(%d): n must be between 1 and %d", ErrInvalidOption, n, MaxPermits))
		}
	}
}

// hold is how a lease holds its name: its mode, the n of Permits(n) and
// its slot.
type hold struct {
	mode    Mode
	permits int
	slot    int
}

// modeLabel names a mode for errors: "exclusive lock", "shared hold",
// "permit (of 5)".
func modeLabel(m Mode, permits int) string {
	switch m {
	case ModeShared:
		return "shared hold"
	case ModePermits:
		return fmt.Sprintf("permit (of %d)", permits)
	}
	return "lock"
}

// checkMode reports why the Locker cannot take name in mode: a store that
// is not a Sharer, or WithFair, whose queue orders exclusive holders only.
func (l *Locker) checkMode(name string, mode Mode) error {
	if mode == ModeExclusive {
		return nil
	}
	what := mode.String()
	if name != "" {
		what = fmt.Sprintf("%s of %q", mode, name)
	}
	if l.sharer == nil {
		return fmt.Errorf("%w: %s: the store (%T) keeps one holder per name; shared holds and permits need a store that is a core.Sharer",
			ErrInvalidOption, what, l.store)
	}
	if l.queuer != nil {
		return fmt.Errorf("%w: %s: a Locker built WithFair queues exclusive holders only; take shared holds and permits with a Locker without WithFair",
			ErrInvalidOption, what)
	}
	return nil
}

// CheckMode reports why the Locker cannot take names in mode (its store is
// not a Sharer, or it was built WithFair), and its configuration error if
// it has one; nil if it can. Adapters call it when they are built, so that
// a route set up for shared holds or permits on the wrong Locker fails at
// start-up instead of on every request.
func (l *Locker) CheckMode(mode Mode) error {
	if l.err != nil {
		return l.err
	}
	return l.checkMode("", mode)
}

// reenter answers an Acquire of a name that outer, a lease carried by the
// context, already holds: a nested lease when outer's mode covers the
// call's (an exclusive hold covers every mode, a shared hold a shared one,
// a permit one of the same n), an error otherwise: a shared holder asking
// for the name exclusively would wait for its own share (Curator and
// Redisson refuse the same upgrade).
func reenter(outer *Lease, name string, opts []CallOption) (*Lease, error) {
	c, err := readCallOptions(opts)
	if err != nil {
		return nil, err
	}
	if outer.mode == ModeExclusive || (outer.mode == c.mode && outer.permits == c.permits) {
		return nested(outer), nil
	}
	return nil, fmt.Errorf("%w: %s of %q inside a %s of it (carried by the context): a hold cannot be upgraded or changed in place",
		ErrInvalidOption, modeLabel(c.mode, c.permits), name, modeLabel(outer.mode, outer.permits))
}

// writerPatience is how long an exclusive waiter's record (see
// TryAcquireWaiting) lasts: longer than the longest gap between two of its
// attempts (a sleep and an I/O timeout), so that it stays while the waiter
// waits and expires soon after it gives up.
func (l *Locker) writerPatience() time.Duration {
	return 2*(l.cfg.spinMin+l.cfg.spinRandom) + l.cfg.ioTimeout
}

// extendStore resets the lease's hold in the store to ttl: its share
// through the Sharer, its lock otherwise.
func (l *Locker) extendStore(ctx context.Context, lease *Lease, ttl time.Duration) (bool, error) {
	if lease.mode != ModeExclusive {
		ok, _, err := l.sharer.ExtendShare(ctx, lease.key, lease.token, ttl, false)
		return ok, err
	}
	ok, _, err := l.store.Extend(ctx, lease.key, lease.token, ttl, false)
	return ok, err
}
