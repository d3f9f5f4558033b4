// Package httplock is reqlock's middleware for plain net/http, and so for
// routers built on it (chi, gorilla/mux): it takes a lock named after the
// request, calls the next handler and releases the lock, so that requests
// for one resource never run at once anywhere in the fleet.
//
// # Where it goes
//
// After the router has matched the request, for a key that needs the route
// or a path parameter: they are known only then. With the Go 1.22 ServeMux
// (Request.Pattern, Request.PathValue), wrap the handlers you register, not
// the mux:
//
//	key, _ := keyfunc.Template("order:{param.id}")
//	lock := httplock.New(locker, key)
//	mux.Handle("POST /orders/{id}/pay", lock(pay))
//
// With chi, use r.With, or r.Use inside r.Route or r.Group; WithRoute and
// WithPathParam read chi's routing context:
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
// With gorilla/mux, which routes before it calls middleware, wrap a route's
// handler or use the Use of a (sub)router whose routes have the parameter:
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
// Placed before routing (a top-level chi r.Use, a wrapped ServeMux), a key
// that needs the route or a path parameter fails on every request, with a
// 500 whose message says where the middleware goes (ErrRouteUnknown). A
// key of headers, query parameters or body fields works anywhere.
//
// Bound the request body before the lock, which is held until the next
// handler returns: a body read after it holds the lock for as long as the
// client takes to send it. Set http.Server's timeouts, and wrap this
// middleware in a handler that reads the whole body under
// http.MaxBytesReader and puts the bytes back; give the request a budget
// below the TTL (context.WithTimeout), or turn on core.WithWatchdog:
//
//	mux.Handle("POST /orders/{id}", readBody(64<<10, budget(2*time.Second, lock(create))))
//
// # Key, TTL and wait
//
// The key is a keyfunc.Func of the route, path parameters, query, headers
// and JSON body fields (see keyfunc). For a {field.X} key the middleware
// reads the body, up to WithMaxBody, and puts it back for the next handler.
// WithTTL and WithWait set the lock's TTL and wait budget per route; a value
// set per request wins (see Option).
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
// Lease(r).Slot() (Curator's InterProcessSemaphoreV2, numbered): a hot item's stock
// split in n segments.
//
//	order := httplock.New(locker, key, httplock.WithSharedReads())
//	mux.Handle("GET /orders/{id}", order(show))
//	mux.Handle("PUT /orders/{id}", order(update))
//
//	stock, _ := keyfunc.Template("stock:{param.sku}")
//	sell := func(w http.ResponseWriter, r *http.Request) {
//		slot := httplock.Lease(r).Slot() // segment 0..4 of the item's stock
//		// ...
//	}
//	mux.Handle("POST /flash/{sku}", httplock.New(locker, stock, httplock.WithPermits(5))(http.HandlerFunc(sell)))
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
//	mux.Handle("POST /transfer/{from}/{to}", httplock.New(locker, transfer)(move))
//	items, _ := keyfunc.Template("item:{field.items[*].sku}") // each item of the body's array
//	mux.Handle("POST /orders", httplock.New(locker, items)(create))
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
// WithErrorHandler or WithBusyHandler writes the answer. New panics on a bad
// set-up; Check returns the error instead.
//
// # The handler's side
//
// The next handler gets a copy of the request whose context carries the
// lease (Lease(r)) and is cancelled, with a cause wrapping core.ErrNotHeld,
// when the lease is lost; the caller's request keeps its own context. With
// that context the Locker's Acquire of the same name is reentrant. The lock
// is released when the handler returns, also on a panic. Check the context
// (or Lease(r).Done()) right before a write; with core.WithFencing, send
// Lease(r).Fence() along with it.
//
// # Fail-open
//
// WithFailOpen (or WithFailOpenHook, which also sees the storage error)
// calls the next handler unlocked when the store is unavailable, and only
// then; Lease(r) is then nil.
package httplock
