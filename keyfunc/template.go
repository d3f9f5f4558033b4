package keyfunc

import (
	"fmt"
	"strings"
)

// Template parses t once and returns a Func that fills it from a request.
// Text outside braces is kept as it is; each placeholder is replaced by an
// escaped value:
//
//	{route}        the route template or RPC method
//	{param.NAME}   a path parameter
//	{query.NAME}   a query parameter
//	{header.NAME}  an HTTP header or gRPC metadata key
//	{field.PATH}   a body field by dotted path, such as {field.order.id}
//
// A field path with "[*]" names every item of an array (see Field):
// "order:{field.items[*].id}" yields one name per item, which the adapters
// lock all at once (see Func.Names); so does a template with several such
// placeholders, one name per combination of their items. Templates parses
// several templates into one key that yields a name for each, such as the
// two orders of a transfer.
//
// Two placeholders must be separated by text containing one of the
// separators ':' '|' ',' '=' (or a space), so that every name comes from one
// set of values only: "orders:{param.id}:{header.X-Tenant}" is valid,
// "{param.a}{param.b}" and "{param.a}-{param.b}" are not. Braces cannot
// appear in the text. Errors wrap ErrTemplate and give the 1-based byte
// position of the problem.
func Template(t string) (Func, error) {
	if t == "" {
		return nil, fmt.Errorf("%w: empty template", ErrTemplate)
	}
	var segs []segment
	lit, sepSince := strings.Builder{}, true // sepSince: a separator since the last placeholder
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '}':
			return nil, templateErr(t, i, "'}' without a matching '{'")
		case '{':
			end := strings.IndexAny(t[i+1:], "{}")
			if end < 0 || t[i+1+end] == '{' {
				return nil, templateErr(t, i, "'{' is not closed by '}'")
			}
			if !sepSince {
				return nil, templateErr(t, i, "two placeholders must be separated by text containing ':', '|', ',', '=' or a space")
			}
			f, err := placeholder(t[i+1 : i+1+end])
			if err != nil {
				return nil, templateErr(t, i, err.Error())
			}
			segs = append(segs, segment{lit: lit.String(), f: f})
			lit.Reset()
			sepSince = false
			i += 1 + end
		default:
			if separator(c) {
				sepSince = true
			}
			lit.WriteByte(c)
		}
	}
	tail := lit.String()
	if len(segs) == 1 && segs[0].lit == "" && tail == "" { // "{field.id}": the part is the name
		return segs[0].f, nil
	}
	size := len(tail)
	for _, seg := range segs {
		size += len(seg.lit)
	}
	return func(s Source) (string, error) {
		// The parts first, so that the name is built in one allocation
		// of its exact size.
		var buf [4]string
		vals, n := buf[:0], size
		for _, seg := range segs {
			v, err := seg.f(s)
			if err != nil {
				return "", err
			}
			vals = append(vals, v)
			n += len(v)
		}
		var b strings.Builder
		b.Grow(n)
		for i, seg := range segs {
			b.WriteString(seg.lit)
			b.WriteString(vals[i])
		}
		b.WriteString(tail)
		return b.String(), nil
	}, nil
}

// segment is template text followed by a placeholder.
type segment struct {
	lit string
	f   Func
}

func templateErr(t string, i int, msg string) error {
	return fmt.Errorf("%w %q: position %d: %s", ErrTemplate, t, i+1, msg)
}

// placeholder returns the Func of the text inside braces.
func placeholder(p string) (Func, error) {
	if p == "route" {
		return Route(), nil
	}
	kind, arg, _ := strings.Cut(p, ".")
	mk := map[string]func(string) Func{"param": Param, "query": Query, "header": Header, "field": Field}[kind]
	switch {
	case mk == nil:
		return nil, fmt.Errorf("unknown placeholder {%s}: want {route}, {param.NAME}, {query.NAME}, {header.NAME} or {field.PATH}", p)
	case arg == "":
		return nil, fmt.Errorf("placeholder {%s} lacks a name after %q", p, kind+".")
	case strings.ContainsAny(arg, " \t"):
		return nil, fmt.Errorf("placeholder {%s}: the name contains a space", p)
	case kind == "field":
		if err := checkPath(arg); err != nil {
			return nil, fmt.Errorf("placeholder {%s}: %s", p, err)
		}
	}
	return mk(arg), nil
}
