// Package httplock is reqlock's middleware for plain net/http, and so for
// routers built on it (chi, gorilla/mux): it derives a lock name from the
// request, takes the lock, calls the next handler and releases the lock.
//
// The route is the Go 1.22 ServeMux pattern (Request.Pattern) and path
// parameters are Request.PathValue, which ServeMux sets before it calls the
// handler registered for the pattern: wrap the handlers you register, not
// the mux.
//
//	key, _ := keyfunc.Template("order:{param.id}")
//	lock := httplock.New(locker, key)
//	mux.Handle("POST /orders/{id}/pay", lock(pay))
//
// Routers that keep path parameters and route templates elsewhere (chi,
// gorilla/mux) pass them with WithPathParam and WithRoute; Request.Pattern
// is empty there.
//
// The answers are those of ginlock: 400 with a JSON error naming a missing or
// unreadable part, 409 with Retry-After when the name stayed busy, 503 when
// Redis is unavailable (unless WithFailOpen) or the request's deadline passed
// while waiting, 500 when the key Func fails otherwise, and a bare 499 when
// the client went away. WithErrorHandler and WithBusyHandler replace them;
// the next handler is never called after a failure, whatever they do. Only
// WithFailOpen (or WithFailOpenHook, which also reports the storage error)
// calls it unlocked, and only when Redis is unavailable.
//
// Set-up mistakes — an invalid option, a nil Locker or Func, a Locker whose
// Err is not nil — are not answered at all: New panics with an error listing
// them, at start-up. Check returns that error instead.
//
// WithWait and WithTTL set the wait budget and TTL per route; a per-request
// value wins over them (see Option): WithTTLFunc, or core.ContextWithTTL and
// core.ContextWithWait set on the request context by an earlier middleware.
// The wait bounds the waiting for another holder, not a Redis call, which
// ends at the Locker's I/O timeout.
//
// The next handler gets a copy of the request whose context carries the
// lease (Lease returns it), is cancelled when the lease is lost (cause
// wrapping core.ErrNotHeld), and makes the Locker's Acquire of the same name
// reentrant; the caller's request keeps its own context. Reentrancy goes by
// context, not by goroutine: only code given that context (or one derived
// from it) shares the lease. A JSON body read by keyfunc.Field is put back
// for the handler. The lock is released when the handler returns or panics.
// The route labels the acquire for telemetry (core.Route); lock names never
// do.
package httplock
