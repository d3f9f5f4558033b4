// Package echolock is reqlock's Echo middleware (github.com/labstack/echo/v4):
// it takes a lock named after the request, calls the next handler and
// releases the lock, so that requests for one resource never run at once
// anywhere in the fleet.
//
//	key, err := keyfunc.Template("order:{param.id}")
//	if err != nil {
//		log.Fatal(err)
//	}
//	e := echo.New()
//	e.POST("/orders/:id/pay", pay, echolock.New(locker, key))
//
// # Where it goes
//
// On a route or a group (e.Group("/orders", lock)). Echo routes a request
// before it runs these, and e.Use, so the route (c.Path()) and path
// parameters are known there; e.Use, though, also locks requests that match
// no route (a key that needs a path parameter answers their 404 with 400;
// WithSkip can pass them on).
//
// Not e.Pre: Echo runs it before routing. There a key that needs the route
// or a path parameter fails on every request that has a route, with a 500
// whose message says where the middleware goes (ErrBeforeRouting); a key of
// headers, query parameters or body fields works.
//
// # Key, TTL and wait
//
// The key is a keyfunc.Func of the route, path parameters, query, headers
// and JSON body fields (see keyfunc). A path parameter is named by its
// value unescaped once: Echo gives "a%3Ab" for /orders/a%3Ab, whose lock
// must be that of /orders/a:b, and a value already unescaped when the URL
// has no RawPath ("%41" for /orders/%2541), which stays as it is.
//
// For a {field.X} key the middleware reads the body, up to WithMaxBody, and
// puts it back for c.Bind; bounding the body is the server's job
// (http.Server's timeouts, Echo's BodyLimit middleware). WithTTL and
// WithWait set the lock's TTL and wait budget per route; a value set per
// request wins (see Option).
//
// # Lock modes and several names
//
// A route locks its names exclusively by default. WithSharedReads lets the
// GET and HEAD requests of a resource run together while a write waits for
// them and then runs alone (a read-write lock, as Redisson's
// RReadWriteLock and Curator's InterProcessReadWriteLock; a waiting write
// holds back new reads, so writes do not starve). WithShared makes every
// request of the route shared. WithPermits(n) lets n requests hold a name
// at once, each in its own slot, 0 to n-1, which the handler reads from
// Lease(c).Slot() (Curator's InterProcessSemaphoreV2, numbered): a hot item's stock
// split in n segments.
//
//	order := echolock.New(locker, key, echolock.WithSharedReads())
//	e.GET("/orders/:id", show, order)
//	e.PUT("/orders/:id", update, order)
//
//	stock, _ := keyfunc.Template("stock:{param.sku}")
//	e.POST("/flash/:sku", func(c echo.Context) error {
//		return sell(c, c.Param("sku"), echolock.Lease(c).Slot()) // segment 0..4 of the item's stock
//	}, echolock.New(locker, stock, echolock.WithPermits(5)))
//
// A key may yield several names (see keyfunc.Func.Names): the middleware
// takes them all or none, in one canonical order, with
// core.Locker.AcquireAll (Redisson's RedissonMultiLock, without its
// deadlock on crossing orders), so that two requests that list the same
// names in opposite orders never deadlock, and a request for any of the
// names waits. A key yields at most WithMaxNames names (64 by default);
// more, an empty array or an empty item is answered 400.
//
//	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
//	e.POST("/transfer/:from/:to", move, echolock.New(locker, transfer))
//	items, _ := keyfunc.Template("item:{field.items[*].sku}") // each item of the body's array
//	e.POST("/orders", create, echolock.New(locker, items))
//
// Every request of a name must agree on its mode: shared and permit holds
// of one name, or two different n, are refused (500, core.ErrModeMismatch);
// an exclusive request waits for the shared or permit holders. A Locker
// built with core.WithFair refuses WithShared and WithPermits.
//
// # Answers
//
// A request that cannot be locked is answered as core.Outcome documents
// (400, 409, 503, 499, 500), and the next handler is not called, also when
// WithErrorHandler or WithBusyHandler writes the answer. The middleware
// writes the answer itself and returns nil: it does not go through Echo's
// HTTPErrorHandler. An error the handler returns does, after the lock is
// released. New panics on a bad set-up; Check returns the error instead.
//
// # The handler's side
//
// c.Request().Context() carries the lease (Lease(c)) and is cancelled, with
// a cause wrapping core.ErrNotHeld, when the lease is lost. Pass it to the
// Locker and to service functions: the Locker's Acquire of the same name is
// then reentrant. The lock is released when the handler returns, also on a
// panic; middleware before this one then finds its own context again in
// c.Request().
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error)
// calls the next handler unlocked when the store is unavailable, and only
// then; Lease(c) is then nil.
package echolock
