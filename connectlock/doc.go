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
// # Several names
//
// A key may yield several names: keyfunc.Templates (or keyfunc.All) gives
// one per template, and a field path with "[*]" one per item of a repeated
// field (protokey's "items[*].sku", "tags[*]"). The interceptor takes them
// all at once with core.Locker.AcquireAll, all or none, in one canonical
// order, so that two calls that list the same names in different orders
// cannot deadlock; LeaseFromContext(ctx).Names() lists them. A transfer
// locks both accounts:
//
//	key, _ := keyfunc.Templates("account:{field.from}", "account:{field.to}")
//
// An empty repeated field, or an empty item, is a missing part
// (CodeInvalidArgument); so is a key that yields more names than
// WithMaxNames allows (64 by default).
//
// # Lock modes
//
// By default a call holds its names alone. WithShared takes them shared,
// the read side of a read-write lock (Curator's InterProcessReadWriteLock,
// Redisson's RReadWriteLock): shared calls run together, never beside an
// exclusive holder, and a waiting exclusive call goes first.
// WithSharedMethods names the read procedures, whose calls share while the
// other procedures' calls exclude:
//
//	connectlock.NewInterceptor(locker, key,
//		connectlock.WithSharedMethods(ordersv1connect.OrdersGetProcedure, ordersv1connect.OrdersListProcedure))
//
// WithSharedIf decides per call. WithPermits(n) lets up to n calls hold a
// name at once, each in its own slot (LeaseFromContext(ctx).Slot(), 0 to
// n-1): a hot item's stock split in n segments (Curator's
// InterProcessSemaphoreV2). These need a store that is a core.Sharer (the
// Redis store is); every user of a name must agree on its mode and n, or
// the call fails with CodeInternal (core.ErrModeMismatch).
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
