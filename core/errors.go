package core

import (
	"errors"

	"github.com/reqlock/reqlock/lockstore"
)

// Sentinel errors. Acquire and Release wrap them with details; test for them
// with errors.Is. The kinds never overlap: a storage failure is never reported
// as ErrTimeout, and a caller's cancelled or expired context comes back as the
// context's own error (context.Canceled or context.DeadlineExceeded).
var (
	// ErrTimeout means the wait budget (WithWait) was spent while another
	// holder kept the name. Adapters answer it with "busy" (HTTP 409, gRPC
	// Aborted).
	ErrTimeout = errors.New("reqlock: lock not acquired: wait budget spent while the name was held")

	// ErrNotHeld means a release or an extension found that the lease was no
	// longer held: its TTL ran out, and the name may already belong to
	// someone else (whose key was left untouched).
	ErrNotHeld = errors.New("reqlock: lease not held")

	// ErrStorage marks a failure to talk to the store (refused connection,
	// I/O timeout, a server error). The underlying error is wrapped too, so
	// errors.Is and errors.As reach it. Adapters answer it with "unavailable"
	// (HTTP 503, gRPC Unavailable).
	ErrStorage = errors.New("reqlock: storage error")

	// ErrInvalidName means the lock name is unusable (empty).
	ErrInvalidName = errors.New("reqlock: invalid lock name")

	// ErrInvalidOption means a Locker option, or a per-request TTL set with
	// ContextWithTTL, is out of range, or the store cannot serve it. A
	// Locker built with invalid options reports it from Err and from every
	// Acquire, without touching the store. It is lockstore.ErrInvalidOption,
	// which stores wrap.
	ErrInvalidOption = lockstore.ErrInvalidOption
)
