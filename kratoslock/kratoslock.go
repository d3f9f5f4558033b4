package kratoslock

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-kratos/kratos/v2/errors"
	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/transport"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/gorilla/mux"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adapter"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/protokey"
)

// Server returns a server middleware that locks the name (or names) key
// derives from each request, HTTP or gRPC, while the rest of the chain
// runs. See the package documentation for names, errors and lock modes.
//
// It panics, as regexp.MustCompile does, when the set-up is wrong: an
// invalid option, a nil Locker or key, a Locker whose Err is not nil. The
// panic value is Check's error, which lists every problem.
func Server(l *core.Locker, key keyfunc.Func, opts ...Option) middleware.Middleware {
	rpc := adapter.Must(newRPC(l, key, opts))
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, req any) (reply any, err error) {
			err = rpc.Unary(ctx, newSource(ctx, req), func(ctx context.Context) (err error) {
				reply, err = next(ctx, req)
				return err
			})
			return reply, err
		}
	}
}

// newSource returns the keyfunc.Source of a Kratos request: the operation,
// the request header or metadata, the request message, and for the HTTP
// transport the path variables and the query.
func newSource(ctx context.Context, req any) keyfunc.Source {
	s := &protokey.Source{Message: req}
	if tr, ok := transport.FromServerContext(ctx); ok {
		s.Method, s.Headers = tr.Operation(), tr.RequestHeader().Get
		if ht, ok := tr.(*khttp.Transport); ok {
			r := ht.Request()
			s.PathParam = func(name string) string { return mux.Vars(r)[name] }
			s.QueryParam = func(name string) string { return r.URL.Query().Get(name) }
		}
	}
	return s
}

// Check reports what Server would panic with: every invalid option, a nil
// Locker or key, a Locker whose Err is not nil. The error is prefixed with
// "kratoslock:" and wraps core.ErrInvalidOption (and the Locker's error).
func Check(l *core.Locker, key keyfunc.Func, opts ...Option) error {
	_, err := newRPC(l, key, opts)
	return err
}

func newRPC(l *core.Locker, key keyfunc.Func, opts []Option) (*adapter.RPC, error) {
	return adapter.NewRPC("kratoslock", l, key, opts, answer)
}

// answer is the default error of a refused request; a busy one also gets a
// Retry-After reply header.
func answer(x *adapter.Call, f adapter.Failure) error {
	if tr, ok := transport.FromServerContext(x.Ctx); ok && f.RetryAfter != "" {
		tr.ReplyHeader().Set("Retry-After", f.RetryAfter)
	}
	return ToError(f.Err)
}

// ToError maps a failure to lock a request to its default Kratos error (see
// the package documentation). Messages of errors other than 400 are fixed,
// so that lock names and internal details stay out of responses.
func ToError(err error) *errors.Error {
	o := adapter.Classify(err)
	code, ok := statusOf[o]
	if !ok {
		code = http.StatusInternalServerError
	}
	return errors.New(code, "REQLOCK_"+strings.ToUpper(o.String()), adapter.CallMessage(o, err))
}

// statusOf is the HTTP status of each outcome, from which Kratos derives the
// gRPC code; 500 for the others.
var statusOf = map[core.Outcome]int{
	core.OutcomeBadRequest:  http.StatusBadRequest,         // InvalidArgument
	core.OutcomeBusy:        http.StatusConflict,           // Aborted
	core.OutcomeUnavailable: http.StatusServiceUnavailable, // Unavailable
	core.OutcomeCanceled:    adapter.StatusClientClosedRequest,
	core.OutcomeDeadline:    http.StatusGatewayTimeout, // DeadlineExceeded
}

// LeaseFromContext returns the lease the middleware holds for the request
// whose context is ctx, or nil. One lease covers all the names of a key of
// several (Lease.Names); its Mode and, under WithPermits, its Slot tell how
// the request holds them.
func LeaseFromContext(ctx context.Context) *core.Lease {
	return core.LeaseFromContext(ctx)
}
