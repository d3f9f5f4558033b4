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
	// OutcomeLost: the lease had ended before Release (core.Lease.Lost):
	// its TTL ran out (error.type "expired"), Redis no longer held its
	// token (error.type "not_held", e.g. after a failed Extend), or its
	// watchdog could not renew it while Redis was unreachable and gave it
	// up (error.type "renewal_failed"; the release then deleted the key if
	// it was still there). Part of the critical section ran without the
	// lock, or with Done closed.
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
	ErrorTypeRenewalFailed    = "renewal_failed"    // released after its watchdog gave it up (Redis unreachable)
	ErrorTypeOther            = "_OTHER"            // anything else, a panic in the chain included (the semantic conventions' fallback)
)

// errPanicked stands for the result of a call of the chain that panicked:
// the handlers record it as a failure of type _OTHER, then let the panic go
// on.
var errPanicked = errors.New("reqlock: the handler chain panicked")

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

// leaseAtRelease is what a handler reads of a lease before it releases it.
type leaseAtRelease struct {
	start      time.Time // of the release
	validUntil time.Time
	lost       bool // core.Lease.Lost, before the release ran
}

// leaseBefore reads lease before its release runs: after it, a lease lost by
// its watchdog whose key the release deleted would look released.
func leaseBefore(lease *core.Lease) leaseAtRelease {
	return leaseAtRelease{start: time.Now(), validUntil: lease.ValidUntil(), lost: lease.Lost()}
}

// releaseOutcome returns the outcome of a release that returned err, of a
// lease in state before when the release started, and its error type.
//
// A release whose chain panicked is an error of type _OTHER. A lease is lost
// when the release started after its validity ended (Lease.Done had closed
// for the expiry then: expired), when Redis no longer held its token
// (ErrNotHeld: the TTL ran out, or an Extend found the key gone and closed
// Done: not_held), or when it was lost otherwise before the release, which
// is its watchdog giving it up (renewal_failed, or the release's own error
// type if that failed too).
func releaseOutcome(err error, before leaseAtRelease) (outcome, errType string) {
	errType = errorType(err)
	switch {
	case errors.Is(err, errPanicked):
		return OutcomeError, ErrorTypeOther
	case !before.start.Before(before.validUntil):
		return OutcomeLost, ErrorTypeExpired
	case errType == ErrorTypeNotHeld:
		return OutcomeLost, errType
	case before.lost && errType == "":
		return OutcomeLost, ErrorTypeRenewalFailed
	case before.lost:
		return OutcomeLost, errType
	case errType != "":
		return OutcomeError, errType
	}
	return OutcomeReleased, ""
}

// statusText is the span status description of a failure of type errType,
// err: the sentinel's message, never the error's own text, which names the
// lock.
func statusText(errType string, err error) string {
	if errors.Is(err, errPanicked) {
		return errPanicked.Error()
	}
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
	case ErrorTypeRenewalFailed:
		return "reqlock: the watchdog gave the lease up before its release"
	}
	return "reqlock: failed"
}
