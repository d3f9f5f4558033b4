// Package kratoslock is reqlock's Kratos middleware: it derives a lock name
// from each request, takes the lock, runs the rest of the chain and releases
// the lock, so that requests for one resource never run at once in the whole
// fleet. One middleware serves both of Kratos's transports, HTTP and gRPC.
//
//	import (
//		"github.com/go-kratos/kratos/v2"
//		"github.com/go-kratos/kratos/v2/middleware/recovery"
//		"github.com/go-kratos/kratos/v2/transport/grpc"
//		"github.com/go-kratos/kratos/v2/transport/http"
//		"github.com/redis/go-redis/v9"
//
//		"github.com/reqlock/reqlock/core"
//		"github.com/reqlock/reqlock/keyfunc"
//		"github.com/reqlock/reqlock/kratoslock"
//	)
//
//	func newApp(client *redis.Client) *kratos.App {
//		locker := core.New(client)
//		key, err := keyfunc.Template("order:{field.order_id}")
//		if err != nil {
//			panic(err)
//		}
//		lock := kratoslock.Server(locker, key)
//		httpSrv := http.NewServer(http.Address(":8000"), http.Middleware(recovery.Recovery(), lock))
//		grpcSrv := grpc.NewServer(grpc.Address(":9000"), grpc.Middleware(recovery.Recovery(), lock))
//		// register the services on httpSrv and grpcSrv
//		return kratos.New(kratos.Server(httpSrv, grpcSrv))
//	}
//
// To lock some operations only, wrap it in Kratos's selector middleware
// (middleware/selector), or give it to the servers' Use with an operation
// selector.
//
// # Names
//
// A name comes from the request as Kratos's transport describes it
// (transport.FromServerContext): {route} is the transport's Operation — the
// protobuf method, such as "/orders.v1.Orders/Pay", set by the generated
// handlers of both transports, or the path template for HTTP routes
// registered by hand. {header.NAME} reads the request header (HTTP) or
// metadata (gRPC), case-insensitively. {field.PATH} reads the request
// message the handler is called with — for HTTP, after Kratos bound the body,
// the query and the path variables into it — with protoreflect, as in
// "order.id" (see package protokey for the supported kinds); a field that is
// not set is missing. On the HTTP transport, {param.NAME} reads a path
// variable of the route (gorilla/mux's, such as {id} in "/orders/{id}") and
// {query.NAME} a query parameter; on the gRPC transport they are set-up
// errors (keyfunc.ErrUnsupported). A request whose context has no server
// transport (a handler called directly) is locked all the same, by its
// message: it has no route and no headers.
//
// # Errors
//
// A request that cannot be locked fails with a Kratos error
// (github.com/go-kratos/kratos/v2/errors): its code is an HTTP status, from
// which Kratos derives the gRPC code; its reason is "REQLOCK_" and the
// outcome's name (core.Outcome) in upper case.
//
//   - 400 (InvalidArgument), REQLOCK_BAD_REQUEST: a key part is missing
//     (keyfunc.ErrMissing) or unreadable;
//   - 409 (Aborted), REQLOCK_BUSY: the name stayed busy for the whole wait
//     budget (core.ErrTimeout); the reply header (the HTTP response header,
//     gRPC header metadata) gets Retry-After (WithRetryAfter, 1 s by
//     default);
//   - 503 (Unavailable), REQLOCK_UNAVAILABLE: Redis is unavailable
//     (core.ErrStorage), unless WithFailOpen;
//   - 499 (Canceled), REQLOCK_CANCELED: the caller went away while the
//     request waited for its lock;
//   - 504 (DeadlineExceeded), REQLOCK_DEADLINE_EXCEEDED: the request's
//     deadline — Kratos's server timeout (1 s unless set), or the gRPC
//     caller's — passed while it waited for its lock;
//   - 500 (Internal): a set-up mistake seen per request (a bad field path, a
//     path parameter over gRPC, a key Func that can only fail).
//
// Other set-up mistakes — an invalid option, a nil Locker or Func, a Locker
// whose Err is not nil — make Server panic at start-up with an error listing
// them; Check returns that error instead. WithErrorHandler replaces the
// mapping; when it returns nil, the default error is returned all the same:
// a failure to lock never runs the handler. Only WithFailOpen (or
// WithFailOpenHook) runs it unlocked, and only when Redis is unavailable.
//
// Kratos's server timeout also bounds the waiting: give the servers a
// timeout longer than the wait budget (WithWait or core.WithWait), or a busy
// name gives 504 instead of 409.
//
// # The handler's side
//
// The handler's context carries the lease — LeaseFromContext returns it —
// and is cancelled when the lease is lost, its cause then wrapping
// core.ErrNotHeld. The Locker's Acquire of the same name with that context
// is reentrant. The lock is released when the rest of the chain returns,
// also when it panics (put recovery.Recovery before the middleware to
// answer the panic). The operation labels the acquire for telemetry
// (core.Route).
//
// # Streams
//
// Server locks unary calls and HTTP requests. Kratos runs the middleware of
// grpc.StreamMiddleware once per message sent or received, which is no
// place for a lock held for a whole stream: to lock gRPC streams on Kratos,
// give grpclock.StreamServerInterceptor to grpc.StreamInterceptor.
package kratoslock
