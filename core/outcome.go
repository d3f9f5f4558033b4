package core

import (
	"context"
	"errors"
)

// Outcome is how an acquire or a lease ended: the one vocabulary that
// observers (telemetry, logs) and adapters (HTTP statuses, gRPC codes) share.
// Classify turns an error into one; AcquireEvent and ReleaseEvent carry one.
type Outcome uint8

// Outcomes of an acquire.
const (
	// OutcomeAcquired: the lock was taken (from the store, or handed off by
	// the previous holder in this process).
	OutcomeAcquired Outcome = iota + 1
	// OutcomeBusy: the wait budget was spent while another holder kept the
	// name (ErrTimeout).
	OutcomeBusy
	// OutcomeCanceled: the caller's context was cancelled (context.Canceled).
	OutcomeCanceled
	// OutcomeDeadline: the caller's deadline passed (context.DeadlineExceeded).
	OutcomeDeadline
	// OutcomeUnavailable: the store could not be reached or failed
	// (ErrStorage).
	OutcomeUnavailable
	// OutcomeInvalid: bad input or configuration (ErrInvalidName,
	// ErrInvalidOption).
	OutcomeInvalid
	// OutcomeBadRequest: the request lacks a part of the lock name (an
	// adapter's key function failed); never returned by Classify.
	OutcomeBadRequest
	// OutcomeError: anything else, a panic included.
	OutcomeError
)

// Outcomes of a lease's end.
const (
	// OutcomeReleased: the lease was released while it held its lock.
	OutcomeReleased Outcome = iota + 20
	// OutcomeHandedOff: the lock passed to the next holder in this process
	// without a release in the store (see LocalQueue).
	OutcomeHandedOff
	// OutcomeExpired: the lease was released after its validity had passed.
	OutcomeExpired
	// OutcomeNotHeld: the store found the lock gone (ErrNotHeld) at release,
	// or at an extend before it.
	OutcomeNotHeld
	// OutcomeGaveUp: the watchdog gave the lease up before its release, the
	// store having stayed unreachable.
	OutcomeGaveUp
)

var outcomeNames = map[Outcome]string{
	OutcomeAcquired:    "acquired",
	OutcomeBusy:        "busy",
	OutcomeCanceled:    "canceled",
	OutcomeDeadline:    "deadline_exceeded",
	OutcomeUnavailable: "unavailable",
	OutcomeInvalid:     "invalid",
	OutcomeBadRequest:  "bad_request",
	OutcomeError:       "error",
	OutcomeReleased:    "released",
	OutcomeHandedOff:   "handed_off",
	OutcomeExpired:     "expired",
	OutcomeNotHeld:     "not_held",
	OutcomeGaveUp:      "gave_up",
}

// String returns the outcome's name, such as "busy" or "handed_off".
func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return "unknown"
}

// Lost reports whether the outcome is a lease that lost its lock before its
// release: expired, not held, or given up by its watchdog.
func (o Outcome) Lost() bool {
	return o == OutcomeExpired || o == OutcomeNotHeld || o == OutcomeGaveUp
}

// Classify returns the outcome of an error returned by Acquire: nil is
// OutcomeAcquired. The sentinels are tested in a fixed order, so that an
// error wrapping several (a storage error also naming an I/O deadline) has
// one outcome everywhere: busy, then unavailable, then the caller's context,
// then invalid input.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, ErrTimeout):
		return OutcomeBusy
	case errors.Is(err, ErrStorage):
		return OutcomeUnavailable
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDeadline
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidOption):
		return OutcomeInvalid
	case errors.Is(err, ErrNotHeld):
		return OutcomeNotHeld
	}
	return OutcomeError
}
