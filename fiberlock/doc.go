// Package fiberlock is reqlock's Fiber middleware (github.com/gofiber/fiber/v2):
// it derives a lock name from the request, takes the lock, runs the route's
// next handlers (c.Next) and releases the lock, so that requests for one
// resource never run at once in the whole fleet.
//
//	import (
//		"github.com/gofiber/fiber/v2"
//
//		"github.com/reqlock/reqlock/core"
//		"github.com/reqlock/reqlock/fiberlock"
//		"github.com/reqlock/reqlock/keyfunc"
//	)
//
//	locker := core.New(redisClient)
//	key, err := keyfunc.Template("order:{param.id}")
//	if err != nil {
//		log.Fatal(err)
//	}
//	app := fiber.New()
//	app.Post("/orders/:id/pay", fiberlock.New(locker, key), pay)
//
// Key templates read the route template ({route}, c.Route().Path, such as
// "/orders/:id/pay"), path parameters (c.Params), query parameters, headers
// and JSON body fields, as with every reqlock adapter (see keyfunc). A path
// parameter is named by its unescaped value: Fiber gives c.Params as the
// path spells it ("a%3Ab") unless fiber.Config's UnescapePath is set, and
// the lock of /orders/a:b must be the same.
//
// # Where it goes: on the route, not in app.Use
//
// Give the middleware to the route, before the route's handler, as above.
// Fiber runs the handlers of app.Use and of a group (app.Group("/orders",
// lock)) as routes of their own, before the route with the parameters
// matches: there c.Route() is the middleware's route ("/" for app.Use) and
// c.Params knows only the parameters of that route's own path. A key that
// needs a parameter the middleware's route does not have then fails on
// every request: that is the server's mistake, not the client's, answered
// 500 with an error saying where the middleware goes (ErrRouteUnknown). It
// shows on the first request, not at start-up: Fiber does not tell a
// handler where it is registered. {route} names the middleware's route
// there, not the request's. A key of headers, query parameters or body
// fields only works anywhere, app.Use included. To lock several routes,
// give each the middleware (one New serves many routes):
//
//	lock := fiberlock.New(locker, key)
//	orders := app.Group("/orders")
//	orders.Post("/:id/pay", lock, pay)
//	orders.Post("/:id/cancel", lock, cancel)
//
// A {field.X} key reads the body that Fiber has already read into memory,
// up to its BodyLimit (fiber.Config; 4 MiB by default, 413 beyond): nothing
// is consumed, and the handler parses the whole body as usual
// (c.BodyParser). WithMaxBody bounds the body parsed to find the field
// (default keyfunc.DefaultMaxBody): a larger one is answered 400.
//
// # Answers
//
// When the lock cannot be taken the next handlers are not run, and the
// middleware writes:
//   - 400 and a JSON error naming the part ({"error": "..."}), when a key
//     part is missing or unreadable (keyfunc.ErrMissing,
//     keyfunc.ErrUnreadable), also a path parameter that the route the
//     middleware is given to does not have;
//   - 409 with Retry-After, when the name stayed busy for the whole wait
//     budget (core.ErrTimeout; WithBusyHandler to change it);
//   - 503, when Redis is unavailable (core.ErrStorage), unless WithFailOpen;
//     also when the request's own deadline passed while waiting;
//   - 499 without a body, when the request context was cancelled while it
//     waited;
//   - 500 and a JSON error saying where the middleware goes, when the key
//     needs a path parameter and the middleware was given to app.Use or to
//     a group, whose route does not have it (ErrRouteUnknown);
//   - 500, when the key Func fails otherwise (keyfunc reports a bad argument,
//     such as keyfunc.Param(""), through the Func it returns).
//
// These are written directly and the middleware returns nil: they do not go
// through Fiber's ErrorHandler. WithErrorHandler and WithBusyHandler replace
// them; the next handlers are not run whatever they do, even if they call
// c.Next. Only WithFailOpen (or WithFailOpenHook, which also reports the
// storage error) runs them unlocked, and only when Redis is unavailable.
//
// Fiber (fasthttp) does not tell a handler that its client went away: a
// request waiting for a busy name waits out its wait budget even when its
// client is gone, and is answered 409 to nobody. Only a request context
// cancelled by a middleware before this one (its deadline passed, say) ends
// the wait early: 503 past a deadline, 499 otherwise.
//
// Set-up mistakes — an invalid option, a nil Locker or Func, a Locker whose
// Err is not nil — are not answered at all: New panics with an error listing
// them, at start-up. Check returns that error instead.
//
// WithWait and WithTTL set the wait budget and TTL per route; a per-request
// value wins over them (see Option): WithTTLFunc, or core.ContextWithTTL and
// core.ContextWithWait set on c.UserContext() by an earlier middleware. The
// wait bounds the waiting for another holder, not a Redis call, which ends
// at the Locker's I/O timeout.
//
// # The handler's side: c.UserContext(), not c.Context()
//
// Fiber's request context is c.UserContext(). While the handler runs, it
// carries the lease — Lease(c) returns it — and is cancelled when the lease
// is lost, its cause then wrapping core.ErrNotHeld. Pass it to the Locker
// and to service functions: the Locker's Acquire of the same name is then
// reentrant (a nested lease, no Redis call). Not c.Context(): that is
// fasthttp's *RequestCtx, a context.Context that knows nothing of the lease;
// an Acquire of the request's own name with it waits for the request's own
// lock and fails with core.ErrTimeout. Reentrancy goes by context, not by
// goroutine: a goroutine started with context.Background(), or another
// request for the same name, waits like any other holder would.
//
// The lock is released when c.Next returns, also when a handler panics (the
// panic goes on to Fiber's recover middleware). An error the handlers
// return is returned to Fiber, whose ErrorHandler writes it after the lock
// is released. Handlers before this one then find their own context again
// in c.UserContext(). The route template labels the acquire for telemetry
// (core.Route); lock names never do.
package fiberlock
