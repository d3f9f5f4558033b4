package keyfunc_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/keyfunc"
)

// seq is a Source that answers every lookup with the next of its values,
// cycling, and records what it gave.
type seq struct {
	vals []string
	gave []string
}

func (s *seq) next() string {
	v := s.vals[len(s.gave)%len(s.vals)]
	s.gave = append(s.gave, v)
	return v
}
func (s *seq) Route() string                 { return s.next() }
func (s *seq) Param(string) (string, error)  { return s.next(), nil }
func (s *seq) Query(string) (string, error)  { return s.next(), nil }
func (s *seq) Header(string) (string, error) { return s.next(), nil }
func (s *seq) Field(string) (string, error)  { return s.next(), nil }

// FuzzTemplate parses any template: it either fails with ErrTemplate, or
// gives a Func that is injective: two requests whose values differ never get
// the same name.
func FuzzTemplate(f *testing.F) {
	for _, t := range []string{
		"orders:{param.id}:{header.X-Tenant}", "{route}|{field.order.id}", "{param.a}{param.b}",
		"x={query.q},y={query.r}", "{", "}", "a{b}c", "{param.a}%3A{param.b}", "{field.a..b}", "static",
		"{param.a} {param.b}", "%{param.a}%:%{param.b}%",
	} {
		f.Add(t, "a:b", "c", "a", "b:c")
	}
	f.Fuzz(func(t *testing.T, tmpl, a1, a2, b1, b2 string) {
		k, err := keyfunc.Template(tmpl)
		if err != nil {
			if k != nil || !errors.Is(err, keyfunc.ErrTemplate) {
				t.Fatalf("Template(%q): func %v, error %v not wrapping ErrTemplate", tmpl, k != nil, err)
			}
			return
		}
		if a1 == "" || a2 == "" || b1 == "" || b2 == "" {
			return
		}
		sa, sb := &seq{vals: []string{a1, a2}}, &seq{vals: []string{b1, b2}}
		na, erra := k(sa)
		nb, errb := k(sb)
		if erra != nil || errb != nil {
			t.Fatalf("Template(%q) failed on non-empty values: %v, %v", tmpl, erra, errb)
		}
		if na == nb && strings.Join(sa.gave, "\x00") != strings.Join(sb.gave, "\x00") {
			t.Fatalf("Template(%q): values %q and %q both give the name %q", tmpl, sa.gave, sb.gave, na)
		}
	})
}

// FuzzEscapeJoin checks the escaping: it is injective, leaves no separator in
// a value, and makes Join injective over its parts.
func FuzzEscapeJoin(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Add("100%", "3A", "100%3A", "x")
	f.Add("{x}", "", "%7Bx%7D", "y")
	f.Add("é", "\x00", "\xc3", "\xa9")
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string) {
		e1, e2 := keyfunc.Escape(a1), keyfunc.Escape(a2)
		if (e1 == e2) != (a1 == a2) {
			t.Fatalf("Escape(%q) = %q, Escape(%q) = %q", a1, e1, a2, e2)
		}
		if strings.ContainsAny(e1, ":|,={} \n") {
			t.Fatalf("Escape(%q) = %q keeps a separator", a1, e1)
		}
		if a1 == "" || b1 == "" || a2 == "" || b2 == "" {
			return
		}
		k := keyfunc.Join(keyfunc.Const("p"), keyfunc.Query("a"), keyfunc.Query("b"))
		n1, _ := k(&seq{vals: []string{a1, b1}})
		n2, _ := k(&seq{vals: []string{a2, b2}})
		if (n1 == n2) != (a1 == a2 && b1 == b2) {
			t.Fatalf("Join: (%q, %q) gives %q, (%q, %q) gives %q", a1, b1, n1, a2, b2, n2)
		}
	})
}

// FuzzHTTPField checks Field against encoding/json, which binds the body for
// the handler: two bodies whose field id binds to the same value give the
// same name (else one order could be locked under two names), and Field
// finds the field missing exactly when it binds to nothing or "".
func FuzzHTTPField(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"id":1}`, `{"ID":1.0}`},
		{`{"id":"1","ID":"2"}`, `{"id":"2"}`},
		{`{"Id":-0}`, `{"iD":0e3}`},
		{`{"id":9007199254740993}`, `{"id":9007199254740992}`},
		{`{"id":12.50}`, `{"ID":1.25e1}`},
		{`{"id":true}`, `{"Id":"true"}`},
		{`{"id":null,"x":1}`, `{"ids":1}`},
		{`{"id":"1","id":"2"}`, `{"ID":"2"}`},
		{`{"id":1e400}`, `[1]`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, b1, b2 string) {
		n1, err1 := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(b1)})
		n2, err2 := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(b2)})
		v1, ok1 := bound(b1)
		v2, ok2 := bound(b2)
		for _, c := range []struct {
			body string
			err  error
			v    any
			ok   bool
		}{{b1, err1, v1, ok1}, {b2, err2, v2, ok2}} {
			if c.ok && errors.Is(c.err, keyfunc.ErrMissing) != (c.v == nil || c.v == "") {
				t.Fatalf("%q: Field error %v, but encoding/json binds %#v", c.body, c.err, c.v)
			}
		}
		if !ok1 || !ok2 || err1 != nil || err2 != nil || !scalar(v1) || !scalar(v2) {
			return
		}
		if v1 == v2 && n1 != n2 {
			t.Fatalf("%q and %q both bind %#v, but give the names %q and %q", b1, b2, v1, n1, n2)
		}
	})
}

// FuzzJSONBody checks JSONBody against HTTPSource, which reads the same
// bytes from a request: both give the same name or the same error for any
// body, path and limit, and the body is left as it was.
func FuzzJSONBody(f *testing.F) {
	for _, seed := range []struct {
		body, path string
		max        int64
	}{
		{`{"order":{"id":"A-1"}}`, "order.id", 0},
		{`{"id":1,"ID":2}`, "id", 0},
		{`{"id":12.50}`, "id", 0},
		{`{"a":{"b":[1]}}`, "a.b", 0},
		{`{"id":"x"} `, "id", 11},
		{`{"id":"x"}`, "id", 9},
		{"", "id", 0},
		{`{"id":1e400}`, "id.x", 0},
	} {
		f.Add([]byte(seed.body), seed.path, seed.max)
	}
	f.Fuzz(func(t *testing.T, body []byte, path string, max int64) {
		orig := string(body)
		n1, err1 := (&keyfunc.JSONBody{Body: body, MaxBody: max}).Field(path)
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		n2, err2 := (&keyfunc.HTTPSource{Request: r, MaxBody: max}).Field(path)
		if n1 != n2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("body %q, path %q, max %d: JSONBody gives %q, %v; HTTPSource %q, %v", body, path, max, n1, err1, n2, err2)
		}
		if err1 != nil && !errors.Is(err1, keyfunc.ErrUnreadable) {
			t.Fatalf("body %q, path %q: unexpected error %v", body, path, err1)
		}
		if string(body) != orig {
			t.Fatalf("the body changed: %q, was %q", body, orig)
		}
	})
}

// scalar reports a value that == can compare.
func scalar(v any) bool {
	switch v.(type) {
	case string, float64, bool:
		return true
	}
	return false
}
