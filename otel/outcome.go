package lockotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/reqlock/reqlock/core"
)

// This file is the vocabulary shared by the tracing, metrics and log
// handlers: attribute keys, and the attribute values of each core.Outcome
// (one table, outcomes). Every value here has low cardinality; none is
// derived from a lock name.

// Attribute keys set on spans and metrics. None of them ever carries a lock
// name or a Redis key.
const (
	// RouteKey is the route template or RPC method the adapters put on the
	// context with core.ContextWithRoute (core.AcquireEvent.Route). It is
	// omitted when empty.
	RouteKey = attribute.Key("reqlock.route")
	// ModeKey is how the lock holds its name (core.Mode's String):
	// "exclusive" (the default), "shared" (core.Shared, the read side of a
	// read-write lock) or "permits" (core.Permits). It is set on every span
	// and metric, so that the waits of readers and writers, say, can be told
	// apart.
	ModeKey = attribute.Key("reqlock.mode")
	// PermitsKey is the n of core.Permits(n), set with mode "permits" only,
	// on spans and on every metric but reqlock.acquire.pending (an acquire's
	// start does not tell it). n is configuration, one value per route, so
	// it adds no cardinality of its own.
	PermitsKey = attribute.Key("reqlock.permits")
	// SlotKey is the slot, 0 to n-1, that an acquired lease holds with mode
	// "permits" (core.Lease.Slot): on the acquire span of an acquired lock
	// and on its release span (spans only).
	SlotKey = attribute.Key("reqlock.slot")
	// OutcomeKey is how an acquire or a release ended: one of the Outcome
	// constants.
	OutcomeKey = attribute.Key("reqlock.outcome")
	// AttemptsKey is the number of Redis attempts an acquire made (spans
	// only); 0 for a lock handed off by the previous holder in the process.
	AttemptsKey = attribute.Key("reqlock.attempts")
	// WaitKey is the time an acquire took, in seconds, from the call of
	// Locker.Acquire to its return, local wait included (spans only).
	WaitKey = attribute.Key("reqlock.wait.seconds")
	// LocalWaitKey is the part of the wait spent in the Locker's local queue
	// (core.AcquireEvent.LocalWait, such as the hotspot Guard's local lock),
	// in seconds; set only when positive (spans only).
	LocalWaitKey = attribute.Key("reqlock.local_wait.seconds")
	// HandedOffKey is set, to true, when the lock passed between two holders
	// in this process without a Redis round trip (the hotspot Guard's
	// WithHandoff): on an acquire span, the lock came from the previous
	// holder (core.AcquireEvent.HandedOver); on a release span, it went to
	// the next one (core.OutcomeHandedOff), and the release outcome is
	// "released". Absent otherwise (spans only).
	HandedOffKey = attribute.Key("reqlock.handed_off")
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
	// OutcomeAcquired: the lock was taken (from Redis, or handed off by
	// the previous holder in this process).
	OutcomeAcquired = "acquired"
	// OutcomeTimeout: the wait budget was spent while another holder kept
	// the name (core.OutcomeBusy, core.ErrTimeout).
	OutcomeTimeout = "timeout"
	// OutcomeCanceled: the caller's context ended first (core.OutcomeCanceled
	// or core.OutcomeDeadline; error.type tells which).
	OutcomeCanceled = "canceled"
	// OutcomeError: any other failure, chiefly Redis unavailable
	// (core.OutcomeUnavailable, core.ErrStorage); error.type tells which.
	OutcomeError = "error"
)

// Outcomes of a release (OutcomeKey on reqlock.release spans and
// reqlock.hold.duration).
const (
	// OutcomeReleased: the lease still held its lock, which was deleted in
	// Redis or handed to a local waiter (core.OutcomeReleased,
	// core.OutcomeHandedOff; the release span of a hand-off has
	// reqlock.handed_off=true).
	OutcomeReleased = "released"
	// OutcomeLost: the lease had lost its lock before Release
	// (core.Outcome.Lost): its TTL ran out (error.type "expired"), Redis no
	// longer held its token (error.type "not_held", e.g. after a failed
	// Extend), or its watchdog could not renew it while Redis was
	// unreachable and gave it up (error.type "renewal_failed"; the release
	// then deleted the key if it was still there). Part of the critical
	// section ran without the lock, or with Done closed.
	OutcomeLost = "lost"
	// OutcomeError is also the outcome of a release that the store failed;
	// the store removes the lock in the background when it can (see
	// core.Undoer), or it expires on its TTL.
)

// Values of error.type. They name the kind of the error, never its text,
// which contains the lock name.
const (
	ErrorTypeTimeout          = "timeout"           // core.OutcomeBusy (core.ErrTimeout)
	ErrorTypeCanceled         = "canceled"          // core.OutcomeCanceled (context.Canceled)
	ErrorTypeDeadlineExceeded = "deadline_exceeded" // core.OutcomeDeadline (context.DeadlineExceeded)
	ErrorTypeStorage          = "storage"           // core.OutcomeUnavailable (core.ErrStorage)
	ErrorTypeInvalid          = "invalid"           // core.OutcomeInvalid, core.OutcomeBadRequest
	ErrorTypeNotHeld          = "not_held"          // core.OutcomeNotHeld (core.ErrNotHeld)
	ErrorTypeExpired          = "expired"           // core.OutcomeExpired: released after the lease's TTL ran out
	ErrorTypeRenewalFailed    = "renewal_failed"    // core.OutcomeGaveUp: released after its watchdog gave it up (Redis unreachable)
	ErrorTypeOther            = "_OTHER"            // core.OutcomeError: anything else, a panic in a Handler included (the semantic conventions' fallback)
)

// result is what the handlers record of one core.Outcome.
type result struct {
	outcome string // OutcomeKey
	errType string // ErrorTypeKey; "" for a success
	status  string // the span status description of a failure: the kind of the error, never its text
}

// outcomes maps every core.Outcome to its attribute values: the one
// translation from core's vocabulary to the telemetry's.
var outcomes = map[core.Outcome]result{
	core.OutcomeAcquired:    {OutcomeAcquired, "", ""},
	core.OutcomeBusy:        {OutcomeTimeout, ErrorTypeTimeout, core.ErrTimeout.Error()},
	core.OutcomeCanceled:    {OutcomeCanceled, ErrorTypeCanceled, context.Canceled.Error()},
	core.OutcomeDeadline:    {OutcomeCanceled, ErrorTypeDeadlineExceeded, context.DeadlineExceeded.Error()},
	core.OutcomeUnavailable: {OutcomeError, ErrorTypeStorage, core.ErrStorage.Error()},
	core.OutcomeInvalid:     {OutcomeError, ErrorTypeInvalid, "reqlock: invalid lock name or option"},
	core.OutcomeBadRequest:  {OutcomeError, ErrorTypeInvalid, "reqlock: the request lacks a part of the lock name"},
	core.OutcomeError:       {OutcomeError, ErrorTypeOther, "reqlock: failed"},
	core.OutcomeReleased:    {OutcomeReleased, "", ""},
	core.OutcomeHandedOff:   {OutcomeReleased, "", ""},
	core.OutcomeExpired:     {OutcomeLost, ErrorTypeExpired, "reqlock: the lease expired before its release"},
	core.OutcomeNotHeld:     {OutcomeLost, ErrorTypeNotHeld, core.ErrNotHeld.Error()},
	core.OutcomeGaveUp:      {OutcomeLost, ErrorTypeRenewalFailed, "reqlock: the watchdog gave the lease up before its release"},
}

// describe returns the attribute values of o; an outcome missing from the
// table (one added to core later) is an error of type _OTHER.
func describe(o core.Outcome) result {
	if r, ok := outcomes[o]; ok {
		return r
	}
	return outcomes[core.OutcomeError]
}

// describeAcquire returns the attribute values of an acquire that ended with
// o. An outcome of a lease's end (an ErrNotHeld returned by a Handler, say)
// is an acquire error of its type.
func describeAcquire(o core.Outcome) result {
	r := describe(o)
	switch r.outcome {
	case OutcomeLost:
		r.outcome = OutcomeError
	case OutcomeReleased:
		r = outcomes[core.OutcomeError]
	}
	return r
}
