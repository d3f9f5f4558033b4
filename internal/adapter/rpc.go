package adapter

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// Call is one call of an RPC adapter, as its flow and the functions users
// give to its options see it.
type Call struct {
	Ctx    context.Context
	Method string // the full method, procedure or operation: the Source's Route
	Err    error  // the error the call is refused with; nil unless refused
}

// RPCConfig is the config of an RPC adapter: Config, whose user functions
// take the call's context and method instead of a *Call, and an error
// handler that returns the error a call fails with.
type RPCConfig struct {
	Config[*Call]
	onError func(ctx context.Context, err error) error
}

// SetTTLFunc is WithTTLFunc: the per-call TTL, f's result when positive.
func (c *RPCConfig) SetTTLFunc(f func(ctx context.Context, method string) time.Duration) {
	if f == nil {
		c.Config.SetTTLFunc(nil)
		return
	}
	c.Config.SetTTLFunc(func(x *Call) time.Duration { return f(x.Ctx, x.Method) })
}

// SetFailOpenHook is WithFailOpenHook: SetFailOpen, and f is told of the
// storage error before the call is served unlocked.
func (c *RPCConfig) SetFailOpenHook(f func(ctx context.Context, err error)) {
	if f == nil {
		c.Config.SetFailOpenHook(nil)
		return
	}
	c.Config.SetFailOpenHook(func(x *Call, err error) { f(x.Ctx, err) })
}

// SetErrorHandler is WithErrorHandler: f receives every failure to lock a
// call and returns the error the call fails with; when f returns nil, the
// adapter's default error is returned all the same, so that a failure to lock
// never runs the handler.
func (c *RPCConfig) SetErrorHandler(f func(ctx context.Context, err error) error) {
	if f == nil {
		c.Invalid("WithErrorHandler: nil function")
	}
	c.onError = f
}

// SetSharedIf is WithSharedIf: a call for which f returns true takes the
// names shared (core.Shared), the others exclusively.
func (c *RPCConfig) SetSharedIf(f func(ctx context.Context, method string) bool) {
	if f == nil {
		c.Config.SetSharedIf(nil)
		return
	}
	c.Config.SetSharedIf(func(x *Call) bool { return f(x.Ctx, x.Method) })
}

// SetSharedMethods is WithSharedMethods, the RPC form of WithSharedReads:
// calls of methods (full methods, procedures or operations, as the
// Source's Route gives them: "/orders.v1.Orders/Get") take the names
// shared, calls of other methods exclusively, so that reads run together
// and never beside a write of the same names. At least one method is
// needed; an empty one is invalid.
func (c *RPCConfig) SetSharedMethods(methods ...string) {
	reads := make(map[string]bool, len(methods))
	for _, m := range methods {
		if m == "" {
			c.Invalid("WithSharedMethods: an empty method")
		}
		reads[m] = true
	}
	if len(methods) == 0 {
		c.Invalid("WithSharedMethods: no methods")
	}
	c.setSharedIf("WithSharedMethods", func(x *Call) bool { return reads[x.Method] })
}

// RPC is the flow of an RPC adapter. It is built once, by NewRPC, and is safe
// for concurrent use.
type RPC struct{ flow *Flow[*Call] }

// NewRPC checks an RPC adapter's set-up and builds its flow, as NewFlow
// does. A refused call fails with the error handler's error (SetErrorHandler)
// when it returns one, else with answer's: the adapter's default error for
// the failure.
func NewRPC[O ~func(*RPCConfig)](pkg string, l *core.Locker, key keyfunc.Func, opts []O, answer func(x *Call, f Failure) error) (*RPC, error) {
	cfg := &RPCConfig{}
	Apply(cfg, &cfg.Config, opts)
	if answer == nil {
		cfg.Invalid("the adapter has no answer")
	}
	flow, err := NewFlow(pkg, l, key, &cfg.Config, Protocol[*Call]{Answer: func(x *Call, f Failure) {
		if cfg.onError != nil {
			if x.Err = cfg.onError(x.Ctx, f.Err); x.Err != nil {
				return
			}
		}
		x.Err = answer(x, f)
	}})
	if err != nil {
		return nil, err
	}
	return &RPC{flow: flow}, nil
}

// CallMessage is the message of the default error of a call refused with
// outcome o and error err: err's text for a missing or unreadable name part,
// else a fixed text, so that lock names and internal details stay out of
// responses.
func CallMessage(o core.Outcome, err error) string {
	switch o {
	case core.OutcomeBadRequest:
		return err.Error()
	case core.OutcomeBusy:
		return "reqlock: the resource is busy, retry later"
	case core.OutcomeUnavailable:
		return "reqlock: the lock service is unavailable"
	case core.OutcomeCanceled:
		return "reqlock: the call was cancelled while it waited for a lock"
	case core.OutcomeDeadline:
		return "reqlock: the call's deadline passed while it waited for a lock"
	}
	return "reqlock: internal error"
}

// Unary runs a call whose parts src gives (src.Route() is its method), as
// Flow.Serve does: next runs with the context that carries the lease. It
// returns the error the call was refused with, else next's.
func (r *RPC) Unary(ctx context.Context, src keyfunc.Source, next func(ctx context.Context) error) (err error) {
	x := &Call{Ctx: ctx, Method: src.Route()}
	r.flow.Serve(ctx, x, src, func(ctx context.Context) { err = next(ctx) })
	if x.Err != nil {
		return x.Err
	}
	return err
}

// errNeedMessage is the Field error of a stream's Source before its first
// message.
var errNeedMessage = errors.New("reqlock: the key needs a message field")

// beforeMessage is the Source of a stream before its first message.
type beforeMessage struct{ keyfunc.Source }

func (beforeMessage) Field(string) (string, error) { return "", errNeedMessage }

func (beforeMessage) Fields(string) ([]string, error) { return nil, errNeedMessage }

// Stream runs a stream. src returns its Source given a received message (nil
// before the first). When the key needs no message field, the stream is
// locked before next runs, as Unary does, and next gets a nil *Stream. When
// it does, next runs at once, with a *Stream whose Receive locks the stream
// at its first message, and whose Context is the one next is given; the lock
// is released when next returns. Stream returns the error the stream was
// refused with before next ran, else next's.
func (r *RPC) Stream(ctx context.Context, src func(msg any) keyfunc.Source, next func(ctx context.Context, s *Stream) error) (err error) {
	f, first := r.flow, src(nil)
	x := &Call{Ctx: ctx, Method: first.Route()}
	if f.cfg.skip != nil && f.cfg.skip(x) {
		return next(ctx, nil)
	}
	name, names, kerr := f.names(beforeMessage{first})
	switch {
	case errors.Is(kerr, errNeedMessage):
		s := newStream(f, ctx, x.Method, src)
		defer s.end()
		return next(s.Context(), s)
	case kerr != nil:
		f.refuse(x, Classify(kerr), kerr)
		return x.Err
	}
	lease, ok := f.lockNames(ctx, x, name, names, first)
	f.run(ctx, x, lease, ok, func(ctx context.Context) { err = next(ctx, nil) })
	if x.Err != nil {
		return x.Err
	}
	return err
}

// Stream is a stream whose lock is taken at its first message (RPC.Stream).
// Its methods are called by the one goroutine that receives.
type Stream struct {
	flow   *Flow[*Call]
	method string
	src    func(msg any) keyfunc.Source
	ctx    *lazyCtx
	cancel context.CancelCauseFunc

	started bool  // the first message was received
	err     error // the failure to lock, returned by every Receive
	call    *Call
	lease   *core.Lease
	stop    func()
}

func newStream(f *Flow[*Call], ctx context.Context, method string, src func(msg any) keyfunc.Source) *Stream {
	base, cancel := context.WithCancelCause(ctx)
	return &Stream{flow: f, method: method, src: src, ctx: &lazyCtx{Context: base}, cancel: cancel}
}

// Context returns the stream's context: it carries the lease once the lock
// is taken, and is cancelled with cause ErrLost when the lease is lost.
func (s *Stream) Context() context.Context { return s.ctx }

// Receive calls recv, which receives the stream's next message into m, and
// after the first message locks the stream by the name derived from src(m).
// It returns recv's error, or the error the stream was refused with: then,
// and from every later Receive.
func (s *Stream) Receive(m any, recv func() error) error {
	if s.err != nil {
		return s.err
	}
	if err := recv(); err != nil || s.started {
		return err
	}
	s.started = true
	c := &Call{Ctx: s.ctx, Method: s.method}
	lease, ok := s.flow.Lock(s.ctx, c, s.src(m))
	if !ok {
		s.err = c.Err
		return s.err
	}
	if lease != nil {
		s.call, s.lease = c, lease
		s.ctx.withLease.Store(&contextBox{ctx: core.ContextWithLease(s.ctx.Context, lease), lease: lease, cancel: s.cancel})
		s.stop = Watch(s.ctx.Context, lease, s.cancel)
	}
	return nil
}

// end releases the lock, if one was taken, when the handler returns.
func (s *Stream) end() {
	if s.lease != nil {
		s.flow.Release(s.ctx, s.call, s.lease, s.stop)
	}
	s.cancel(context.Canceled)
}

// lazyCtx is a context that starts carrying a lease once the lock is taken,
// so that a stream's context can be handed out before its first message.
// Once it does, its Err, Done and Value look at the lease first, as the
// request context of Hold does: after a pause of the process past the
// lease's validity, the first look reports the loss.
type lazyCtx struct {
	context.Context
	withLease atomic.Pointer[contextBox]
}

type contextBox struct {
	ctx    context.Context // carries the lease
	lease  *core.Lease
	cancel context.CancelCauseFunc // cancels the lazyCtx's Context
}

// check cancels the context with cause ErrLost if its lease is lost, and
// returns the box of the lease, nil before the lock is taken.
func (c *lazyCtx) check() *contextBox {
	b := c.withLease.Load()
	if b != nil && c.Context.Err() == nil {
		CancelIfLost(b.lease, b.cancel)
	}
	return b
}

// Done checks the lease, then returns the context's Done.
func (c *lazyCtx) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

// Err checks the lease, then returns the context's Err.
func (c *lazyCtx) Err() error {
	c.check()
	return c.Context.Err()
}

// Value looks values up in the context that carries the lease, once there
// is one.
func (c *lazyCtx) Value(key any) any {
	if b := c.check(); b != nil {
		return b.ctx.Value(key)
	}
	return c.Context.Value(key)
}
