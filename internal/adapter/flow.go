// Package adapter is the one locking flow of reqlock's framework adapters
// (ginlock, httplock, grpclock, echolock, echo5lock, fiberlock, fiber3lock,
// connectlock, kratoslock): name → TTL and wait → acquire → fail-open →
// hold → release → answer. An adapter builds a Flow once, from its options,
// and per request only builds a keyfunc.Source and maps a Failure to its
// protocol (an HTTP status, a gRPC code).
//
// A new adapter has four parts:
//
//   - type config struct{ adapter.Config[R] } (plus its own options, if
//     any) and type Option func(*config), with one line per shared option
//     (func WithTTL(d time.Duration) Option { return func(c *config) { c.SetTTL(d) } });
//   - a constructor that calls adapter.Apply and NewFlow (through Must, so
//     that a bad set-up panics at start-up), and a Check that returns
//     NewFlow's error instead;
//   - per request: a Source, then Flow.Serve with a function that runs the
//     rest of the chain with the context it is given;
//   - a Protocol: Answer writes a Failure the way the framework answers.
//
// Every adapter re-exports the lock-mode options as one-liners too:
// WithShared (SetShared), WithPermits (SetPermits), WithSharedIf
// (SetSharedIf), WithMaxNames (SetMaxNames), and WithSharedReads
// (SetSharedReads: GET and HEAD shared) for HTTP or WithSharedMethods
// (RPCConfig.SetSharedMethods: the read methods shared) for RPC. A key
// that yields several names (keyfunc.All, a "[*]" field) is taken with
// core.Locker.AcquireAll; the handler finds its lease, and so its
// Lease.Slot under WithPermits, with core.LeaseFromContext. They re-export
// WithRequestIDHeader (SetRequestIDHeader) too: the flow gives core the
// request id of each request (core.RequestID) for the holder record of its
// locks, read from that header or the W3C traceparent (RequestID).
//
// The RPC adapters (grpclock, connectlock, kratoslock) share more: RPC is
// their flow, over calls (Call) that are refused with an error, and with
// streams locked at their first message (RPC.Stream); their Option is a
// func(*RPCConfig), and they only map an outcome to their error type.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// StatusClientClosedRequest is the HTTP status of a request whose client went
// away while it waited for its lock (nginx's 499), written without a body.
const StatusClientClosedRequest = 499

// Protocol is what an adapter tells its Flow about its framework.
type Protocol[R any] struct {
	// Answer answers a request that could not be locked, unless a custom
	// handler (WithBusyHandler, WithErrorHandler) did; a gone client always
	// comes here. It must not serve the request.
	Answer func(x R, f Failure)
	// Refuse, if set, is called first when a request is refused, before
	// any answer (gin aborts its chain and records the error here).
	Refuse func(x R, err error)
	// Note, if set, is told of the errors that refuse nothing: the storage
	// error of a request served unlocked (fail-open), a failed release.
	Note func(x R, err error)
	// Explain, if set, is given the Source the adapter built and the error
	// of the derivation of its names (keyfunc.Func.Names), nil if it
	// succeeded, and returns the error the request is refused with, nil to
	// lock the names: an adapter whose Source notes why a part was missing
	// (the middleware runs before routing) tells the server's mistake from
	// the client's here. (The key runs on a Source that wraps src, so a
	// key wrapper cannot find the adapter's Source.)
	Explain func(src keyfunc.Source, err error) error
}

// Failure is a request that could not be locked, with its default HTTP
// answer. Adapters of other protocols map Outcome themselves.
type Failure struct {
	Outcome core.Outcome
	Err     error
	// Status is the HTTP status: 400, 409, 503, 500, or
	// StatusClientClosedRequest for a gone client.
	Status int
	// Message is the message of the JSON error ({"error": Message}); ""
	// for a gone client, which gets no body.
	Message string
	// RetryAfter is the Retry-After header of a busy answer, in whole
	// seconds; "" for other answers.
	RetryAfter string
}

// Flow locks the requests of one middleware or interceptor. It is built once,
// by NewFlow, and is safe for concurrent use.
type Flow[R any] struct {
	pkg    string
	cfg    Config[R]
	locker *core.Locker
	key    keyfunc.Func
	proto  Protocol[R]
	route  []core.CallOption // RouteTTL and RouteWait: the route's defaults
	mode   core.CallOption   // Shared or Permits(n) for every request; nil: per request
	shared core.CallOption   // core.Shared(), for the requests of sharedIf
	reqID  string            // the request id header (WithRequestIDHeader), "" for none
	// routes are the core.Route options of the route labels seen so far
	// (at most maxRouteOptions), so that a request does not build one:
	// copied on write, read without a lock.
	routes atomic.Pointer[map[string]core.CallOption]
}

// maxRouteOptions bounds the route labels whose core.Route option a Flow
// keeps: labels are low-cardinality (route templates, gRPC methods), and
// one made of a client's input past that bound costs its request one
// allocation, not the Flow's memory.
const maxRouteOptions = 256

// routeOption returns core.Route(label), made once per label.
func (f *Flow[R]) routeOption(label string) core.CallOption {
	for {
		old := f.routes.Load()
		if o, ok := (*old)[label]; ok {
			return o
		}
		if len(*old) >= maxRouteOptions {
			return core.Route(label)
		}
		next := maps.Clone(*old)
		next[label] = core.Route(label)
		if f.routes.CompareAndSwap(old, &next) {
			return next[label]
		}
	}
}

// NewFlow checks an adapter's set-up and builds its flow. The error lists
// every problem — an invalid option, a nil Locker or key Func, a Locker
// whose Err is not nil — prefixed with pkg, and wraps core.ErrInvalidOption
// (and the Locker's error).
func NewFlow[R any](pkg string, l *core.Locker, key keyfunc.Func, cfg *Config[R], p Protocol[R]) (*Flow[R], error) {
	problems := cfg.problems
	var lockerErr error
	switch {
	case l == nil:
		problems = append(problems, "the Locker is nil")
	case l.Err() != nil:
		lockerErr = l.Err()
		problems = append(problems, "the Locker is unusable: "+lockerErr.Error())
	case cfg.mode != core.ModeExclusive:
		if err := l.CheckMode(cfg.mode); err != nil {
			problems = append(problems, "the route's mode: "+err.Error())
		}
	case cfg.sharedIf != nil:
		if err := l.CheckMode(core.ModeShared); err != nil {
			problems = append(problems, "the route's shared requests: "+err.Error())
		}
	}
	if key == nil {
		problems = append(problems, "the key Func is nil")
	}
	if p.Answer == nil {
		problems = append(problems, "the adapter has no Answer")
	}
	if len(problems) > 0 {
		return nil, &setupError{msg: pkg + ": " + core.ErrInvalidOption.Error() + ": " + strings.Join(problems, "; "),
			errs: []error{core.ErrInvalidOption, lockerErr}}
	}
	f := &Flow[R]{pkg: pkg, cfg: *cfg, locker: l, key: key, proto: p, shared: core.Shared(), reqID: cfg.requestIDHeader()}
	f.routes.Store(&map[string]core.CallOption{})
	switch cfg.mode {
	case core.ModeShared:
		f.mode = core.Shared()
	case core.ModePermits:
		f.mode = core.Permits(cfg.permits)
	}
	if cfg.ttl > 0 {
		f.route = append(f.route, core.RouteTTL(cfg.ttl))
	}
	if cfg.waitSet {
		f.route = append(f.route, core.RouteWait(cfg.wait))
	}
	return f, nil
}

// setupError is NewFlow's error.
type setupError struct {
	msg  string
	errs []error
}

func (e *setupError) Error() string   { return e.msg }
func (e *setupError) Unwrap() []error { return e.errs }

// Must returns v (a *Flow, an *RPC), or panics with err: the adapters'
// constructors fail at start-up, as regexp.MustCompile does, not on every
// request.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// MaxBody is the body limit of WithMaxBody, for the HTTP adapters' Source (0:
// keyfunc.DefaultMaxBody).
func (f *Flow[R]) MaxBody() int64 { return f.cfg.maxBody }

// Serve runs one request x, whose context is ctx and whose parts src gives:
// unless WithSkip skips it, it locks the name the key derives from src (see
// Lock), and calls next with a context that carries the lease and is
// cancelled with cause ErrLost when the lease is lost; it releases the lease
// when next returns, also when next panics. next is called unlocked, with
// ctx, when the request is skipped or fails open, and not at all when the
// request is refused (then answered).
func (f *Flow[R]) Serve(ctx context.Context, x R, src keyfunc.Source, next func(ctx context.Context)) {
	if f.cfg.skip != nil && f.cfg.skip(x) {
		next(ctx)
		return
	}
	lease, ok := f.Lock(ctx, x, src)
	f.run(ctx, x, lease, ok, next)
}

// run calls next as Serve does, given Lock's results.
func (f *Flow[R]) run(ctx context.Context, x R, lease *core.Lease, ok bool, next func(ctx context.Context)) {
	switch {
	case !ok:
		return
	case lease == nil: // fail-open
		next(ctx)
		return
	}
	held := hold(ctx, lease)
	defer f.Release(held, x, lease, held.stop)
	next(held)
}

// Lock derives the names of x from src (keyfunc.Func.Names, bounded by
// WithMaxNames) and takes their lock: one name with core.Locker.Acquire,
// several with core.Locker.AcquireAll (all or none, in one canonical
// order, so that requests that list the same names in different orders
// cannot deadlock), in the route's mode (WithShared, WithPermits,
// WithSharedReads / WithSharedIf per request; exclusive by default). The
// TTL and wait follow the precedence rule of core.Locker.Acquire:
// WithTTLFunc's TTL (core.TTL) > core.ContextWithTTL on ctx > WithTTL
// (core.RouteTTL) > the Locker's; core.ContextWithWait on ctx > WithWait
// (core.RouteWait) > the Locker's. src.Route() labels the acquire
// (core.Route). The holder record of its locks (core.Holder) gets the
// request id that an earlier middleware put on ctx
// (core.ContextWithRequestID), else the request id of src (RequestID: the
// header of WithRequestIDHeader, else the trace-id of the traceparent
// header; given as core.RequestID), else the one the Locker's
// core.WithRequestID source finds.
//
// It returns the lease and true when locked; nil and true when the store is
// unavailable and the flow fails open (the request runs unlocked); nil and
// false when the request was refused, after answering it: custom handlers
// first (never for a gone client), else the Protocol's Answer.
func (f *Flow[R]) Lock(ctx context.Context, x R, src keyfunc.Source) (*core.Lease, bool) {
	name, names, err := f.names(src)
	if err != nil {
		f.refuse(x, Classify(err), err)
		return nil, false
	}
	return f.lockNames(ctx, x, name, names, src)
}

// names derives the names of a request from src (keyfunc.Func.Derive: the
// one name of most keys, names nil, without a slice to hold it; or the
// several names of a key that yields several), with the error the request
// is refused with.
func (f *Flow[R]) names(src keyfunc.Source) (string, []string, error) {
	name, names, err := f.key.Derive(src, f.cfg.maxNames)
	if f.proto.Explain != nil {
		err = f.proto.Explain(src, err)
	}
	if err != nil {
		return "", nil, err
	}
	return name, names, nil
}

// lockNames is Lock once the names are known: name alone when names is
// nil, else names.
func (f *Flow[R]) lockNames(ctx context.Context, x R, name string, names []string, src keyfunc.Source) (*core.Lease, bool) {
	lease, err := f.acquire(ctx, x, name, names, src)
	switch o := core.Classify(err); {
	case err == nil:
		return lease, true
	case o == core.OutcomeUnavailable && f.cfg.failOpen:
		if f.proto.Note != nil {
			f.proto.Note(x, err)
		}
		if f.cfg.onFailOpen != nil {
			f.cfg.onFailOpen(x, err)
		}
		return nil, true
	default:
		f.refuse(x, o, err)
		return nil, false
	}
}

// acquire takes name, or names when not nil, with the call options of the route and
// of x, labelled with src's route and request id. A context cancelled once its deadline has passed is reported as
// context.DeadlineExceeded: servers cancel a call at its deadline (gRPC
// closes the stream), and the deadline is then the cause that matters.
func (f *Flow[R]) acquire(ctx context.Context, x R, name string, names []string, src keyfunc.Source) (*core.Lease, error) {
	// At most six options (the route's two, Route, RequestID, TTL, a
	// mode), on the stack: Acquire and AcquireAll keep no slice of them.
	var buf [6]core.CallOption
	opts := append(append(buf[:0], f.route...), f.routeOption(src.Route()))
	if core.RequestIDFromContext(ctx) == "" { // else an earlier middleware's id wins, as core.ContextWithRequestID's
		if id := RequestID(src, f.reqID); id != "" {
			opts = append(opts, core.RequestID(id))
		}
	}
	if f.cfg.ttlFunc != nil {
		if ttl := f.cfg.ttlFunc(x); ttl > 0 {
			opts = append(opts, core.TTL(ttl))
		}
	}
	switch {
	case f.mode != nil:
		opts = append(opts, f.mode)
	case f.cfg.sharedIf != nil && f.cfg.sharedIf(x):
		opts = append(opts, f.shared)
	}
	var lease *core.Lease
	var err error
	switch {
	case names == nil:
		lease, err = f.locker.Acquire(ctx, name, opts...)
	case len(names) == 1:
		lease, err = f.locker.Acquire(ctx, names[0], opts...)
	default:
		lease, err = f.locker.AcquireAll(ctx, names, opts...)
	}
	if errors.Is(err, context.Canceled) {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			err = fmt.Errorf("%s: the call was cancelled at its deadline: %w", f.pkg, context.DeadlineExceeded)
		}
	}
	return lease, err
}

// refuse answers a request that could not be locked.
func (f *Flow[R]) refuse(x R, o core.Outcome, err error) {
	if f.proto.Refuse != nil {
		f.proto.Refuse(x, err)
	}
	switch {
	case o == core.OutcomeCanceled: // nobody reads the answer: the default
	case o == core.OutcomeBusy && f.cfg.onBusy != nil:
		f.cfg.onBusy(x, err)
		return
	case f.cfg.onError != nil:
		f.cfg.onError(x, err)
		return
	}
	f.proto.Answer(x, f.failure(o, err))
}

// failure returns the default answer to a failure of outcome o.
func (f *Flow[R]) failure(o core.Outcome, err error) Failure {
	a := Failure{Outcome: o, Err: err, Status: http.StatusInternalServerError, Message: "reqlock: internal error"}
	switch o {
	case core.OutcomeBadRequest:
		a.Status, a.Message = http.StatusBadRequest, err.Error()
	case core.OutcomeBusy:
		a.Status, a.Message = http.StatusConflict, "reqlock: the resource is busy, retry later"
		a.RetryAfter = strconv.Itoa(retryAfterSeconds(f.cfg.retryAfter))
	case core.OutcomeUnavailable:
		a.Status, a.Message = http.StatusServiceUnavailable, "reqlock: the lock service is unavailable"
	case core.OutcomeDeadline:
		a.Status, a.Message = http.StatusServiceUnavailable, "reqlock: the request's deadline passed while it waited for a lock"
	case core.OutcomeCanceled:
		a.Status, a.Message = StatusClientClosedRequest, ""
	}
	return a
}

// retryAfterSeconds returns d in whole seconds, rounded up, at least 1;
// DefaultRetryAfter when d is 0.
func retryAfterSeconds(d time.Duration) int {
	if d == 0 {
		d = DefaultRetryAfter
	}
	return max(int((d+time.Second-1)/time.Second), 1)
}

// Release ends the hold of lease (stop, from Hold or Watch) and releases
// it; a failed release goes to the Protocol's Note, and the lock expires
// with its TTL.
func (f *Flow[R]) Release(ctx context.Context, x R, lease *core.Lease, stop func()) {
	stop()
	if err := lease.Release(ctx); err != nil && f.proto.Note != nil {
		f.proto.Note(x, err)
	}
}

// Classify returns the outcome of an error of a key Func or of Acquire:
// core.OutcomeBadRequest for a missing or unreadable key part or too many
// names, else core.Classify's.
func Classify(err error) core.Outcome {
	if errors.Is(err, keyfunc.ErrMissing) || errors.Is(err, keyfunc.ErrUnreadable) || errors.Is(err, keyfunc.ErrTooMany) {
		return core.OutcomeBadRequest
	}
	return core.Classify(err)
}

// ErrLost is the cause (context.Cause) of a request context cancelled
// because its lease was lost; it wraps core.ErrNotHeld.
var ErrLost = fmt.Errorf("%w: the request's lease was lost (its TTL ran out or the lock was taken away)", core.ErrNotHeld)

// Hold returns ctx carrying lease (core.ContextWithLease), cancelled with
// cause ErrLost when lease.Done closes, and the function that ends the watch;
// call it when the handler returns, before releasing the lease (Release
// does).
//
// The context's Err, Done and Value look at the lease first (see
// CancelIfLost): after a pause of the process (a GC pause, a stopped VM)
// past the lease's validity, the handler's first look at its context
// reports the loss, before the watch's goroutine has run. Contexts derived
// from it learn of the loss from the watch.
func Hold(ctx context.Context, lease *core.Lease) (context.Context, func()) {
	held := hold(ctx, lease)
	return held, held.stop
}

// hold is Hold, with the watch in the context itself: the Flow calls its
// stop method, which costs no closure and no channel of its own. The watch
// is the lease's AfterDone: no goroutine waits while the request runs.
func hold(ctx context.Context, lease *core.Lease) *heldContext {
	ctx, cancel := context.WithCancelCause(core.ContextWithLease(ctx, lease))
	held := &heldContext{Context: ctx, lease: lease, cancel: cancel}
	held.watching.Add(1)
	held.unwatch = lease.AfterDone(held.lost)
	return held
}

// heldContext is the request's context of Hold.
type heldContext struct {
	context.Context // the cancel-cause context that the watch cancels
	lease           *core.Lease
	cancel          context.CancelCauseFunc
	unwatch         func() bool    // the lease's AfterDone stop
	watching        sync.WaitGroup // until the watch is stopped or has run
}

// lost runs when the lease's Done closes, unless stop came first: it
// cancels the context with cause ErrLost, as Watch does.
func (c *heldContext) lost() {
	defer c.watching.Done()
	if c.Context.Err() == nil {
		c.cancel(ErrLost)
	}
}

// stop cancels the context and returns once the watch has ended, as the
// function of Watch does.
func (c *heldContext) stop() {
	if c.unwatch() {
		c.watching.Done() // lost will not run
	}
	c.cancel(context.Canceled)
	c.watching.Wait()
}

func (c *heldContext) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

func (c *heldContext) Err() error {
	c.check()
	return c.Context.Err()
}

// Value also serves context.Cause, which finds the cause through it.
func (c *heldContext) Value(key any) any {
	c.check()
	return c.Context.Value(key)
}

func (c *heldContext) String() string {
	return fmt.Sprint(c.Context) + ".WithLease"
}

func (c *heldContext) check() {
	select {
	case <-c.Context.Done():
	default:
		CancelIfLost(c.lease, c.cancel)
	}
}

// CancelIfLost calls cancel with cause ErrLost if lease is lost, and reports
// whether it is. lease.Lost reads the clock, so this sees the loss even
// when the lease's timer (and Watch's goroutine) have not run yet, as after
// a pause of the process. The request context of Hold does it in its Err,
// Done and Value; an adapter that builds a request context of its own (a
// lazily locked stream) does the same.
func CancelIfLost(lease *core.Lease, cancel context.CancelCauseFunc) bool {
	if lease.Lost() {
		cancel(ErrLost)
		return true
	}
	return false
}

// Watch cancels ctx with cause ErrLost when lease.Done closes, until the
// returned function is called; that function cancels ctx and returns once the
// watch has ended. It waits with the lease's AfterDone: no goroutine waits
// while the call runs.
func Watch(ctx context.Context, lease *core.Lease, cancel context.CancelCauseFunc) (stop func()) {
	var ran sync.WaitGroup
	ran.Add(1)
	unwatch := lease.AfterDone(func() {
		defer ran.Done()
		if ctx.Err() == nil {
			cancel(ErrLost)
		}
	})
	return func() {
		if unwatch() {
			ran.Done()
		}
		cancel(context.Canceled)
		ran.Wait()
	}
}
