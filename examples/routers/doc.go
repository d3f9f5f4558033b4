// Package routers holds the tests of httplock's recipes for chi and
// gorilla/mux (see the httplock package documentation): the middleware on
// the real routers, its mutual exclusion, and the answer (500) that explains
// chi's r.Use pitfall. They live in the examples module so that the routers
// never enter the root module's dependencies.
package routers
