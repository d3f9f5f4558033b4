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
