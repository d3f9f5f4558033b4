// Package adapter holds what the gin, gRPC and net/http adapters share: the
// acquire with per-request and per-route TTL and wait, the classification of errors into
// outcomes that each adapter maps to its protocol, and the request context
// that carries the lease and is cancelled when the lease is lost.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// Config is the part of an adapter's options that every adapter has.
type Config struct {
	TTL        time.Duration // per-route TTL; 0: the context's or the Locker's
	Wait       time.Duration // per-route wait budget, when WaitSet
	WaitSet    bool          // Wait was set (0 is a valid wait: one attempt)
	RetryAfter time.Duration // Retry-After of a busy answer (HTTP)
	FailOpen   bool          // run the handler unlocked when Redis is down
	Errs       []error       // invalid options
}

// DefaultRetryAfter is the default Retry-After of a busy answer.
const DefaultRetryAfter = time.Second

// Invalid records an invalid option.
func (c *Config) Invalid(format string, args ...any) {
	c.Errs = append(c.Errs, fmt.Errorf("%w: "+format, append([]any{core.ErrInvalidOption}, args...)...))
}

// Check validates c and the adapter's arguments, naming the adapter in the
// error (pkg is "ginlock", "grpclock"...).
func (c *Config) Check(pkg string, l *core.Locker, key keyfunc.Func) error {
	if l == nil {
		c.Invalid("%s: the Locker is nil", pkg)
	}
	if key == nil {
		c.Invalid("%s: the key Func is nil", pkg)
	}
	if c.TTL < 0 {
		c.Invalid("%s: WithTTL(%v): negative", pkg, c.TTL)
	}
	if c.Wait < 0 {
		c.Invalid("%s: WithWait(%v): negative", pkg, c.Wait)
	}
	if c.RetryAfter < 0 {
		c.Invalid("%s: WithRetryAfter(%v): negative", pkg, c.RetryAfter)
	}
	return errors.Join(c.Errs...)
}

// RetryAfterSeconds returns the Retry-After header value: whole seconds,
// rounded up, at least 1.
func (c *Config) RetryAfterSeconds() int {
	s := int((c.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Acquire takes name for a request whose context is ctx, labelled with
// route (core.ContextWithRoute). Per-request settings win over per-route ones,
// which win over the Locker's:
//   - TTL: ttl when positive (the adapter's TTL function), else a TTL set on
//     ctx by core.ContextWithTTL, else c.TTL when positive, else the
//     Locker's;
//   - wait budget: a wait set on ctx by core.ContextWithWait, else c.Wait
//     when WaitSet, else the Locker's.
//
// The wait is passed as core.ContextWithWait, not as a context timeout: it
// bounds the waiting for another holder only, so a Redis that stalls is
// reported as core.ErrStorage (at the I/O timeout), never as busy.
//
// A context cancelled once its deadline has passed is reported as
// context.DeadlineExceeded: servers cancel a call at its deadline (gRPC
// closes the stream), and the deadline is then the cause that matters.
func (c *Config) Acquire(ctx context.Context, l *core.Locker, name, route string, ttl time.Duration) (*core.Lease, error) {
	ctx = core.ContextWithRoute(ctx, route)
	if ttl > 0 {
		ctx = core.ContextWithTTL(ctx, ttl)
	} else if _, set := core.TTLFromContext(ctx); !set && c.TTL > 0 {
		ctx = core.ContextWithTTL(ctx, c.TTL)
	}
	if _, set := core.WaitFromContext(ctx); !set && c.WaitSet {
		ctx = core.ContextWithWait(ctx, c.Wait)
	}
	lease, err := l.Acquire(ctx, name)
	if errors.Is(err, context.Canceled) {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			err = fmt.Errorf("%w (the call was cancelled at its deadline)", context.DeadlineExceeded)
		}
	}
	return lease, err
}

// Outcome is the kind of a failure to lock a request, which each adapter maps
// to its protocol's status.
type Outcome int

// Outcomes of Classify.
const (
	Internal     Outcome = iota // a set-up mistake: invalid option, bad Func
	BadRequest                  // a key part is missing or unreadable
	Busy                        // the wait budget was spent while the name was held
	Unavailable                 // Redis could not be reached or failed
	Canceled                    // the caller went away
	DeadlineOver                // the caller's deadline passed
)

// Classify returns the outcome of an error from a key Func or Acquire.
func Classify(err error) Outcome {
	switch {
	case errors.Is(err, keyfunc.ErrMissing), errors.Is(err, keyfunc.ErrUnreadable):
		return BadRequest
	case errors.Is(err, core.ErrTimeout):
		return Busy
	case errors.Is(err, core.ErrStorage):
		return Unavailable
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineOver
	}
	return Internal
}

// ErrLost is the cause (context.Cause) of a request context cancelled
// because its lease was lost; it wraps core.ErrNotHeld.
var ErrLost = fmt.Errorf("%w: the request's lease was lost (its TTL ran out or the lock was taken away)", core.ErrNotHeld)

// Hold returns ctx carrying lease (core.ContextWithLease), cancelled with
// cause ErrLost when lease.Done closes, and the function that ends the watch;
// call it when the handler returns, before releasing the lease.
func Hold(ctx context.Context, lease *core.Lease) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(core.ContextWithLease(ctx, lease))
	return ctx, Watch(ctx, lease, cancel)
}

// Watch cancels ctx with cause ErrLost when lease.Done closes, until the
// returned function is called; that function cancels ctx and returns once the
// watch has ended.
func Watch(ctx context.Context, lease *core.Lease, cancel context.CancelCauseFunc) (stop func()) {
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-lease.Done():
			cancel(ErrLost)
		case <-ctx.Done():
		}
	}()
	return func() {
		cancel(context.Canceled)
		<-exited
	}
}

// HTTPStatus returns the default HTTP answer of a failure: its status and
// the message of its JSON error. A missing or unreadable key part is
// described by err itself (it names the part); other failures get a fixed
// message, so that internal details and lock names stay out of responses.
func HTTPStatus(kind Outcome, err error) (int, string) {
	switch kind {
	case BadRequest:
		return http.StatusBadRequest, err.Error()
	case Busy:
		return http.StatusConflict, "reqlock: the resource is busy, retry later"
	case Unavailable:
		return http.StatusServiceUnavailable, "reqlock: the lock service is unavailable"
	case DeadlineOver:
		return http.StatusServiceUnavailable, "reqlock: the request's deadline passed while it waited for a lock"
	}
	return http.StatusInternalServerError, "reqlock: internal error"
}
