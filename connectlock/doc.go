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
// case-insensitive) and fields of the request message ({field.PATH}; see
// package protokey for the paths and kinds it reads). Path and query
// parameters do not exist in connect calls: a key that uses them fails every
// call with CodeInternal (keyfunc.ErrUnsupported).
//
// # Codes
//
// A call that cannot be locked fails with the code that core.Outcome
// documents (CodeInvalidArgument, CodeAborted, CodeUnavailable,
// CodeDeadlineExceeded, CodeCanceled, CodeInternal); ToError is that
// mapping, and WithErrorHandler replaces it. NewInterceptor panics on a bad
// set-up; Check returns the error instead.
//
// # TTL and wait
//
// WithTTL and WithWait set the lock's TTL and wait budget for the
// intercepted calls; a value set per call wins (see Option).
//
// # The handler's side
//
// The handler's context carries the lease (LeaseFromContext) and is
// cancelled, with a cause wrapping core.ErrNotHeld, when the lease is lost;
// with it, the Locker's Acquire of the same name is reentrant. The lock is
// released when the handler returns, also when it panics.
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
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error) runs
// the handler unlocked when the store is unavailable, and only then;
// LeaseFromContext then returns nil.
package connectlock
