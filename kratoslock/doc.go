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
// # Several names
//
// A key may yield several names: keyfunc.Templates (or keyfunc.All) gives
// one per template, and a field path with "[*]" one per item of a repeated
// field (protokey's "items[*].sku", "tags[*]"). The middleware takes them
// all at once with core.Locker.AcquireAll, all or none, in one canonical
// order, so that two requests that list the same names in different orders
// cannot deadlock; LeaseFromContext(ctx).Names() lists them. A transfer
// locks both accounts:
//
//	key, _ := keyfunc.Templates("account:{field.from}", "account:{field.to}")
//
// An empty repeated field, or an empty item, is a missing part (400); so
// is a key that yields more names than WithMaxNames allows (64 by
// default).
//
// # Lock modes
//
// By default a request holds its names alone. WithShared takes them
// shared, the read side of a read-write lock (Curator's
// InterProcessReadWriteLock, Redisson's RReadWriteLock): shared requests
// run together, never beside an exclusive holder, and a waiting exclusive
// request goes first. WithSharedMethods names the read operations, whose
// requests share while the other operations' requests exclude, on both
// transports:
//
//	lock := kratoslock.Server(locker, key,
//		kratoslock.WithSharedMethods(v1.OperationOrdersGetOrder, v1.OperationOrdersListOrders))
//
// WithSharedIf decides per request. WithPermits(n) lets up to n requests
// hold a name at once, each in its own slot (LeaseFromContext(ctx).Slot(),
// 0 to n-1): a hot item's stock split in n segments (Curator's
// InterProcessSemaphoreV2). These need a store that is a core.Sharer (the
// Redis store is); every user of a name must agree on its mode and n, or
// the request fails with 500 (core.ErrModeMismatch).
//
// # Errors
//
// A request that cannot be locked fails with a Kratos error
// (github.com/go-kratos/kratos/v2/errors) whose code is the HTTP status that
// core.Outcome documents, from which Kratos derives the gRPC code, but 504
// (DeadlineExceeded) for a passed deadline; its reason is "REQLOCK_" and the
// outcome's name in upper case, such as REQLOCK_BUSY. A busy answer's
// Retry-After goes into the reply header (the HTTP response header, gRPC
// header metadata). ToError is that mapping, and WithErrorHandler replaces
// it. Server panics on a bad set-up; Check returns the error instead.
//
// # TTL and wait
//
// WithTTL and WithWait set the lock's TTL and wait budget for the
// middleware; a value set per request wins (see Option). The request's
// deadline, Kratos's server timeout (1 s unless set) or the gRPC caller's,
// also bounds the waiting: give the servers a timeout longer than the wait
// budget, or a busy name gives 504 instead of 409.
//
// # The handler's side
//
// The handler's context carries the lease (LeaseFromContext) and is
// cancelled, with a cause wrapping core.ErrNotHeld, when the lease is lost;
// with it, the Locker's Acquire of the same name is reentrant. The lock is
// released when the rest of the chain returns, also when it panics (put
// recovery.Recovery before the middleware to answer the panic).
//
// # Streams
//
// Server locks unary calls and HTTP requests. Kratos runs the middleware of
// grpc.StreamMiddleware once per message sent or received, which is no
// place for a lock held for a whole stream: to lock gRPC streams on Kratos,
// give grpclock.StreamServerInterceptor to grpc.StreamInterceptor.
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error) runs
// the handler unlocked when the store is unavailable, and only then;
// LeaseFromContext then returns nil.
package kratoslock
