// Package keyfunc derives lock names from requests, independently of the
// framework that serves them.
//
// An adapter (ginlock, grpclock, httplock) exposes a request as a Source:
// its route, path parameters, query parameters, headers (gRPC metadata) and
// body fields (JSON body fields for HTTP, message fields for gRPC). A Func
// builds a lock name from a Source:
//
//	key := keyfunc.Join(keyfunc.Const("orders"), keyfunc.Param("id"), keyfunc.Header("X-Tenant"))
//
// or, equivalently, from a template parsed once at start-up:
//
//	key, err := keyfunc.Template("orders:{param.id}:{header.X-Tenant}")
//
// # Several names
//
// A request may touch several resources: a transfer between two orders, an
// order's items. A key may then yield several names, which the adapters
// take all at once, in one canonical order, with core.Locker.AcquireAll:
//
//	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
//	stock, _ := keyfunc.Template("item:{field.items[*].id}")
//
// All joins keys, and a field path with "[*]" names every item of a JSON
// array (or, where the RPC adapter's Source supports it, a repeated field).
// Func.Names derives the names, without repeats, and bounds them
// (DefaultMaxNames; more is an error wrapping ErrTooMany); an empty array
// or an empty item is missing, as an empty part is.
//
// # Missing parts
//
// A part that is absent or empty is an error wrapping ErrMissing that names
// the part (`keyfunc: missing key part: param "id"`), never a silently
// shorter name: two requests for different resources must not share a lock
// because one of them lacked an id. A body that cannot be read (not JSON, a
// field that is an object) is an error wrapping ErrUnreadable. Adapters
// answer both as the client's fault (HTTP 400, gRPC InvalidArgument).
//
// # JSON body fields
//
// A name must be taken from the value the handler will work on. HTTPSource
// therefore reads JSON keys as encoding/json binds them: ignoring case, and a
// body where two keys match one path segment ({"id":"1","ID":"2"}) is
// unreadable rather than locked under one of them. Numbers are named by
// value (1, 1.0 and 1e0 give "1"); see HTTPSource.Field. JSONBody does the
// same for a body that a framework has already buffered (Fiber's), for the
// Source of its adapter.
//
// # Escaping
//
// Values taken from a request are escaped with Escape before they enter a
// name: '%', the separators ':' '|' ',' '=', the braces '{' '}', spaces and
// control characters are percent-encoded. Constants and template text are
// used as they are. Join puts ':' between its parts, and Template requires a
// separator between two placeholders, so that a name is made of its parts in
// exactly one way: an id "a:b" with a tenant "c" never gives the name of an
// id "a" with a tenant "b:c".
package keyfunc
