package core

import (
	"fmt"

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
