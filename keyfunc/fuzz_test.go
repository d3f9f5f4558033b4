package keyfunc_test

import (
	"errors"
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
