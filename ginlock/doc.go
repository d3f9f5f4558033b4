// Package ginlock is reqlock's gin middleware: it takes a lock named after
// the request, runs the rest of the chain and releases the lock, so that
// requests for one resource never run at once anywhere in the fleet.
//
//	key, _ := keyfunc.Template("order:{param.id}")
//	r.POST("/orders/:id/pay", ginlock.New(locker, key), pay)
//
// # Where it goes
//
// On the routes or groups it locks, after authentication and rate limits,
// before the handler. gin routes a request before any middleware runs, so
// the route (c.FullPath()) and path parameters are known even in r.Use;
// there, though, it also locks requests that match no route.
//
// Bound the request body before the lock, which is held until the handler
// returns: a body read after it holds the lock for as long as the client
// takes to send it. Set http.Server's timeouts, and put a middleware before
// this one that reads the whole body under http.MaxBytesReader (gin has no
// limit of its own) and puts the bytes back; give the request a budget
// below the TTL (context.WithTimeout), or turn on core.WithWatchdog. The
// orders example (examples/orders) does so:
//
//	r.POST("/orders/:id", readBody(64<<10), budget(2*time.Second), ginlock.New(locker, key), create)
//
// # Key, TTL and wait
//
// The key is a keyfunc.Func of the route, path parameters, query, headers
// and JSON body fields (see keyfunc). For a {field.X} key the middleware
// reads the body, up to WithMaxBody, and puts it back for the handler to
// bind. WithTTL and WithWait set the lock's TTL and wait budget per route;
// a value set per request wins (see Option).
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
//	order := ginlock.New(locker, key, ginlock.WithSharedReads())
//	r.GET("/orders/:id", order, show)
//	r.PUT("/orders/:id", order, update)
//
//	stock, _ := keyfunc.Template("stock:{param.sku}")
//	r.POST("/flash/:sku", ginlock.New(locker, stock, ginlock.WithPermits(5)), func(c *gin.Context) {
//		sell(c, c.Param("sku"), ginlock.Lease(c).Slot()) // segment 0..4 of the item's stock
//	})
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
//	r.POST("/transfer/:from/:to", ginlock.New(locker, transfer), move)
//	items, _ := keyfunc.Template("item:{field.items[*].sku}") // each item of the body's array
//	r.POST("/orders", ginlock.New(locker, items), create)
//
// Every request of a name must agree on its mode: shared and permit holds
// of one name, or two different n, are refused (500, core.ErrModeMismatch);
// an exclusive request waits for the shared or permit holders. A Locker
// built with core.WithFair refuses WithShared and WithPermits.
//
// # Answers
//
// A request that cannot be locked is answered as core.Outcome documents
// (400, 409, 503, 499, 500), and its chain is aborted, also when
// WithErrorHandler or WithBusyHandler writes the answer. Every such error is
// attached with c.Error for logging middleware, and so are the storage error
// of a request served unlocked and a failed release. New panics on a bad
// set-up; Check returns the error instead.
//
// # The handler's side
//
// c.Request.Context() carries the lease (Lease(c)) and is cancelled, with a
// cause wrapping core.ErrNotHeld, when the lease is lost. Pass that context
// on, not c: a *gin.Context forwards the request context's values only
// with the engine's ContextWithFallback, so the Locker's Acquire of the same
// name with c waits for the request's own lock, while with the request
// context it is reentrant (a nested lease, no store call):
//
//	lease, err := locker.Acquire(c.Request.Context(), "order:"+c.Param("id"))
//
// The lock is released when the chain returns, also on a panic; middleware
// before this one then finds its own context again in c.Request.
// Check the context (or Lease(c).Done()) right before a write; with
// core.WithFencing, send Lease(c).Fence() along with it.
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error)
// serves a request unlocked when the store is unavailable, and only then;
// Lease(c) is then nil.
package ginlock
