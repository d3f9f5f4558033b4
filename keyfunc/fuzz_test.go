package keyfunc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
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

// Fields gives an array of one item, so that a template with "[*]" is a
// plain Func too.
func (s *seq) Fields(string) ([]string, error) { return []string{s.next()}, nil }

// FuzzTemplate parses any template: it either fails with ErrTemplate, or
// gives a Func that is injective: two requests whose values differ never get
// the same name.
func FuzzTemplate(f *testing.F) {
	for _, t := range []string{
		"orders:{param.id}:{header.X-Tenant}", "{route}|{field.order.id}", "{param.a}{param.b}",
		"x={query.q},y={query.r}", "{", "}", "a{b}c", "{param.a}%3A{param.b}", "{field.a..b}", "static",
		"{param.a} {param.b}", "%{param.a}%:%{param.b}%",
		"item:{field.items[*].id}", "{field.a[*]}:{field.b[*]}", "{field.a[*]}{field.b}", "{field.a[*].b[*]}",
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
		{`{"items":[{"id":1},{"id":"x"}]}`, "items[*].id", 0},
		{`{"a":{"ids":[1,null]}}`, "a.ids[*]", 0},
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
		l1, ferr1 := (&keyfunc.JSONBody{Body: body, MaxBody: max}).Fields(path)
		l2, ferr2 := (&keyfunc.HTTPSource{Request: httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)), MaxBody: max}).Fields(path)
		if !slices.Equal(l1, l2) || fmt.Sprint(ferr1) != fmt.Sprint(ferr2) {
			t.Fatalf("body %q, path %q, max %d: JSONBody's Fields gives %q, %v; HTTPSource's %q, %v", body, path, max, l1, ferr1, l2, ferr2)
		}
		if ferr1 != nil && !errors.Is(ferr1, keyfunc.ErrUnreadable) && !errors.Is(ferr1, keyfunc.ErrUnsupported) {
			t.Fatalf("body %q, path %q: unexpected error of Fields %v", body, path, ferr1)
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

// list is an ArraySource whose scalar parts are all "v" and whose array
// fields all have the items items.
type list struct{ items []string }

func (list) Route() string                     { return "v" }
func (list) Param(string) (string, error)      { return "v", nil }
func (list) Query(string) (string, error)      { return "v", nil }
func (list) Header(string) (string, error)     { return "v", nil }
func (list) Field(string) (string, error)      { return "v", nil }
func (l list) Fields(string) ([]string, error) { return l.items, nil }

// expanding matches the placeholders of a template that expand an array.
var expanding = regexp.MustCompile(`\{field\.[^{}]*\[\*\][^{}]*\}`)

// FuzzNames derives the names of any template with array placeholders
// ({field.items[*].id}) from any items: with k such placeholders and d
// distinct items, a key yields d^k names (one per combination of items:
// no two combinations share a name, no combination is lost), without
// repeats, the first of them the plain Func's name of the first item, and
// within the bound; an empty item or no items is ErrMissing, and more
// combinations than the bound are ErrTooMany.
func FuzzNames(f *testing.F) {
	for _, seed := range []struct {
		tmpl, items string
		max         int8
	}{
		{"item:{field.items[*].id}", "a\nb\nc", 0},
		{"{field.a[*]}:{field.b[*]}", "1\n2\n1", 0},
		{"{field.a[*]}:{field.b[*]}", "1\n2\n3", 8},
		{"x:{param.id}|{field.ids[*]}", "a:b\na\nb", 2},
		{"x:{param.id}", "", 0},
		{"{field.a[*]}", "", 0},
		{"{field.a[*]}", "a\n\nb", 0},
		{"a[*]:{field.x[*]}", "%\n%25", 1},
		{"{field.a[*]},{field.b[*]},{field.c[*]},{field.d[*]}", "1\n2\n3", 0},
	} {
		f.Add(seed.tmpl, seed.items, seed.max)
	}
	f.Fuzz(func(t *testing.T, tmpl, raw string, max8 int8) {
		k, err := keyfunc.Template(tmpl)
		if err != nil {
			return
		}
		max := int(max8)
		if max <= 0 {
			max = keyfunc.DefaultMaxNames
		}
		items := strings.Split(raw, "\n")
		names, err := k.Names(list{items}, int(max8))
		expansions := len(expanding.FindAllString(tmpl, -1))
		if expansions == 0 {
			plain, perr := k(list{items})
			if err != nil || perr != nil || len(names) != 1 || names[0] != plain {
				t.Fatalf("%q: Names %q, %v; plain %q, %v", tmpl, names, err, plain, perr)
			}
			return
		}
		combinations, distinct := 1, map[string]bool{}
		for _, it := range items {
			distinct[it] = true
		}
		for range expansions {
			combinations = min(combinations*len(items), max+1)
		}
		switch {
		case distinct[""]:
			if !errors.Is(err, keyfunc.ErrMissing) {
				t.Fatalf("%q with items %q: %q, %v; want ErrMissing", tmpl, items, names, err)
			}
			return
		case combinations > max:
			if !errors.Is(err, keyfunc.ErrTooMany) {
				t.Fatalf("%q with items %q, max %d: %d names, %v; want ErrTooMany", tmpl, items, max, len(names), err)
			}
			return
		case err != nil:
			t.Fatalf("%q with items %q: %v", tmpl, items, err)
		}
		want := 1
		for range expansions {
			want *= len(distinct)
		}
		if len(names) != want || len(names) > max {
			t.Fatalf("%q with items %q (%d distinct): %d names %q, want %d", tmpl, items, len(distinct), len(names), names, want)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Fatalf("%q with items %q: %q twice in %q", tmpl, items, n, names)
			}
			seen[n] = true
		}
		if first, err := k(list{items[:1]}); err != nil || first != names[0] {
			t.Fatalf("%q: the first name %q, but the plain Func gives %q, %v for the first item", tmpl, names[0], first, err)
		}
	})
}

// FuzzHTTPFields checks Fields against encoding/json, which binds the body
// for the handler: for a body it reads, every item of "items" is named as
// Field names the same value alone ({"id": v}), and an item bound to
// nothing or "" is empty; a body that encoding/json cannot bind (but a
// blank one, which has no items) is refused.
func FuzzHTTPFields(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"id":1},{"ID":"a"},{"id":1.50}]}`,
		`{"items":[{"id":null},{}]}`,
		`{"items":[null,{"id":2}]}`,
		`{"items":[]}`,
		`{"items":null}`,
		`{"Items":[{"id":true}],"items":[]}`,
		`{"items":[1]}`,
		`{"items":{"id":1}}`,
		`{"items":[{"id":[1]}]}`,
		`{"items":[{"id":1e400}]}`,
		`[{"items":[]}]`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		items, err := (&keyfunc.HTTPSource{Request: newJSONRequest(body)}).Fields("items[*].id")
		var in struct {
			Items []struct {
				ID any `json:"id"`
			} `json:"items"`
		}
		bindErr := json.Unmarshal([]byte(body), &in)
		if err != nil {
			if !errors.Is(err, keyfunc.ErrUnreadable) {
				t.Fatalf("%q: %v, not ErrUnreadable", body, err)
			}
			return
		}
		if bindErr != nil {
			if strings.TrimSpace(body) != "" {
				t.Fatalf("%q: items %q, but encoding/json cannot bind it: %v", body, items, bindErr)
			}
			return
		}
		if len(items) != len(in.Items) {
			t.Fatalf("%q: items %q, but encoding/json binds %d", body, items, len(in.Items))
		}
		for i, it := range in.Items {
			if !scalar(it.ID) && it.ID != nil {
				t.Fatalf("%q: item %d is %q, but encoding/json binds %#v", body, i, items[i], it.ID)
			}
			alone, _ := json.Marshal(map[string]any{"id": it.ID})
			want, werr := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(string(alone))})
			if errors.Is(werr, keyfunc.ErrMissing) {
				want, werr = "", nil
			}
			if werr != nil || keyfunc.Escape(items[i]) != want { // Fields gives raw values, Field escaped ones
				t.Fatalf("%q: item %d is %q, but %s gives %q, %v", body, i, items[i], alone, want, werr)
			}
		}
	})
}
