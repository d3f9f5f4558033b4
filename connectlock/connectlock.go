package connectlock

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/protokey"
)

// NewInterceptor returns an interceptor that locks the name (or names) key
// derives from each call a handler serves, while the handler runs: unary calls
// before the handler, streams before the handler or, when key reads a
// message field, at the first message the handler receives. Calls of
// clients pass through. See the package documentation for names and codes.
//
// It panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func NewInterceptor(l *core.Locker, key keyfunc.Func, opts ...Option) connect.Interceptor {
	return &interceptor{rpc: adapter.Must(newRPC(l, key, opts))}
}

type interceptor struct{ rpc *adapter.RPC }

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (resp connect.AnyResponse, err error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		err = i.rpc.Unary(ctx, source(req.Spec(), req.Header(), req.Any()), func(ctx context.Context) (err error) {
			resp, err = next(ctx, req)
			return err
		})
		return resp, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		src := func(msg any) keyfunc.Source { return source(conn.Spec(), conn.RequestHeader(), msg) }
		return i.rpc.Stream(ctx, src, func(ctx context.Context, s *adapter.Stream) error {
			if s != nil {
				conn = &stream{StreamingHandlerConn: conn, s: s}
			}
			return next(ctx, conn)
		})
	}
}

// stream takes the lock at the first Receive, from the first message.
type stream struct {
	connect.StreamingHandlerConn
	s *adapter.Stream
}

func (c *stream) Receive(m any) error {
	return c.s.Receive(m, func() error { return c.StreamingHandlerConn.Receive(m) })
}

func source(spec connect.Spec, h http.Header, msg any) keyfunc.Source {
	return &protokey.Source{Method: spec.Procedure, Headers: h.Get, Message: msg}
}

// Check reports what NewInterceptor would panic with: every invalid option,
// a nil Locker or key, a Locker whose Err is not nil. The error is prefixed
// with "connectlock:" and wraps core.ErrInvalidOption (and the Locker's
// error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newRPC(l, key, opts)
	return err
}

func newRPC(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.RPC, error) {
	return adapter.NewRPC("connectlock", l, key, opts, func(_ *adapter.Call, f adapter.Failure) error {
		return ToError(f.Err)
	})
}

// ToError maps a failure to lock a call to its default connect error (see
// the package documentation). Messages of codes other than
// CodeInvalidArgument are fixed, so that lock names and internal details
// stay out of responses.
func ToError(err error) *connect.Error {
	o := adapter.Classify(err)
	code, ok := codeOf[o]
	if !ok {
		code = connect.CodeInternal
	}
	return connect.NewError(code, errors.New(adapter.CallMessage(o, err)))
}

// codeOf is the code of each outcome; CodeInternal for the others.
var codeOf = map[core.Outcome]connect.Code{
	core.OutcomeBadRequest:  connect.CodeInvalidArgument,
	core.OutcomeBusy:        connect.CodeAborted,
	core.OutcomeUnavailable: connect.CodeUnavailable,
	core.OutcomeCanceled:    connect.CodeCanceled,
	core.OutcomeDeadline:    connect.CodeDeadlineExceeded,
}

// LeaseFromContext returns the lease the interceptor holds for the call whose
// context is ctx, or nil. One lease covers all the names of a key of
// several (Lease.Names); its Mode and, under WithPermits, its Slot tell how
// the call holds them.
func LeaseFromContext(ctx context.Context) *core.Lease {
	return core.LeaseFromContext(ctx)
}
