package core

import (
	"context"
	"errors"
)

// Outcome is how an acquire or a lease ended: the one vocabulary that
// observers (telemetry, logs) and adapters (HTTP statuses, gRPC codes) share.
// Classify turns an error into one; AcquireEvent and ReleaseEvent carry one.
//
// The framework adapters (ginlock, httplock, echolock, echo5lock, fiberlock,
// fiber3lock; grpclock, connectlock, kratoslock) answer a request they
// cannot lock by its outcome, all alike, and do not run its handler:
//
//	Outcome      HTTP              gRPC              when
//	BadRequest   400               InvalidArgument   a key part is missing or unreadable
//	Busy         409, Retry-After  Aborted           the name stayed busy for the whole wait
//	Unavailable  503               Unavailable       the store failed or timed out
//	Deadline     503               DeadlineExceeded  the request's deadline passed while it waited
//	Canceled     499, no body      Canceled          the client went away while it waited
//	Invalid      500               Internal          the Locker refused the name, TTL or wait
//	Error        500               Internal          a key Func that fails otherwise; any other failure
//
// A 400 says which part (the key's error); other answers carry fixed texts
// (a JSON {"error": "..."} over HTTP), so that lock names stay out of
// responses, and the 499 is only for the logs. A slow store is Unavailable,
// never Busy: its calls end at the Locker's I/O timeout. With the adapter's
// WithFailOpen, an Unavailable request, and only that, runs unlocked instead.
// kratoslock's errors carry the HTTP statuses over both of its transports,
// but 504 for Deadline.
//
// A 500 is mostly a set-up mistake that shows when a request comes: a key
// Func that fails otherwise (a bad argument such as keyfunc.Param(""), a
// part its Source cannot give: keyfunc.ErrUnsupported), or a middleware
// registered before routing, whose 500 then says where it goes. Mistakes
// known at start-up (an invalid option, a nil Locker or key Func, a Locker
// whose Err is not nil) are not answered: the adapter's constructor panics
// with all of them, and its Check returns them instead.
//
// An HTTP adapter's WithBusyHandler and WithErrorHandler replace its answers,
// except to a gone client; an RPC adapter's WithErrorHandler returns the
// error to fail with, the default one when it returns nil.
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
