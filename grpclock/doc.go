// Package grpclock is reqlock's gRPC server interceptors: they derive a lock
// name from the call, take the lock, run the handler and release the lock,
// so that calls for one resource never run at once in the whole fleet.
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
// ({header.NAME}, the first value of the key, case-insensitive) and fields of
// the request message ({field.PATH}). A field path goes through nested
// messages by field name (or JSON name), as in "order.id"; it is resolved
// once per message type with protoreflect. Supported leaf kinds: string;
// bool ("true"); the integer kinds (decimal); enums, by value name, or by
// number for a number without a name. Lists, maps, bytes, floating point
// and message leaves are set-up errors. A field that is not set is missing:
// for a proto3 field without explicit presence, that is one holding its zero
// value ("", 0, false, the first enum value). Path and query parameters do
// not exist in gRPC; using them is a set-up error (keyfunc.ErrUnsupported).
//
// # Status codes
//
//   - InvalidArgument: a key part is missing (keyfunc.ErrMissing) or unreadable;
//   - Aborted: the name stayed busy for the whole wait budget (core.ErrTimeout);
//   - Unavailable: Redis is unavailable (core.ErrStorage), unless WithFailOpen;
//   - Canceled, DeadlineExceeded: the caller cancelled, or its deadline passed,
//     while the call waited for its lock (a call that the server cancels at
//     its deadline counts as DeadlineExceeded);
//   - Internal: a set-up mistake seen per call (a bad field path, a path
//     parameter, a key Func that can only fail).
//
// Other set-up mistakes — an invalid option, a nil Locker or Func, a Locker
// whose Err is not nil — make UnaryServerInterceptor and
// StreamServerInterceptor panic at start-up with an error listing them;
// Check returns that error instead.
//
// WithErrorHandler replaces this mapping; when it returns nil, the default
// status is returned all the same: a failure to lock never runs the handler.
// Only WithFailOpen (or WithFailOpenHook, which also reports the storage
// error) runs it unlocked, and only when Redis is unavailable.
//
// WithWait and WithTTL set the wait budget and TTL per method; a per-call
// value wins over them (see Option): WithTTLFunc, or core.ContextWithTTL and
// core.ContextWithWait set on the call's context by an earlier interceptor.
// The wait bounds the waiting for another holder, not a Redis call, which
// ends at the Locker's I/O timeout.
//
// # The handler's side
//
// The handler's context carries the lease — LeaseFromContext returns it — and
// is cancelled when the lease is lost, its cause then wrapping
// core.ErrNotHeld. Because the context carries the lease, the Locker's
// Acquire of the same name inside the handler is reentrant. Reentrancy goes
// by context, not by goroutine: only code given the handler's context (or
// one derived from it) shares the lease. The lock is released when the
// handler returns, also when it panics. The method labels the acquire for
// telemetry (core.Route); lock names never do. The request message is decoded
// by gRPC before the interceptor runs (its size bounded by the server's
// grpc.MaxRecvMsgSize): a {field.X} key reads it, never the wire.
//
// # Streams
//
// StreamServerInterceptor derives the name before the handler runs when the
// key needs no message field. When it does, the lock is taken at the
// handler's first RecvMsg, from the first message: an error to lock it is
// returned by that RecvMsg (and by every later one), and the stream's context
// carries the lease from then on. The lock is held until the handler returns.
package grpclock
