package adapter

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reqlock/reqlock/keyfunc"
)

// DefaultRequestIDHeader is the header (or gRPC metadata key) whose value
// the adapters record as the request id of a lock's holder
// (core.Holder.RequestID), unless WithRequestIDHeader names another.
const DefaultRequestIDHeader = "X-Request-Id"

// TraceparentHeader is the W3C Trace Context header whose trace-id is the
// request id of a request without the request id header.
const TraceparentHeader = "traceparent"

// MaxRequestID is the longest request id, in bytes, that the adapters pass
// to core: a longer header value is cut at a character boundary. The holder
// record bounds it again; this bound keeps a hostile header from costing
// more than that.
const MaxRequestID = 128

// SetRequestIDHeader is WithRequestIDHeader: the request id of a lock's
// holder (core.Holder.RequestID) is the value of the header or metadata key
// name when the request has one, else the trace-id of its W3C traceparent
// header. "" reads no request id header (the traceparent is still read);
// the default is DefaultRequestIDHeader. An id that an earlier middleware
// put on the context (core.ContextWithRequestID) wins over both. A name
// that is not an HTTP header field name (RFC 9110 §5.1: a token) is
// invalid.
func (c *Config[R]) SetRequestIDHeader(name string) {
	if name != "" && !isToken(name) {
		c.Invalid("WithRequestIDHeader(%q): not a valid header name", name)
	}
	c.reqIDHeader, c.reqIDHeaderSet = name, true
}

// requestIDHeader returns the header the request id is read from, "" for
// none.
func (c *Config[R]) requestIDHeader() string {
	if !c.reqIDHeaderSet {
		return DefaultRequestIDHeader
	}
	return c.reqIDHeader
}

// RequestID returns the request id of the request src gives: the value of
// its header (or metadata key) header, when header is not "" and the
// value is not empty once cleaned (CleanRequestID), else the trace-id of
// its traceparent header (TraceID), else "".
func RequestID(src keyfunc.Source, header string) string {
	if header != "" {
		if v, err := src.Header(header); err == nil {
			if id := CleanRequestID(v); id != "" {
				return id
			}
		}
	}
	if v, err := src.Header(TraceparentHeader); err == nil && v != "" {
		if id, ok := TraceID(v); ok {
			return id
		}
	}
	return ""
}

// CleanRequestID returns v without its surrounding white space, its
// characters that are not printable (unicode.IsPrint: control characters
// such as line breaks and ESC, format characters such as bidirectional
// overrides, separators other than the space) and invalid UTF-8, cut to at
// most MaxRequestID bytes at a character boundary. A request id ends up in
// a lock's token and in an operator's terminal: no line breaks or escape
// sequences from a client get there.
func CleanRequestID(v string) string {
	if clean(v) {
		return v
	}
	var b strings.Builder
	for _, r := range strings.TrimSpace(v) {
		switch {
		case r == utf8.RuneError, !unicode.IsPrint(r):
			continue
		case b.Len()+utf8.RuneLen(r) > MaxRequestID:
			return strings.TrimSpace(b.String())
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// clean reports whether v is already a clean request id: printable ASCII,
// no surrounding space, at most MaxRequestID bytes (the common case, which
// then costs no allocation).
func clean(v string) bool {
	if len(v) > MaxRequestID || v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// TraceID returns the trace-id of a W3C Trace Context traceparent header
// value (https://www.w3.org/TR/trace-context/#traceparent-header), as its
// 32 lowercase hex digits, and whether h is a valid traceparent:
//
//	version "-" trace-id "-" parent-id "-" trace-flags
//
// with a version of 2 lowercase hex digits other than "ff", a trace-id of
// 32 and a parent-id of 16 lowercase hex digits, neither all zeros, and
// trace-flags of 2. Version 00 is exactly 55 characters long; a later
// version may be longer, and then goes on with a "-" after the flags
// (§4.3, versioning: what a later version adds is ignored). The flags'
// bits are not checked: the trace-id is all that is read. Anything else is
// malformed, and the request has no trace id.
func TraceID(h string) (string, bool) {
	const size = 55 // 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(h) < size || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return "", false
	}
	version, traceID, parentID, flags := h[0:2], h[3:35], h[36:52], h[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) {
		return "", false
	}
	switch {
	case version == "00" && len(h) != size:
		return "", false
	case len(h) > size && h[size] != '-':
		return "", false
	case allZeros(traceID), allZeros(parentID):
		return "", false
	}
	return traceID, true
}

// lowerHex reports whether s is made of lowercase hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	return strings.Trim(s, "0") == ""
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// grammar of a header field name.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}
