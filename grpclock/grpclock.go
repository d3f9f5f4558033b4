package grpclock

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// call is one call as the flow and the options' functions see it.
type call struct {
	ctx     context.Context
	method  string
	err     error // the status error the call is refused with
	needMsg bool  // the key reads a message field: lock at the first message
}

// UnaryServerInterceptor returns an interceptor that locks the name key
// derives from each call while the handler runs. See the package
// documentation for names and status codes.
//
// It panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func UnaryServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.UnaryServerInterceptor {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		c := &call{ctx: ctx, method: info.FullMethod}
		flow.Serve(ctx, c, &source{ctx: ctx, method: info.FullMethod, msg: req}, func(ctx context.Context) {
			resp, err = handler(ctx, req)
		})
		if c.err != nil {
			return nil, c.err
		}
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that locks the name key
// derives from each stream while the handler runs: from the method and
// metadata before the handler starts, or, when key reads a message field,
// from the first message the handler receives (see the package
// documentation). It panics on a wrong set-up, as UnaryServerInterceptor
// does.
func StreamServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.StreamServerInterceptor {
	flow := adapter.Must(newFlow(l, key, opts))
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		c := &call{ctx: ss.Context(), method: info.FullMethod}
		flow.Serve(c.ctx, c, &source{ctx: c.ctx, method: info.FullMethod, noMsg: true}, func(ctx context.Context) {
			err = handler(srv, &stream{ServerStream: ss, ctx: ctx})
		})
		switch {
		case c.needMsg:
			ls := newLazyStream(flow, ss, info.FullMethod)
			defer ls.end()
			return handler(srv, ls)
		case c.err != nil:
			return c.err
		}
		return err
	}
}

// Check reports what the interceptors would panic with: every invalid
// option, a nil Locker or key, a Locker whose Err is not nil. The error is
// prefixed with "grpclock:" and wraps core.ErrInvalidOption (and the
// Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newFlow(l, key, opts)
	return err
}

func newFlow(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.Flow[*call], error) {
	cfg := &config{}
	adapter.Apply(cfg, &cfg.Config, opts)
	return adapter.NewFlow("grpclock", l, key, &cfg.Config, adapter.Protocol[*call]{Answer: cfg.answer})
}

// answer sets the status a call fails with: WithErrorHandler's, else
// ToStatus's. A stream whose key reads a message field is not refused: its
// lock waits for the first message.
func (cfg *config) answer(c *call, f adapter.Failure) {
	if errors.Is(f.Err, errNeedMessage) {
		c.needMsg = true
		return
	}
	if cfg.onError != nil {
		if c.err = cfg.onError(c.ctx, f.Err); c.err != nil {
			return
		}
	}
	c.err = toStatus(f.Outcome, f.Err)
}

// ToStatus maps a failure to lock a call to its default status error (see
// the package documentation). Messages of codes other than InvalidArgument
// are fixed, so that lock names and internal details stay out of responses.
func ToStatus(err error) error {
	return toStatus(adapter.Classify(err), err)
}

func toStatus(o core.Outcome, err error) error {
	switch o {
	case core.OutcomeBadRequest:
		return status.Error(codes.InvalidArgument, err.Error())
	case core.OutcomeBusy:
		return status.Error(codes.Aborted, "reqlock: the resource is busy, retry later")
	case core.OutcomeUnavailable:
		return status.Error(codes.Unavailable, "reqlock: the lock service is unavailable")
	case core.OutcomeCanceled:
		return status.Error(codes.Canceled, "reqlock: the call was cancelled while it waited for a lock")
	case core.OutcomeDeadline:
		return status.Error(codes.DeadlineExceeded, "reqlock: the call's deadline passed while it waited for a lock")
	}
	return status.Error(codes.Internal, "reqlock: internal error")
}

// LeaseFromContext returns the lease the interceptor holds for the call whose
// context is ctx, or nil.
func LeaseFromContext(ctx context.Context) *core.Lease {
	return core.LeaseFromContext(ctx)
}

// stream is a server stream with the context that carries the lease.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// lazyStream takes the lock at the first RecvMsg, from the first message.
type lazyStream struct {
	grpc.ServerStream
	flow   *adapter.Flow[*call]
	method string
	ctx    *lazyCtx
	cancel context.CancelCauseFunc

	started bool  // the first RecvMsg ran (RecvMsg is not called concurrently)
	err     error // the failure to lock, returned by every RecvMsg
	call    *call
	lease   *core.Lease
	stop    func()
}

func newLazyStream(flow *adapter.Flow[*call], ss grpc.ServerStream, method string) *lazyStream {
	base, cancel := context.WithCancelCause(ss.Context())
	return &lazyStream{ServerStream: ss, flow: flow, method: method, ctx: &lazyCtx{Context: base}, cancel: cancel}
}

func (s *lazyStream) Context() context.Context { return s.ctx }

func (s *lazyStream) RecvMsg(m any) error {
	if s.err != nil {
		return s.err
	}
	if err := s.ServerStream.RecvMsg(m); err != nil || s.started {
		return err
	}
	s.started = true
	c := &call{ctx: s.ctx, method: s.method}
	lease, ok := s.flow.Lock(s.ctx, c, &source{ctx: s.ctx, method: s.method, msg: m})
	if !ok {
		s.err = c.err
		return s.err
	}
	if lease != nil {
		s.call, s.lease = c, lease
		s.ctx.withLease.Store(&contextBox{ctx: core.ContextWithLease(s.ctx.Context, lease), lease: lease, cancel: s.cancel})
		s.stop = adapter.Watch(s.ctx.Context, lease, s.cancel)
	}
	return nil
}

// end releases the lock, if one was taken, when the handler returns.
func (s *lazyStream) end() {
	if s.lease != nil {
		s.flow.Release(s.ctx, s.call, s.lease, s.stop)
	}
	s.cancel(context.Canceled)
}

// lazyCtx is a context that starts carrying a lease once the lock is taken,
// so that the stream's Context can be handed out before the first message.
// Once it does, its Err, Done and Value look at the lease first, as the
// request context of the other adapters does (adapter.Hold): after a pause
// of the process past the lease's validity, the first look reports the
// loss.
type lazyCtx struct {
	context.Context
	withLease atomic.Pointer[contextBox]
}

type contextBox struct {
	ctx    context.Context // carries the lease
	lease  *core.Lease
	cancel context.CancelCauseFunc // cancels the lazyCtx's Context
}

// check cancels the context with cause adapter.ErrLost if its lease is lost,
// and returns the box of the lease, nil before the lock is taken.
func (c *lazyCtx) check() *contextBox {
	b := c.withLease.Load()
	if b != nil && c.Context.Err() == nil {
		adapter.CancelIfLost(b.lease, b.cancel)
	}
	return b
}

func (c *lazyCtx) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

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
