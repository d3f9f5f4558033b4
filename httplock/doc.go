// Package httplock is reqlock's middleware for plain net/http, and so for
// routers built on it (chi, gorilla/mux): it derives a lock name from the
// request, takes the lock, calls the next handler and releases the lock.
//
// # Where it goes
//
// The middleware must run after the router has matched the request: the
// route template and the path parameters are known only then.
//
// With the Go 1.22 ServeMux, the route is Request.Pattern and path
// parameters are Request.PathValue, which ServeMux sets before it calls the
// handler registered for the pattern: wrap the handlers you register, not
// the mux.
//
//	key, _ := keyfunc.Template("order:{param.id}")
//	lock := httplock.New(locker, key)
//	mux.Handle("POST /orders/{id}/pay", lock(pay))
//
// With chi, use r.With (or r.Use inside r.Route or r.Group, which run once
// the pattern has matched), never a top-level r.Use: chi runs a top-level
// r.Use middleware before it routes, so the route and its parameters are not
// known yet there, and a key that needs them fails on every request. That is
// the server's mistake, so it is answered 500 with a message that names it
// (ErrRouteUnknown), not 400. It shows on the first request, not at
// start-up: chi gives the middleware the same place inside r.Route, where it
// is right. WithRoute and WithPathParam read chi's own routing context:
//
//	import (
//		"github.com/go-chi/chi/v5"
//		"github.com/reqlock/reqlock/httplock"
//	)
//
//	lock := httplock.New(locker, key,
//		httplock.WithRoute(func(r *http.Request) string { return chi.RouteContext(r.Context()).RoutePattern() }),
//		httplock.WithPathParam(chi.URLParam))
//	r := chi.NewRouter()
//	r.With(lock).Post("/orders/{id}/pay", pay)
//	// or: r.Route("/orders/{id}", func(r chi.Router) { r.Use(lock); r.Post("/pay", pay) })
//	// (the route label is then the pattern matched so far, "/orders/{id}/*")
//
// With gorilla/mux, which matches the route before it calls middleware,
// wrap a route's handler or use Router.Use (of a subrouter, for the routes
// that have the parameter):
//
//	import (
//		"github.com/gorilla/mux"
//		"github.com/reqlock/reqlock/httplock"
//	)
//
//	lock := httplock.New(locker, key,
//		httplock.WithRoute(func(r *http.Request) string { t, _ := mux.CurrentRoute(r).GetPathTemplate(); return t }),
//		httplock.WithPathParam(func(r *http.Request, name string) string { return mux.Vars(r)[name] }))
//	r := mux.NewRouter()
//	r.Handle("/orders/{id}/pay", lock(pay)).Methods(http.MethodPost)
//
// A key that uses neither {route} nor {param.X} (headers, query parameters,
// body fields) needs no routing, and works anywhere in the chain, chi's
// r.Use included.
//
// Bound the request body BEFORE the lock: the lock is held from this
// middleware until the next handler returns, so a handler that reads the
// body after it holds the lock for as long as the client takes to send it (a
// client trickling a few bytes holds it for the whole TTL), and for as much
// as it sends. Set http.Server's ReadHeaderTimeout, ReadTimeout (which
// covers the body), WriteTimeout and IdleTimeout; limit the body with
// http.MaxBytesReader in a handler that wraps this middleware; best, have
// that handler read the whole limited body, answer 413 or 408 when it is too
// large or too slow, and put the bytes back, so that the lock is never taken
// before the body is complete. Give each request a budget below the TTL
// (context.WithTimeout), or use WithWatchdog on the Locker for handlers that
// cannot be bounded.
//
//	mux.Handle("POST /orders/{id}", readBody(64<<10, budget(2*time.Second, lock(create))))
//
// The middleware reads the body itself only for a {field.X} key: the JSON
// body, up to WithMaxBody (a larger one is answered 400), before it takes
// the lock, and it puts the body back, so the next handler reads the whole
// body as usual; middleware before it that reads the body must put it back
// too. WithMaxBody only bounds what it reads to find the field, not the time
// that takes, nor what the handler reads: that is the server's and the body
// limit's job.
//
// # Answers
//
// The answers are those of ginlock: 400 with a JSON error naming a missing or
// unreadable part, 409 with Retry-After when the name stayed busy, 503 when
// Redis is unavailable (unless WithFailOpen) or the request's deadline passed
// while waiting, 500 when the key Func fails otherwise, and a bare 499 when
// the client went away. A key that needs the route or a path parameter in a
// middleware that runs before routing (see above) is answered 500 with a
// JSON error that says so (ErrRouteUnknown). WithErrorHandler and WithBusyHandler replace them;
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
// # The handler's side
//
// The next handler gets a copy of the request whose context carries the
// lease (Lease returns it), is cancelled when the lease is lost (cause
// wrapping core.ErrNotHeld), and makes the Locker's Acquire of the same name
// reentrant; the caller's request keeps its own context. Reentrancy goes by
// context, not by goroutine: only code given that context (or one derived
// from it) shares the lease. The lock is released when the handler returns
// or panics. Stop when the context ends, and check it (or Lease(r).Done())
// once more right before a write; with core.WithFencing, send Lease(r).Fence()
// with the write to a store that refuses a lower fence than it has accepted,
// which also covers a process frozen between the check and the write. The
// route labels the acquire for telemetry (core.Route); lock names never do.
package httplock
