package keyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
// it is, a number as written in the body, a boolean as "true" or "false".
// An absent or null field gives "". An object or array, a body that is not
// JSON or is larger than MaxBody give an error wrapping ErrUnreadable.
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

type readCloser struct {
	io.Reader
	io.Closer
}

// jsonField walks a decoded JSON value along a dotted path.
func jsonField(v any, path string) (string, error) {
	rest := path
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, ".")
		switch o := v.(type) {
		case nil:
			return "", nil
		case map[string]any:
			v = o[seg]
		default:
			return "", fmt.Errorf("%w: cannot take %q of a JSON %s", ErrUnreadable, seg, jsonKind(v))
		}
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	return "", fmt.Errorf("%w: field %q is a JSON %s, not a scalar", ErrUnreadable, path, jsonKind(v))
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
