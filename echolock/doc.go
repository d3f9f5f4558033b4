// Package echolock is reqlock's Echo middleware (github.com/labstack/echo/v4):
// it derives a lock name from the request, takes the lock, calls the next
// handler and releases the lock, so that requests for one resource never
// run at once in the whole fleet.
//
//	import (
//		"github.com/labstack/echo/v4"
//
//		"github.com/reqlock/reqlock/core"
//		"github.com/reqlock/reqlock/echolock"
//		"github.com/reqlock/reqlock/keyfunc"
//	)
//
//	locker := core.New(redisClient)
//	key, err := keyfunc.Template("order:{param.id}")
//	if err != nil {
//		log.Fatal(err)
//	}
//	e := echo.New()
//	e.POST("/orders/:id/pay", pay, echolock.New(locker, key))
//
// Key templates read the route template ({route}, from c.Path(), such as
// "/orders/:id/pay"), path parameters (c.Param), query parameters, headers
// and JSON body fields, as with every reqlock adapter (see keyfunc). A path
// parameter is named by its unescaped value: Echo gives c.Param as the path
// spells it, "a%3Ab" for /orders/a%3Ab, and the lock of /orders/a:b must be
// the same.
//
// # Where it goes
//
// Echo matches the route before it runs the middleware given to a route, to
// a group (e.Group("/orders", lock)) or to e.Use, so the route template and
// the path parameters are known in all three. Prefer a route or a group:
// with e.Use every request is locked, also one that matched no route (its
// 404 or 405 then waits for a lock, or is answered 400 when the key needs a
// path parameter; WithSkip can pass such requests on). Not e.Pre: Echo runs
// it before routing, where the route and the path parameters are not known
// yet, so a {route} or {param.X} key fails on every request. That is the
// server's mistake, not the client's: it is answered 500 with a message that
// names it (ErrBeforeRouting), on the first request, since Echo gives no way
// to catch it at start-up. A key of headers, query parameters or body fields
// only works anywhere, e.Pre included.
//
// For a {field.X} key the middleware reads the JSON body itself, up to
// WithMaxBody, and puts it back, so the handler binds the whole body as
// usual (c.Bind); middleware before it that reads the body must put it back
// too. Bounding the time and size of a request body is the server's job
// (http.Server's ReadTimeout, Echo's BodyLimit middleware): WithMaxBody only
// bounds what the middleware reads to find the field.
//
// # Answers
//
// When the lock cannot be taken the next handler is not called, and the
// middleware writes:
//   - 400 and a JSON error naming the part ({"error": "..."}), when a key
//     part is missing or unreadable (keyfunc.ErrMissing,
//     keyfunc.ErrUnreadable);
//   - 409 with Retry-After, when the name stayed busy for the whole wait
//     budget (core.ErrTimeout; WithBusyHandler to change it);
//   - 503, when Redis is unavailable (core.ErrStorage), unless WithFailOpen;
//     also when the request's own deadline passed while waiting;
//   - 499 without a body, when the client went away (its request context
//     was cancelled);
//   - 500 and a JSON error naming the mistake, when the key needs the route
//     or a path parameter and the middleware runs before routing (e.Pre;
//     ErrBeforeRouting);
//   - 500, when the key Func fails otherwise (keyfunc reports a bad argument,
//     such as keyfunc.Param(""), through the Func it returns).
//
// These are written directly and the middleware returns nil: they do not go
// through Echo's HTTPErrorHandler. WithErrorHandler and WithBusyHandler
// replace them; the next handler is not called whatever they do. Only
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
// The handler's request context, c.Request().Context(), carries the lease —
// Lease(c) returns it — and is cancelled when the lease is lost, its cause
// then wrapping core.ErrNotHeld. Pass that context to the Locker and to
// service functions: the Locker's Acquire of the same name is then
// reentrant (a nested lease, no Redis call). Reentrancy goes by context, not
// by goroutine: a goroutine started with context.Background(), or another
// request for the same name, waits like any other holder would.
//
// The lock is released when the next handler returns, also when it panics
// (the panic goes on to Echo's Recover middleware). An error the handler
// returns is returned to Echo, whose HTTPErrorHandler writes it after the
// lock is released. Middleware before this one then finds its own request
// context again in c.Request(). The route template labels the acquire for
// telemetry (core.Route); lock names never do.
package echolock
