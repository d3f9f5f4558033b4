// Package grpclock is reqlock's gRPC server interceptors: they take a lock
// named after the call, run the handler and release the lock, so that calls
// for one resource never run at once anywhere in the fleet.
//
//	key, _ := keyfunc.Template("order:{field.order_id}")
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(locker, key)))
//
// To lock some methods only, wrap the interceptor in go-grpc-middleware's
// selector (interceptors/selector) with a matcher of methods.
//
// # Names
//
// A name comes from the method ({route} is info.FullMethod), metadata
// ({header.NAME}, the first value, case-insensitive) and fields of the
// request message ({field.PATH}; see package protokey for the paths and
// kinds it reads). gRPC has decoded the message before the interceptor runs,
// within the server's grpc.MaxRecvMsgSize. Path and query parameters do not
// exist in gRPC: a key that uses them fails every call with Internal
// (keyfunc.ErrUnsupported).
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
// (InvalidArgument); so is a key that yields more names than WithMaxNames
// allows (64 by default).
//
// # Lock modes
//
// By default a call holds its names alone. WithShared takes them shared,
// the read side of a read-write lock (Curator's InterProcessReadWriteLock,
// Redisson's RReadWriteLock): shared calls run together, never beside an
// exclusive holder, and a waiting exclusive call goes first.
// WithSharedMethods names the read methods, whose calls share while the
// other methods' calls exclude:
//
//	lock := grpclock.UnaryServerInterceptor(locker, key,
//		grpclock.WithSharedMethods("/orders.v1.Orders/Get", "/orders.v1.Orders/List"))
//
// WithSharedIf decides per call. WithPermits(n) lets up to n calls hold a
// name at once, each in its own slot (LeaseFromContext(ctx).Slot(), 0 to
// n-1): a hot item's stock split in n segments (Curator's
// InterProcessSemaphoreV2). These need a store that is a core.Sharer (the
// Redis store is); every user of a name must agree on its mode and n, or
// the call fails with Internal (core.ErrModeMismatch).
//
// # Status codes
//
// A call that cannot be locked fails with the status code that core.Outcome
// documents (InvalidArgument, Aborted, Unavailable, DeadlineExceeded,
// Canceled, Internal); ToStatus is that mapping, and WithErrorHandler
// replaces it. A call that the server cancels at its deadline counts as
// DeadlineExceeded. The interceptors' constructors panic on a bad set-up;
// Check returns the error instead.
//
// # TTL and wait
//
// WithTTL and WithWait set the lock's TTL and wait budget per method; a
// value set per call wins (see Option).
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
// StreamServerInterceptor locks a stream before the handler runs when the
// key needs no message field. When it does, the lock is taken at the
// handler's first RecvMsg, from the first message: an error to lock it is
// returned by that RecvMsg (and by every later one), and the stream's
// context carries the lease from then on. The lock is held until the
// handler returns.
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error) runs
// the handler unlocked when the store is unavailable, and only then;
// LeaseFromContext then returns nil.
package grpclock
