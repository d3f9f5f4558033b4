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
//   - 500, when the key Func fails otherwise (keyfunc reports a bad argument,
//     such as keyfunc.Param(""), through the Func it returns).
//
// Other set-up mistakes — an invalid option, a nil Locker or Func, a Locker
// whose Err is not nil — are not answered at all: New panics with an error
// listing them, at start-up. Check returns that error instead.
//
// JSON errors have the form {"error": "..."}; every error is also attached to
// the gin context (c.Error) for logging middleware. WithErrorHandler and
// WithBusyHandler replace these answers; the chain is aborted whatever they
// do, so the handler never runs without its lock. Only WithFailOpen (or
// WithFailOpenHook, which also reports the storage error) lets a request
// through unlocked, and only when Redis is unavailable.
//
// # Wait budget and TTL
//
// WithWait and WithTTL set them per route; a per-request value wins over
// them (see Option): WithTTLFunc, or core.ContextWithTTL and
// core.ContextWithWait set on the request context by an earlier middleware.
// The wait bounds the waiting for another holder, not a Redis call, which
// ends at the Locker's I/O timeout.
//
// # Where it goes
//
// Put it on the routes (or route groups) it locks, after the middleware that
// authenticates or rate-limits and before the handler. gin has routed the
// request before any middleware runs, so c.FullPath() and c.Param are known
// even in r.Use.
//
// Bound the request body BEFORE the lock: the lock is held from this
// middleware until the handler returns, so a handler that reads the body
// after it holds the lock for as long as the client takes to send it (a
// client trickling a few bytes holds it for the whole TTL), and for as much
// as it sends. Before it:
//
//   - the server's timeouts: http.Server's ReadHeaderTimeout and ReadTimeout
//     (which covers the body), WriteTimeout and IdleTimeout;
//   - a body limit: http.MaxBytesReader on c.Request.Body (gin has no limit
//     of its own) in a middleware before this one;
//   - best, a middleware before this one that reads the whole (limited)
//     body, answers 413 or 408 when it is too large or too slow, and puts
//     the bytes back, so that the lock is never taken before the body is
//     complete;
//   - a budget per request (context.WithTimeout on c.Request) below the TTL,
//     or WithWatchdog on the Locker for handlers that cannot be bounded.
//
// The orders example (examples/orders) does all of the above:
//
//	r.POST("/orders/:id", readBody(64<<10), budget(2*time.Second), ginlock.New(locker, key), create)
//
// The middleware reads the body itself only for a {field.X} key: the JSON
// body, up to WithMaxBody (a larger one is answered 400), before it takes
// the lock, and it puts the body back, so middleware and handlers after it
// read the whole body as usual; middleware before it that reads the body must
// put it back too. WithMaxBody only bounds what it reads to find the field,
// not the time that takes, nor what the handler reads: that is the server's
// and the body limit's job.
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
// panic goes on to the recovery middleware); middleware before this one then
// finds its own request context again in c.Request.
//
// Stop when the context ends, and check it (or Lease(c).Done()) once more
// right before a write. No check covers a process frozen between the check
// and the write: with core.WithFencing, send Lease(c).Fence() with the write
// to a store that refuses a lower fence than it has accepted.
//
// # Reentrancy needs c.Request.Context(), not c
//
// Pass c.Request.Context() to the Locker and to service functions, not the
// *gin.Context itself:
//
//	lease, err := locker.Acquire(c.Request.Context(), "order:"+c.Param("id")) // nested, no Redis call
//
// A *gin.Context is a context.Context, but unless the engine has
// ContextWithFallback set it does not forward values (nor cancellation) of
// the request context: Acquire(c, name) does not find the middleware's
// lease, waits for the request's own lock and fails with core.ErrTimeout
// once its wait budget is spent.
//
// Reentrancy goes by context, not by goroutine: only code given the handler's
// context (or one derived from it) shares the lease. A goroutine started with
// context.Background(), or another request for the same name, waits like any
// other holder would.
//
// The route template (c.FullPath()) labels the acquire for telemetry
// (core.Route); lock names never do.
package ginlock
