package grpclock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// interceptor is what the unary and stream interceptors share.
type interceptor struct {
	cfg      *config
	locker   *core.Locker
	key      keyfunc.Func
	setupErr error
}

func newInterceptor(l *core.Locker, key keyfunc.Func, opts []Option) *interceptor {
	cfg := &config{}
	for i, opt := range opts {
		if opt == nil {
			cfg.Invalid("grpclock: option %d is nil", i)
			continue
		}
		opt(cfg)
	}
	return &interceptor{cfg: cfg, locker: l, key: key, setupErr: cfg.Check("grpclock", l, key)}
}

// UnaryServerInterceptor returns an interceptor that locks the name key
// derives from each call while the handler runs. See the package
// documentation for names and status codes. An invalid option, a nil Locker
// or a nil key makes every call fail with Internal.
func UnaryServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.UnaryServerInterceptor {
	in := newInterceptor(l, key, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		lease, err := in.lock(ctx, &source{ctx: ctx, method: info.FullMethod, msg: req})
		if err != nil {
			return nil, err
		}
		if lease == nil { // fail-open
			return handler(ctx, req)
		}
		ctx, stop := adapter.Hold(ctx, lease)
		defer in.release(ctx, lease, stop) // also when the handler panics
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns an interceptor that locks the name key
// derives from each stream while the handler runs: from the method and
// metadata before the handler starts, or, when key reads a message field,
// from the first message the handler receives (see the package
// documentation).
func StreamServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.StreamServerInterceptor {
	in := newInterceptor(l, key, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		lease, err := in.lock(ctx, &source{ctx: ctx, method: info.FullMethod, noMsg: true})
		switch {
		case errors.Is(err, errNeedMessage):
			ls := newLazyStream(in, ss, info.FullMethod)
			defer ls.end()
			return handler(srv, ls)
		case err != nil:
			return err
		case lease == nil: // fail-open
			return handler(srv, ss)
		}
		ctx, stop := adapter.Hold(ctx, lease)
		defer in.release(ctx, lease, stop)
		return handler(srv, &stream{ServerStream: ss, ctx: ctx})
	}
}

// lock derives the name and takes it. It returns a nil lease and no error
// when Redis is down and the interceptor fails open, and a status error on
// failure.
func (in *interceptor) lock(ctx context.Context, src *source) (*core.Lease, error) {
	if in.setupErr != nil {
		return nil, in.fail(ctx, in.setupErr)
	}
	name, err := in.key(src)
	if err != nil {
		if errors.Is(err, errNeedMessage) {
			return nil, err
		}
		return nil, in.fail(ctx, err)
	}
	var ttl time.Duration
	if in.cfg.ttlFunc != nil {
		ttl = in.cfg.ttlFunc(ctx, src.method)
	}
	lease, err := in.cfg.Acquire(ctx, in.locker, name, src.method, ttl)
	if err != nil {
		if in.cfg.FailOpen && adapter.Classify(err) == adapter.Unavailable {
			if in.cfg.onFailOpen != nil {
				in.cfg.onFailOpen(ctx, err)
			}
			return nil, nil
		}
		return nil, in.fail(ctx, err)
	}
	return lease, nil
}

func (in *interceptor) release(ctx context.Context, lease *core.Lease, stop func()) {
	stop()
	_ = lease.Release(ctx) // on failure the lock expires with its TTL
}

// fail returns the error a call fails with when its lock could not be taken:
// never nil, which would run the handler unlocked.
func (in *interceptor) fail(ctx context.Context, err error) error {
	if in.cfg.onError != nil {
		if e := in.cfg.onError(ctx, err); e != nil {
			return e
		}
	}
	return ToStatus(err)
}

// ToStatus maps a failure to lock a call to its default status error (see
// the package documentation). Messages of codes other than InvalidArgument
// are fixed, so that lock names and internal details stay out of responses.
func ToStatus(err error) error {
	switch adapter.Classify(err) {
	case adapter.BadRequest:
		return status.Error(codes.InvalidArgument, err.Error())
	case adapter.Busy:
		return status.Error(codes.Aborted, "reqlock: the resource is busy, retry later")
	case adapter.Unavailable:
		return status.Error(codes.Unavailable, "reqlock: the lock service is unavailable")
	case adapter.Canceled:
		return status.Error(codes.Canceled, "reqlock: the call was cancelled while it waited for a lock")
	case adapter.DeadlineOver:
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
	in     *interceptor
	method string
	ctx    *lazyCtx
	cancel context.CancelCauseFunc

	started bool  // the first RecvMsg ran (RecvMsg is not called concurrently)
	err     error // the failure to lock, returned by every RecvMsg
	lease   *core.Lease
	stop    func()
}

func newLazyStream(in *interceptor, ss grpc.ServerStream, method string) *lazyStream {
	base, cancel := context.WithCancelCause(ss.Context())
	return &lazyStream{ServerStream: ss, in: in, method: method, ctx: &lazyCtx{Context: base}, cancel: cancel}
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
	lease, err := s.in.lock(s.ctx, &source{ctx: s.ctx, method: s.method, msg: m})
	if err != nil {
		s.err = err
		return err
	}
	if lease != nil {
		s.lease = lease
		s.ctx.withLease.Store(&contextBox{core.ContextWithLease(s.ctx.Context, lease)})
		s.stop = adapter.Watch(s.ctx.Context, lease, s.cancel)
	}
	return nil
}

// end releases the lock, if one was taken, when the handler returns.
func (s *lazyStream) end() {
	if s.lease != nil {
		s.in.release(s.ctx, s.lease, s.stop)
	}
	s.cancel(context.Canceled)
}

// lazyCtx is a context that starts carrying a lease once the lock is taken,
// so that the stream's Context can be handed out before the first message.
type lazyCtx struct {
	context.Context
	withLease atomic.Pointer[contextBox]
}

type contextBox struct{ ctx context.Context }

// Value looks values up in the context that carries the lease, once there
// is one.
func (c *lazyCtx) Value(key any) any {
	if b := c.withLease.Load(); b != nil {
		return b.ctx.Value(key)
	}
	return c.Context.Value(key)
}
