// Package echo5lock is reqlock's Echo v5 middleware
// (github.com/labstack/echo/v5): it derives a lock name from the request,
// takes the lock, calls the next handler and releases the lock, so that
// requests for one resource never run at once in the whole fleet. It is
// echolock (Echo v4) for Echo v5: the same options, behaviour and answers,
// with functions that take a *echo.Context, except that it tells a
// middleware registered with e.Pre (see Where it goes) and that it unescapes
// a path parameter only when Echo gave it escaped. The two can live in one
// build while a service migrates.
//
//	import (
//		"github.com/labstack/echo/v5"
//
//		"github.com/reqlock/reqlock/core"
//		"github.com/reqlock/reqlock/echo5lock"
//		"github.com/reqlock/reqlock/keyfunc"
//	)
//
//	locker := core.New(redisClient)
//	key, err := keyfunc.Template("order:{param.id}")
//	if err != nil {
//		log.Fatal(err)
//	}
//	e := echo.New()
//	e.POST("/orders/:id/pay", pay, echo5lock.New(locker, key))
//
// Key templates read the route template ({route}, from c.Path(), such as
// "/orders/:id/pay"), path parameters (c.Param), query parameters, headers
// and JSON body fields, as with every reqlock adapter (see keyfunc). A path
// parameter is named by its value unescaped once: Echo's default router
// gives c.Param as the path spells it, "a%3Ab" for /orders/a%3Ab, when the
// request's URL has a RawPath, and decoded otherwise ("%41" for
// /orders/%2541), and the lock of /orders/a:b must be the same as that of
// /orders/a%3Ab, but not that of /orders/A. With a router that decodes the
// values itself (echo.RouterConfig's UnescapePathParamValues or
// UseEscapedPathForMatching), a value holding a literal escape ("%41") in a
// request with a RawPath is decoded twice.
//
// # Where it goes
//
// Echo matches the route before it runs the middleware given to a route, to
// a group (e.Group("/orders", lock)) or to e.Use, so the route template and
// the path parameters are known in all three. Prefer a route or a group:
// with e.Use every request is locked, also one that matched no route (its
// 404 or 405 then waits for a lock, or is answered 400 when the key needs a
// path parameter; WithSkip can pass such requests on). So is a request
// under a group's prefix that matches none of its routes: Echo gives a group
// with middleware catch-all 404 routes (unless echo.Config's
// NoGroupAutoRegister404Routes is set).
//
// Not e.Pre: Echo runs it before routing, where the route and the path
// parameters are unknown. A key that reads {route} or a {param.X} there is a
// set-up mistake, answered 500 with ErrBeforeRouting's message ("echo5lock:
// the middleware runs before routing (registered with e.Pre?); register it
// with e.Use, a group or a route"), not 400 as a bad request. A key of
// headers, query parameters or body fields only works anywhere.
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
//   - 500 and ErrBeforeRouting's message, when the key reads the route or a
//     path parameter before routing (e.Pre, above);
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
// request for the same name, waits like any other holder would. Echo v5
// reuses its *echo.Context for later requests: keep the context or the
// lease, not c, past the handler's return.
//
// The lock is released when the next handler returns, also when it panics
// (the panic goes on to Echo's Recover middleware). An error the handler
// returns is returned to Echo, whose HTTPErrorHandler (func(c *echo.Context,
// err error)) writes it after the lock is released. Middleware before this
// one then finds its own request context again in c.Request(). The route
// template labels the acquire for telemetry (core.Route); lock names never
// do.
package echo5lock
