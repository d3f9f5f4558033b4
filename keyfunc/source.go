package keyfunc

// Source is a request as an adapter exposes it to a Func. A method returns
// the raw (unescaped) value of a part, "" when the request lacks it, or an
// error when the part cannot be read; the Func turns "" into an error
// wrapping ErrMissing. HTTPSource is the implementation for HTTP requests,
// used by ginlock and httplock; grpclock has its own for gRPC calls.
type Source interface {
	// Route returns the route template or RPC method that matched the
	// request, such as "/orders/:id" or "/orders.v1.Orders/Pay".
	Route() string
	// Param returns the path parameter called name.
	Param(name string) (string, error)
	// Query returns the first value of the query parameter called name.
	Query(name string) (string, error)
	// Header returns the first value of an HTTP header or gRPC metadata key
	// (case-insensitive).
	Header(name string) (string, error)
	// Field returns a scalar field of the body by dotted path ("order.id"):
	// of the JSON body for HTTP, of the request message for gRPC. It
	// returns an error wrapping ErrUnreadable when the body cannot be read
	// or the field is not a scalar.
	Field(path string) (string, error)
}
