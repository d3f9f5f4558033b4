// Package fiber3lock is reqlock's Fiber v3 middleware
// (github.com/gofiber/fiber/v3): it takes a lock named after the request,
// runs the route's next handlers (c.Next) and releases the lock, so that
// requests for one resource never run at once anywhere in the fleet. It is
// fiberlock for Fiber v3, with the same options and answers, so that a
// service can move from one to the other route by route.
//
//	key, err := keyfunc.Template("order:{param.id}")
//	if err != nil {
//		log.Fatal(err)
//	}
//	app := fiber.New()
//	app.Post("/orders/:id/pay", fiber3lock.New(locker, key), pay)
//
// # Where it goes: on the route, not in app.Use
//
// Give the middleware to each route it locks, before the route's handler;
// one New serves many routes. Fiber runs the handlers of app.Use and of a
// group (app.Group("/orders", lock), Group.Use) as routes of their own,
// before the request's route matches: there c.Matched() is false,
// c.Route() is the middleware's route ("/" for app.Use), and only the
// parameters of its own prefix are known. A key that needs another
// parameter there fails on every request, with a 500 whose message says
// where the middleware goes (ErrRouteUnknown); a key of headers, query
// parameters or body fields works, but {route} names the middleware's route.
// On a route, a key that names a parameter the route does not have is
// answered 400, naming the route.
//
//	lock := fiber3lock.New(locker, key)
//	orders := app.Group("/orders")
//	orders.Post("/:id/pay", lock, pay)
//	orders.Post("/:id/cancel", lock, cancel)
//
// # Key, TTL and wait
//
// The key is a keyfunc.Func of the route (c.Route().Path), path parameters,
// query, headers and JSON body fields (see keyfunc). A path parameter is
// named by its value unescaped once, whatever fiber.Config's UnescapePath:
// the lock of /orders/a%3Ab is that of /orders/a:b. Values are copied, for
// Fiber reuses their memory once the handler returns. A {field.X} key reads
// the body Fiber has already buffered (up to its BodyLimit), decoded as
// c.Body decodes it and parsed up to WithMaxBody; the handler binds it as
// usual (c.Bind().Body). WithTTL and WithWait set the lock's TTL and wait
// budget per route; a value set per request on c.Context() (c.SetContext)
// wins (see Option).
//
// # Lock modes and several names
//
// By default a request holds its names alone. WithSharedReads makes GET and
// HEAD requests share the names while the other methods exclude them, the
// read-write lock of Redisson's RReadWriteLock and Curator's
// InterProcessReadWriteLock (a waiting writer goes first, so writers do not
// starve); WithShared makes a whole route shared, and WithSharedIf decides
// per request. WithPermits(n) lets up to n requests hold a name at once,
// each in its own slot (Lease(c).Slot(), 0 to n-1): a hot item's stock
// split in n segments (Curator's InterProcessSemaphoreV2).
//
//	lock := fiber3lock.New(locker, key, fiber3lock.WithSharedReads())
//	app.Get("/orders/:id", lock, show)
//	app.Put("/orders/:id", lock, update)
//	app.Post("/flash/:sku", fiber3lock.New(locker, sku, fiber3lock.WithPermits(5)), sell)
//
// A key may yield several names, which the middleware takes all at once
// with core.Locker.AcquireAll, all or none, in one canonical order (so that
// two requests that list the same names in different orders cannot
// deadlock): keyfunc.Templates gives one name per template, and a field
// path with "[*]" one per item of a JSON array; Lease(c).Names() lists
// them.
//
//	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
//	app.Post("/transfers/:from/:to", fiber3lock.New(locker, transfer), move)
//
// An empty array or item is answered 400, as a missing part is, and so is
// a key that yields more names than WithMaxNames allows (64 by default).
// Shared holds and permits need a store that is a core.Sharer (the Redis
// store is); every user of a name must agree on its mode and n, or the
// request is answered 500 (core.ErrModeMismatch).
//
// # Answers
//
// A request that cannot be locked is answered as core.Outcome documents
// (400, 409, 503, 499, 500), and the next handlers are not run. The
// middleware writes the answer itself and returns nil: it does not go
// through Fiber's ErrorHandler. An error the handlers return does, after the
// lock is released. WithErrorHandler and WithBusyHandler write the answer
// instead; they must not call c.Next, which would run the handlers unlocked.
// New panics on a bad set-up; Check returns the error instead.
//
// Fiber (fasthttp) does not tell a handler that its client went away: a
// request waits out its wait budget even when its client is gone. Only a
// context cancelled by a handler before this one (Fiber's timeout
// middleware, say) ends the wait early: 503 past its deadline, 499
// otherwise.
//
// # The handler's side: c.Context(), not c
//
// c.Context() carries the lease (Lease(c)) and is cancelled, with a cause
// wrapping core.ErrNotHeld, when the lease is lost. Pass it to the Locker
// and to service functions: the Locker's Acquire of the same name is then
// reentrant. Not c itself, though a fiber.Ctx is a context.Context, nor
// c.RequestCtx(): neither knows of the lease, and an Acquire of the
// request's own name with them waits for the request's own lock and fails
// with core.ErrTimeout. The lock is released when c.Next returns, also on a
// panic; handlers before this one then find their own context again in
// c.Context().
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error)
// runs the next handlers unlocked when the store is unavailable, and only
// then; Lease(c) is then nil.
package fiber3lock
