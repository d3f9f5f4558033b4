// Package connectlock is reqlock's connect-go interceptor: it derives a lock
// name from each call a handler serves, takes the lock, runs the handler and
// releases the lock, so that calls for one resource never run at once in the
// whole fleet.
//
//	import (
//		"net/http"
//
//		"connectrpc.com/connect"
//		"github.com/redis/go-redis/v9"
//
//		"github.com/reqlock/reqlock/connectlock"
//		"github.com/reqlock/reqlock/core"
//		"github.com/reqlock/reqlock/keyfunc"
//
//		ordersv1connect "example.com/gen/orders/v1/ordersv1connect"
//	)
//
//	func routes(client *redis.Client, svc ordersv1connect.OrdersHandler) *http.ServeMux {
//		locker := core.New(client)
//		key, err := keyfunc.Template("order:{field.order_id}")
//		if err != nil {
//			panic(err)
//		}
//		mux := http.NewServeMux()
//		mux.Handle(ordersv1connect.NewOrdersHandler(svc,
//			connect.WithInterceptors(connectlock.NewInterceptor(locker, key))))
//		return mux
//	}
//
// Give the interceptor to the handlers whose calls it locks; to lock some
// procedures of a service only, give it through
// connect.WithConditionalHandlerOptions, for the Specs of those procedures.
// On a client it lets every call pass through.
//
// # Names
//
// A name comes from the procedure ({route} is Spec().Procedure, such as
// "/orders.v1.Orders/Pay"), request headers ({header.NAME}, the first value,
// case-insensitive) and fields of the request message ({field.PATH}): a
// field path goes through nested messages by field name (or JSON name), as
// in "order.id", read with protoreflect (see package protokey for the
// supported kinds). A field that is not set is missing. Path and query
// parameters do not exist in connect calls; using them is a set-up error
// (keyfunc.ErrUnsupported).
//
// # Codes
//
//   - CodeInvalidArgument: a key part is missing (keyfunc.ErrMissing) or
//     unreadable;
//   - CodeAborted: the name stayed busy for the whole wait budget
//     (core.ErrTimeout);
//   - CodeUnavailable: Redis is unavailable (core.ErrStorage), unless
//     WithFailOpen;
//   - CodeCanceled, CodeDeadlineExceeded: the caller went away, or its
//     deadline (the call's timeout) passed, while the call waited for its
//     lock;
//   - CodeInternal: a set-up mistake seen per call (a bad field path, a path
//     parameter, a key Func that can only fail).
//
// Other set-up mistakes — an invalid option, a nil Locker or Func, a Locker
// whose Err is not nil — make NewInterceptor panic at start-up with an error
// listing them; Check returns that error instead. WithErrorHandler replaces
// the mapping; when it returns nil, the default error is returned all the
// same: a failure to lock never runs the handler. Only WithFailOpen (or
// WithFailOpenHook) runs it unlocked, and only when Redis is unavailable.
//
// # The handler's side
//
// The handler's context carries the lease — LeaseFromContext returns it —
// and is cancelled when the lease is lost, its cause then wrapping
// core.ErrNotHeld. The Locker's Acquire of the same name with that context
// is reentrant. The lock is released when the handler returns, also when it
// panics. The procedure labels the acquire for telemetry (core.Route).
//
// # Streams
//
// A stream (client, server or bidirectional streaming) is locked before the
// handler runs when the key needs no message field. When it does, the lock
// is taken at the first message the handler receives (for server streaming,
// the request, which connect receives before calling the handler): an error
// to lock it is returned by that Receive (and by every later one), and the
// handler's context carries the lease from then on. The lock is held until
// the handler returns. Streaming needs HTTP/2 (TLS, or h2c with
// http.Protocols' SetUnencryptedHTTP2).
package connectlock
