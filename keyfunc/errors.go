package keyfunc

import "errors"

// Sentinel errors of name derivation; test for them with errors.Is.
var (
	// ErrMissing means a part of the name is absent or empty in the request.
	// The error wrapping it names the part, as in
	// `keyfunc: missing key part: header "X-Tenant"`.
	ErrMissing = errors.New("keyfunc: missing key part")

	// ErrUnreadable means a body field could not be read: the body is not
	// JSON or not a message, or the field is not a scalar.
	ErrUnreadable = errors.New("keyfunc: unreadable key part")

	// ErrTemplate means a template does not parse; the error names the
	// position.
	ErrTemplate = errors.New("keyfunc: invalid template")

	// ErrUnsupported means the Source cannot provide a kind of part at all,
	// such as a path parameter of a gRPC call: a set-up mistake rather than
	// a bad request.
	ErrUnsupported = errors.New("keyfunc: part not supported by this source")
)
