package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// CallOption sets a parameter of one Acquire: TTL, Wait and Route from the
// call site; RouteTTL and RouteWait for per-route defaults (the adapters'
// WithTTL and WithWait).
type CallOption func(*callConfig)

// callConfig is what the CallOptions of one Acquire set.
type callConfig struct {
	ttl, routeTTL   time.Duration // 0: not set
	wait, routeWait time.Duration
	waitSet         bool
	routeWaitSet    bool
	route           string
	routeSet        bool
	mode            Mode // Shared, Permits; ModeExclusive by default
	permits         int  // n of Permits(n)
	requestID       string
	err             error
}

// setErr keeps the first error an option reports.
func (c *callConfig) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

// TTL makes the lock live for ttl, whatever the context says. ttl is rounded
// up to whole milliseconds and must be between 1 ms and MaxTTL.
func TTL(ttl time.Duration) CallOption {
	return func(c *callConfig) { c.ttl = ttl; c.check(ttl, "TTL") }
}

// RouteTTL is the TTL of a route (an adapter's WithTTL): it applies unless the
// call sets TTL or the context carries one (ContextWithTTL).
func RouteTTL(ttl time.Duration) CallOption {
	return func(c *callConfig) { c.routeTTL = ttl; c.check(ttl, "RouteTTL") }
}

// Wait sets the wait budget of the call, whatever the context says. It may
// be 0: a single attempt. Like WithWait it bounds only the waiting for
// another holder, and the context's deadline still cuts it.
func Wait(wait time.Duration) CallOption {
	return func(c *callConfig) {
		c.wait, c.waitSet = wait, true
		c.checkWait(wait, "Wait")
	}
}

// RouteWait is the wait budget of a route (an adapter's WithWait): it applies
// unless the call sets Wait or the context carries one (ContextWithWait).
func RouteWait(wait time.Duration) CallOption {
	return func(c *callConfig) {
		c.routeWait, c.routeWaitSet = wait, true
		c.checkWait(wait, "RouteWait")
	}
}

// Route labels the call with a low-cardinality description of where it
// comes from: a route template ("/orders/:id") or a gRPC method, never a raw
// lock name. Observers (telemetry) use it as an attribute; it defaults to the
// label set with ContextWithRoute.
func Route(label string) CallOption {
	return func(c *callConfig) { c.route, c.routeSet = label, true }
}

func (c *callConfig) check(ttl time.Duration, source string) {
	if _, err := checkTTL(ttl, source); err != nil && c.err == nil {
		c.err = err
	}
}

func (c *callConfig) checkWait(wait time.Duration, source string) {
	if wait < 0 && c.err == nil {
		c.err = fmt.Errorf("%w: %s(%v): the wait budget must not be negative", ErrInvalidOption, source, wait)
	}
}

// CheckCallOptions reports what Acquire would reject in opts: a nil option,
// a TTL out of range, a negative wait. Adapters call it when they are built,
// so that a bad per-route setting fails at start-up instead of on every
// request.
func CheckCallOptions(opts ...CallOption) error {
	_, err := readCallOptions(opts)
	return err
}

// callConfigs are the callConfigs that readCallOptions applies options to:
// an option is a function given a *callConfig, so a callConfig of its own
// would escape to the heap on every Acquire with options (every request of
// an adapter). No option keeps the pointer: they are core's.
var callConfigs = sync.Pool{New: func() any { return new(callConfig) }}

// readCallOptions applies opts to a callConfig and returns it with the first
// error they report.
func readCallOptions(opts []CallOption) (callConfig, error) {
	p := callConfigs.Get().(*callConfig)
	*p = callConfig{}
	for i, opt := range opts {
		if opt == nil {
			callConfigs.Put(p)
			return callConfig{}, fmt.Errorf("%w: call option %d is nil", ErrInvalidOption, i)
		}
		opt(p)
	}
	c := *p
	*p = callConfig{} // holds no strings of the call's while pooled
	callConfigs.Put(p)
	return c, c.err
}

// resolve works out the TTL, the wait budget and the route label of one
// Acquire. This is the one place of the precedence rule, strongest first:
//
//	TTL:   TTL(d)  > ContextWithTTL  > RouteTTL(d)  > WithTTL (the Locker's)
//	wait:  Wait(d) > ContextWithWait > RouteWait(d) > WithWait (the Locker's)
//	route: Route(s) > ContextWithRoute > ""
//
// What the call site says wins; then what code earlier in the request put on
// the context (a middleware, a handler deep in the stack); then the route's
// default; then the Locker's.
func (l *Locker) resolve(ctx context.Context, opts []CallOption) (p callParams, err error) {
	var c callConfig
	if len(opts) > 0 { // without any, no pooled callConfig is taken
		if c, err = readCallOptions(opts); err != nil {
			return callParams{}, err
		}
	}
	p.mode, p.permits, p.requestID = c.mode, c.permits, c.requestID
	p.ttl = l.cfg.ttl
	if v, ok := TTLFromContext(ctx); c.ttl > 0 {
		p.ttl = c.ttl
	} else if ok {
		p.ttl = v
	} else if c.routeTTL > 0 {
		p.ttl = c.routeTTL
	}
	if p.ttl, err = checkTTL(p.ttl, "ContextWithTTL"); err != nil {
		return callParams{}, err
	}
	p.wait = l.cfg.wait
	if v, ok := WaitFromContext(ctx); c.waitSet {
		p.wait = c.wait
	} else if ok {
		if v < 0 {
			return callParams{}, fmt.Errorf("%w: ContextWithWait(%v): the wait budget must not be negative", ErrInvalidOption, v)
		}
		p.wait = v
	} else if c.routeWaitSet {
		p.wait = c.routeWait
	}
	p.route = c.route
	if !c.routeSet {
		p.route = RouteFromContext(ctx)
	}
	return p, nil
}

// callParams are the parameters of one Acquire, as resolve works them out.
type callParams struct {
	ttl, wait time.Duration
	route     string
	mode      Mode
	permits   int
	requestID string // the call's RequestID, "" if none
}

type ttlKey struct{}

// ContextWithTTL returns a copy of ctx that makes Acquire use ttl for locks
// taken with that context, for code deep in a request's stack that knows how
// long its work takes (the per-request TTL); it is carried by the context,
// so it cannot leak into other requests. A TTL call option at the Acquire
// still wins (see Locker.Acquire for the whole rule).
//
// ttl is rounded up to whole milliseconds. A ttl below one millisecond or
// above MaxTTL makes Acquire fail with ErrInvalidOption.
func ContextWithTTL(ctx context.Context, ttl time.Duration) context.Context {
	return context.WithValue(ctx, ttlKey{}, ttl)
}

// TTLFromContext returns the TTL set on ctx by ContextWithTTL, if any.
func TTLFromContext(ctx context.Context) (time.Duration, bool) {
	ttl, ok := ctx.Value(ttlKey{}).(time.Duration)
	return ttl, ok
}

type waitKey struct{}

// ContextWithWait returns a copy of ctx that makes Acquire use wait as its
// wait budget for locks taken with that context; it may be longer or shorter
// than the Locker's. The budget is still cut by the context's deadline.
// Unlike a context timeout, it bounds only the waiting for another holder: a
// store call in flight is bounded by the I/O timeout, so a stalled store is
// reported as ErrStorage, not as a busy lock. A Wait call option still wins.
// A negative wait makes Acquire fail with ErrInvalidOption.
func ContextWithWait(ctx context.Context, wait time.Duration) context.Context {
	return context.WithValue(ctx, waitKey{}, wait)
}

// WaitFromContext returns the wait budget set on ctx by ContextWithWait, if
// any.
func WaitFromContext(ctx context.Context) (time.Duration, bool) {
	wait, ok := ctx.Value(waitKey{}).(time.Duration)
	return wait, ok
}
