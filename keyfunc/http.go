package keyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// DefaultMaxBody is the largest body HTTPSource reads to find a field.
const DefaultMaxBody = 1 << 20

// HTTPSource is the Source of an HTTP request, shared by the gin and
// net/http adapters and usable by adapters of other routers. Build one per
// request; it is not safe for concurrent use.
//
// Field reads the body once, parses it as JSON, and puts back a body that
// gives the handler the same bytes, so that the handler can still decode it.
type HTTPSource struct {
	// Request is the request the parts come from.
	Request *http.Request
	// Pattern is the route template that matched, such as "/orders/:id" for
	// gin or "POST /orders/{id}" for net/http.
	Pattern string
	// PathParam returns a path parameter; nil means Request.PathValue.
	PathParam func(name string) string
	// MaxBody bounds the body read by Field; 0 means DefaultMaxBody. A
	// larger body makes Field fail with ErrUnreadable (and is still given
	// whole to the handler).
	MaxBody int64

	parsed  bool
	body    any
	bodyErr error
}

// Route returns s.Pattern.
func (s *HTTPSource) Route() string { return s.Pattern }

// Param returns the path parameter called name.
func (s *HTTPSource) Param(name string) (string, error) {
	if s.PathParam != nil {
		return s.PathParam(name), nil
	}
	return s.Request.PathValue(name), nil
}

// Query returns the first value of the query parameter called name.
func (s *HTTPSource) Query(name string) (string, error) {
	return s.Request.URL.Query().Get(name), nil
}

// Header returns the first value of the header called name.
func (s *HTTPSource) Header(name string) (string, error) {
	return s.Request.Header.Get(name), nil
}

// Field returns a scalar field of the JSON body by dotted path: a string as
// it is, a number in a canonical form of its value (1, 1.0 and 1e0 all give
// "1"; see below), a boolean as "true" or "false". An absent or null field
// gives "". An object or array, a body that is not JSON or is larger than
// MaxBody give an error wrapping ErrUnreadable.
//
// Keys match a path segment ignoring case, as encoding/json binds them to
// struct fields; a body in which more than one key matches a segment
// ({"id":"1","ID":"2"}) is unreadable, since the handler would bind one
// value and the lock would be taken on another.
//
// Numbers are named by their float64 value, so that every literal a handler
// may bind to one value gives one name: integral values below 1e21 as
// integers ("1", "0" for -0), others in strconv's shortest 'g' form ("12.5",
// "1e+21"). Integers beyond 2^53 are rounded as float64 rounds them: nearby
// ones share a lock, as they share a float64; send large ids as strings. The
// number 1 and the string "1" give the same name too.
func (s *HTTPSource) Field(path string) (string, error) {
	if !s.parsed {
		s.parsed = true
		s.body, s.bodyErr = s.readBody()
	}
	if s.bodyErr != nil {
		return "", s.bodyErr
	}
	return jsonField(s.body, path)
}

// Fields returns the items of a JSON array field, for a path with one
// "[*]" segment ("items[*].id", "ids[*]"; see ArraySource): each item's
// value at the rest of the path, named as Field names a scalar, "" for an
// item where it is absent or null. An absent or null array gives none; a
// field that is not an array, an item that is not an object where the
// path goes on, or a value that is not a scalar is an error wrapping
// ErrUnreadable, as are the bodies Field refuses.
func (s *HTTPSource) Fields(path string) ([]string, error) {
	if !s.parsed {
		s.parsed = true
		s.body, s.bodyErr = s.readBody()
	}
	if s.bodyErr != nil {
		return nil, s.bodyErr
	}
	return jsonFields(s.body, path)
}

// readBody reads and parses the JSON body, and restores the request's body.
func (s *HTTPSource) readBody() (any, error) {
	r := s.Request
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := s.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	orig := r.Body
	r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), orig), orig}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %w", ErrUnreadable, err)
	}
	return parseBody(buf, limit)
}

// parseBody parses a JSON body of at most limit bytes (limit > 0); a blank
// body is no body (nil).
func parseBody(buf []byte, limit int64) (any, error) {
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("%w: the body is larger than %d bytes", ErrUnreadable, limit)
	}
	if len(bytes.TrimSpace(buf)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: the body is not JSON: %w", ErrUnreadable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: the body is not one JSON value", ErrUnreadable)
	}
	return v, nil
}

// JSONBody gives the fields of a JSON body held in memory, as HTTPSource's
// Field does for a request body it reads: for the Source of a framework that
// buffers the body itself, such as Fiber's (see fiberlock). Build one per
// request; it is not safe for concurrent use.
type JSONBody struct {
	// Body is the body; an empty or blank one has no fields (Field gives
	// ""). Field does not modify it.
	Body []byte
	// MaxBody bounds the body Field parses; 0 means DefaultMaxBody. A larger
	// body makes Field fail with ErrUnreadable.
	MaxBody int64

	parsed bool
	body   any
	err    error
}

// Field returns a scalar field of the body by dotted path, exactly as
// HTTPSource.Field does: a string as it is, a number in its canonical form,
// a boolean as "true" or "false", "" for an absent or null field, and an
// error wrapping ErrUnreadable for an object, an array, a body that is not
// one JSON value or is larger than MaxBody, or keys that match a segment
// more than once ignoring case. The body is parsed once, on the first call.
func (b *JSONBody) Field(path string) (string, error) {
	if !b.parsed {
		limit := b.MaxBody
		if limit <= 0 {
			limit = DefaultMaxBody
		}
		b.parsed = true
		b.body, b.err = parseBody(b.Body, limit)
	}
	if b.err != nil {
		return "", b.err
	}
	return jsonField(b.body, path)
}

// Fields returns the items of a JSON array field, exactly as
// HTTPSource.Fields does.
func (b *JSONBody) Fields(path string) ([]string, error) {
	if !b.parsed {
		limit := b.MaxBody
		if limit <= 0 {
			limit = DefaultMaxBody
		}
		b.parsed = true
		b.body, b.err = parseBody(b.Body, limit)
	}
	if b.err != nil {
		return nil, b.err
	}
	return jsonFields(b.body, path)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// jsonFields returns the items of the array that path, with one "[*]",
// names in v.
func jsonFields(v any, path string) ([]string, error) {
	array, rest, ok := splitArray(path)
	if !ok {
		return nil, fmt.Errorf("%w: the path %q has no %s", ErrUnsupported, path, arrayMark)
	}
	a, err := jsonWalk(v, array)
	if err != nil {
		return nil, err
	}
	switch x := a.(type) {
	case nil:
		return nil, nil
	case []any:
		items := make([]string, len(x))
		for i, item := range x {
			if items[i], err = jsonField(item, rest); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
		}
		return items, nil
	}
	return nil, fmt.Errorf("%w: field %q is a JSON %s, not an array", ErrUnreadable, array, jsonKind(a))
}

// jsonField walks a decoded JSON value along a dotted path, to a scalar.
func jsonField(v any, path string) (string, error) {
	v, err := jsonWalk(v, path)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return canonicalNumber(x)
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	return "", fmt.Errorf("%w: field %q is a JSON %s, not a scalar", ErrUnreadable, path, jsonKind(v))
}

// jsonWalk walks a decoded JSON value along a dotted path ("" is v): nil
// where the path ends at an absent or null value.
func jsonWalk(v any, path string) (any, error) {
	rest := path
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ".")
		switch o := v.(type) {
		case nil:
			return nil, nil
		case map[string]any:
			var err error
			if v, err = member(o, seg); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: cannot take %q of a JSON %s", ErrUnreadable, seg, jsonKind(v))
		}
	}
	return v, nil
}

// member returns the value of the key of o that matches name ignoring case,
// as encoding/json matches keys to struct fields (Unicode simple folding,
// like strings.EqualFold). More than one matching key is an error: the
// handler's binding would take the last one, whichever that is to it, and
// the lock must not be taken on another.
func member(o map[string]any, name string) (any, error) {
	var v any
	n := 0
	for k, x := range o {
		if strings.EqualFold(k, name) {
			v, n = x, n+1
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: %d keys match %q ignoring case, as JSON decoding matches them", ErrUnreadable, n, name)
	}
	return v, nil
}

// canonicalNumber returns the name of the float64 value of n (see Field).
// A number out of float64's range is unreadable.
func canonicalNumber(n json.Number) (string, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return "", fmt.Errorf("%w: the number %.40s is out of range", ErrUnreadable, n)
	}
	switch {
	case f == 0:
		return "0", nil // and -0
	case f == math.Trunc(f) && math.Abs(f) < 1e21:
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}
