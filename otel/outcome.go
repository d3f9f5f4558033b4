package lockotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/reqlock/reqlock/core"
)

// This file is the vocabulary shared by the tracing, metrics and log
// handlers: attribute keys, outcomes and the classification of errors. Every
// value here has low cardinality; none is derived from a lock name.

// Attribute keys set on spans and metrics. None of them ever carries a lock
// name or a Redis key.
const (
	// RouteKey is the route template or RPC method the adapters put on the
	// context with core.ContextWithRoute (Request.Route). It is omitted when
	// empty.
	RouteKey = attribute.Key("reqlock.route")
	// OutcomeKey is how an acquire or a release ended: one of the Outcome
	// constants.
	OutcomeKey = attribute.Key("reqlock.outcome")
	// AttemptsKey is the number of Redis attempts an acquire made (spans
	// only).
	AttemptsKey = attribute.Key("reqlock.attempts")
	// WaitKey is the time an acquire took, in seconds, from the call of
	// Locker.Acquire to its return, local wait included (spans only).
	WaitKey = attribute.Key("reqlock.wait.seconds")
	// LocalWaitKey is the part of the wait spent on a lock inside this
	// process (Request.LocalWait, set by a local-lock handler such as the
	// hotspot guard), in seconds; set only when positive (spans only).
	LocalWaitKey = attribute.Key("reqlock.local_wait.seconds")
	// HoldKey is how long a lease was held, in seconds, from the return of
	// its acquire to the end of its release (release spans only).
	HoldKey = attribute.Key("reqlock.hold.seconds")
	// ErrorTypeKey is the semantic-convention attribute "error.type", set on
	// failures only: one of the ErrorType constants.
	ErrorTypeKey = attribute.Key("error.type")
)

// Outcomes of an acquire (OutcomeKey on reqlock.acquire spans and the acquire
// metrics).
const (
	// OutcomeAcquired: the lock was taken.
	OutcomeAcquired = "acquired"
	// OutcomeTimeout: the wait budget was spent while another holder kept
	// the name (core.ErrTimeout).
	OutcomeTimeout = "timeout"
	// OutcomeCanceled: the caller's context ended first (context.Canceled or
	// context.DeadlineExceeded; error.type tells which).
	OutcomeCanceled = "canceled"
	// OutcomeError: any other failure, chiefly Redis unavailable
	// (core.ErrStorage); error.type tells which.
	OutcomeError = "error"
)

// Outcomes of a release (OutcomeKey on reqlock.release spans and
// reqlock.hold.duration).
const (
	// OutcomeReleased: the lease was still valid and its lock was deleted
	// (or handed to a local waiter).
	OutcomeReleased = "released"
	// OutcomeLost: the lease had ended before Release: its TTL ran out
	// (error.type "expired"), or Redis no longer held its token
	// (error.type "not_held", e.g. after a failed Extend). Part of the
	// critical section ran without the lock.
	OutcomeLost = "lost"
	// OutcomeError is also the outcome of a release that Redis failed; the
	// lock then expires on its TTL.
)

// Values of error.type. They name the kind of the error, never its text,
// which contains the lock name.
const (
	ErrorTypeTimeout          = "timeout"           // core.ErrTimeout
	ErrorTypeCanceled         = "canceled"          // context.Canceled
	ErrorTypeDeadlineExceeded = "deadline_exceeded" // context.DeadlineExceeded
	ErrorTypeStorage          = "storage"           // core.ErrStorage
	ErrorTypeInvalid          = "invalid"           // core.ErrInvalidName, core.ErrInvalidOption
	ErrorTypeNotHeld          = "not_held"          // core.ErrNotHeld
	ErrorTypeExpired          = "expired"           // released after the lease's TTL ran out
	ErrorTypeOther            = "_OTHER"            // anything else (the semantic conventions' fallback)
)

// errorType classifies err into one of the ErrorType constants; "" for nil.
func errorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, core.ErrTimeout):
		return ErrorTypeTimeout
	case errors.Is(err, context.Canceled):
		return ErrorTypeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorTypeDeadlineExceeded
	case errors.Is(err, core.ErrStorage):
		return ErrorTypeStorage
	case errors.Is(err, core.ErrInvalidName), errors.Is(err, core.ErrInvalidOption):
		return ErrorTypeInvalid
	case errors.Is(err, core.ErrNotHeld):
		return ErrorTypeNotHeld
	}
	return ErrorTypeOther
}

// acquireOutcome returns the outcome of an acquire that returned err and its
// error type.
func acquireOutcome(err error) (outcome, errType string) {
	errType = errorType(err)
	switch errType {
	case "":
		return OutcomeAcquired, ""
	case ErrorTypeTimeout:
		return OutcomeTimeout, errType
	case ErrorTypeCanceled, ErrorTypeDeadlineExceeded:
		return OutcomeCanceled, errType
	}
	return OutcomeError, errType
}

// releaseOutcome returns the outcome of a release that started at start and
// returned err, for a lease valid until validUntil. A lease is lost when the
// release started after its validity ended (Lease.Done had closed for the
// expiry then), or when Redis no longer held its token (ErrNotHeld: the TTL
// ran out, or an Extend found the key gone and closed Done).
func releaseOutcome(err error, start, validUntil time.Time) (outcome, errType string) {
	errType = errorType(err)
	switch {
	case !start.Before(validUntil):
		return OutcomeLost, ErrorTypeExpired
	case errType == ErrorTypeNotHeld:
		return OutcomeLost, errType
	case errType != "":
		return OutcomeError, errType
	}
	return OutcomeReleased, ""
}

// statusText is the span status description of a failure of type errType:
// the sentinel's message, never the error's own text, which names the lock.
func statusText(errType string) string {
	switch errType {
	case ErrorTypeTimeout:
		return core.ErrTimeout.Error()
	case ErrorTypeCanceled:
		return context.Canceled.Error()
	case ErrorTypeDeadlineExceeded:
		return context.DeadlineExceeded.Error()
	case ErrorTypeStorage:
		return core.ErrStorage.Error()
	case ErrorTypeInvalid:
		return "reqlock: invalid lock name or option"
	case ErrorTypeNotHeld:
		return core.ErrNotHeld.Error()
	case ErrorTypeExpired:
		return "reqlock: the lease expired before its release"
	}
	return "reqlock: failed"
}
