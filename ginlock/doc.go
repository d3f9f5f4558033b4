// Package ginlock is reqlock's gin middleware: it derives a lock name from the
// request, takes the lock, runs the rest of the chain and releases the lock,
// so that requests for one resource never run at once in the whole fleet.
//
//	key, _ := keyfunc.Template("order:{param.id}")
//	r.POST("/orders/:id/pay", ginlock.New(locker, key), pay)
//
// # Answers
//
// When the lock cannot be taken the chain is aborted with:
//   - 400 and a JSON error naming the part, when a key part is missing or
//     unreadable (keyfunc.ErrMissing, keyfunc.ErrUnreadable);
//   - 409 with Retry-After, when the name stayed busy for the whole wait
//     budget (core.ErrTimeout; WithBusyHandler to change it);
//   - 503, when Redis is unavailable (core.ErrStorage), unless WithFailOpen;
//     also when the request's own deadline passed while waiting;
//   - no body at all (status 499 recorded for logs), when the client went
//     away (its context was cancelled);
//   - 500 for set-up mistakes (an invalid option, a nil Locker or Func).
//
// JSON errors have the form {"error": "..."}; every error is also attached to
// the gin context (c.Error) for logging middleware. WithErrorHandler replaces
// these answers.
//
// # The handler's side
//
// The handler's request context (c.Request.Context()) carries the lease —
// Lease(c) returns it — and is cancelled when the lease is lost, its cause
// then wrapping core.ErrNotHeld. Because the context carries the lease, the
// Locker's Acquire of the same name inside the handler is reentrant: it
// returns a nested lease without a Redis call. A JSON body read to derive the
// name (keyfunc.Field) is put back, so the handler binds it as usual. The
// lock is released when the chain returns, also when a handler panics (the
// panic goes on to the recovery middleware).
//
// The route template (c.FullPath()) labels the acquire for telemetry
// (core.ContextWithRoute); lock names never do.
package ginlock
