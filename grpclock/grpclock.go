package grpclock

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
)

// UnaryServerInterceptor returns an interceptor that locks the name (or
// names) key derives from each call while the handler runs. See the
// package documentation for names, status codes and lock modes.
//
// It panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func UnaryServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.UnaryServerInterceptor {
	rpc := adapter.Must(newRPC(l, key, opts))
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		err = rpc.Unary(ctx, source(ctx, info.FullMethod, req), func(ctx context.Context) (err error) {
			resp, err = handler(ctx, req)
			return err
		})
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that locks the name (or
// names) key derives from each stream while the handler runs: from the method and
// metadata before the handler starts, or, when key reads a message field,
// from the first message the handler receives (see the package
// documentation). It panics on a wrong set-up, as UnaryServerInterceptor
// does.
func StreamServerInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) grpc.StreamServerInterceptor {
	rpc := adapter.Must(newRPC(l, key, opts))
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		src := func(msg any) keyfunc.Source { return source(ss.Context(), info.FullMethod, msg) }
		return rpc.Stream(ss.Context(), src, func(ctx context.Context, s *adapter.Stream) error {
			if s != nil {
				return handler(srv, &lazyStream{ServerStream: ss, s: s})
			}
			return handler(srv, &stream{ServerStream: ss, ctx: ctx})
		})
	}
}

// Check reports what the interceptors would panic with: every invalid
// option, a nil Locker or key, a Locker whose Err is not nil. The error is
// prefixed with "grpclock:" and wraps core.ErrInvalidOption (and the
// Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newRPC(l, key, opts)
	return err
}

func newRPC(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.RPC, error) {
	return adapter.NewRPC("grpclock", l, key, opts, func(_ *adapter.Call, f adapter.Failure) error {
		return ToStatus(f.Err)
	})
}

// ToStatus maps a failure to lock a call to its default status error (see
// the package documentation). Messages of codes other than InvalidArgument
// are fixed, so that lock names and internal details stay out of responses.
func ToStatus(err error) error {
	o := adapter.Classify(err)
	code, ok := codeOf[o]
	if !ok {
		code = codes.Internal
	}
	return status.Error(code, adapter.CallMessage(o, err))
}

// codeOf is the status code of each outcome; Internal for the others.
var codeOf = map[core.Outcome]codes.Code{
	core.OutcomeBadRequest:  codes.InvalidArgument,
	core.OutcomeBusy:        codes.Aborted,
	core.OutcomeUnavailable: codes.Unavailable,
	core.OutcomeCanceled:    codes.Canceled,
	core.OutcomeDeadline:    codes.DeadlineExceeded,
}

// LeaseFromContext returns the lease the interceptor holds for the call whose
// context is ctx, or nil. One lease covers all the names of a key of
// several (Lease.Names); its Mode and, under WithPermits, its Slot tell how
// the call holds them.
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
	s *adapter.Stream
}

func (s *lazyStream) Context() context.Context { return s.s.Context() }

func (s *lazyStream) RecvMsg(m any) error {
	return s.s.Receive(m, func() error { return s.ServerStream.RecvMsg(m) })
}
