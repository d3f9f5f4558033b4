package keyfunc

import (
	"errors"
	"fmt"
	"strings"
)

// Func derives a lock name from a request. It returns an error wrapping
// ErrMissing when a part is absent or empty, never a shorter name. The values
// it takes from the request are escaped (see Escape).
type Func func(Source) (string, error)

// value turns what a Source returned into an escaped part.
func value(kind, name, v string, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("%w (%s %q)", err, kind, name)
	}
	if v == "" {
		return "", fmt.Errorf("%w: %s %q", ErrMissing, kind, name)
	}
	return Escape(v), nil
}

// invalid returns a Func that fails with err: constructors cannot return
// errors, so a bad argument is reported by every call.
func invalid(err error) Func {
	return func(Source) (string, error) { return "", err }
}

// Route returns a Func giving the route template or RPC method that matched
// the request ("/orders/:id", "/orders.v1.Orders/Pay"), escaped.
func Route() Func {
	return func(s Source) (string, error) {
		return value("route", "", s.Route(), nil)
	}
}

// Param returns a Func giving the path parameter called name.
func Param(name string) Func {
	if name == "" {
		return invalid(errors.New("keyfunc: Param: empty parameter name"))
	}
	return func(s Source) (string, error) {
		v, err := s.Param(name)
		return value("param", name, v, err)
	}
}

// Query returns a Func giving the first value of the query parameter called
// name.
func Query(name string) Func {
	if name == "" {
		return invalid(errors.New("keyfunc: Query: empty parameter name"))
	}
	return func(s Source) (string, error) {
		v, err := s.Query(name)
		return value("query", name, v, err)
	}
}

// Header returns a Func giving the first value of the HTTP header, or gRPC
// metadata key, called name (case-insensitive).
func Header(name string) Func {
	if name == "" {
		return invalid(errors.New("keyfunc: Header: empty header name"))
	}
	return func(s Source) (string, error) {
		v, err := s.Header(name)
		return value("header", name, v, err)
	}
}

// Field returns a Func giving a scalar field of the request body by dotted
// path through nested objects or messages, such as "order.id": a JSON body
// field for HTTP (the body stays readable by the handler), a message field
// for gRPC (see grpclock for the kinds supported).
//
// A path whose segment ends in "[*]" names every item of an array field:
// "items[*].id" gives the id of each item of {"items":[{"id":1},{"id":2}]},
// "ids[*]" each item of {"ids":[1,2]}. Such a key yields one name per item
// (see Func.Names; the adapters lock them all with AcquireAll); an absent
// or empty array, or an item without the field, is an error wrapping
// ErrMissing. The Source must be an ArraySource. A path has at most one
// "[*]".
func Field(path string) Func {
	if err := checkPath(path); err != nil {
		return invalid(fmt.Errorf("keyfunc: Field(%q): %s", path, err))
	}
	if strings.Contains(path, arrayMark) {
		return items(path)
	}
	return func(s Source) (string, error) {
		v, err := s.Field(path)
		return value("field", path, v, err)
	}
}

// checkPath validates a dotted field path: non-empty segments without
// braces, at most one of them ending in "[*]" after a name.
func checkPath(path string) error {
	if path == "" {
		return errors.New("empty field path")
	}
	arrays := 0
	for i, seg := range strings.Split(path, ".") {
		if seg == "" {
			return fmt.Errorf("empty segment %d in the dotted path", i+1)
		}
		if strings.ContainsAny(seg, "{} ") {
			return fmt.Errorf("segment %q contains a brace or a space", seg)
		}
		if !strings.Contains(seg, arrayMark) {
			continue
		}
		arrays++
		switch name := strings.TrimSuffix(seg, arrayMark); {
		case len(name) == len(seg):
			return fmt.Errorf("segment %q: %s must end the segment", seg, arrayMark)
		case strings.Contains(name, arrayMark):
			return fmt.Errorf("segment %q has %s twice", seg, arrayMark)
		case name == "":
			return fmt.Errorf("segment %q: %s must follow a field name", seg, arrayMark)
		case arrays > 1:
			return fmt.Errorf("more than one %s in the path", arrayMark)
		}
	}
	return nil
}

// Const returns a Func giving s as it is, unescaped: a namespace such as
// "orders". s must not be empty.
func Const(s string) Func {
	if s == "" {
		return invalid(errors.New("keyfunc: Const: empty string"))
	}
	return func(Source) (string, error) { return s, nil }
}

// Join returns a Func giving the names of parts separated by ':', as in
// "orders:42:acme". It fails with the first part's error. Since values are
// escaped, a given Join builds each name from one set of values only.
func Join(parts ...Func) Func {
	if len(parts) == 0 {
		return invalid(errors.New("keyfunc: Join: no parts"))
	}
	for i, p := range parts {
		if p == nil {
			return invalid(fmt.Errorf("keyfunc: Join: part %d is nil", i))
		}
	}
	return func(s Source) (string, error) {
		var b strings.Builder
		for i, p := range parts {
			v, err := p(s)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte(':')
			}
			b.WriteString(v)
		}
		return b.String(), nil
	}
}
