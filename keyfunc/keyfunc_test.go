package keyfunc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/keyfunc"
)

// fake is a Source backed by maps.
type fake struct {
	route                  string
	params, query, headers map[string]string
	fields                 map[string]string
	fieldErr               error
}

func (f fake) Route() string                   { return f.route }
func (f fake) Param(n string) (string, error)  { return f.params[n], nil }
func (f fake) Query(n string) (string, error)  { return f.query[n], nil }
func (f fake) Header(n string) (string, error) { return f.headers[n], nil }
func (f fake) Field(p string) (string, error)  { return f.fields[p], f.fieldErr }

var req = fake{
	route:   "/orders/:id",
	params:  map[string]string{"id": "42", "odd": "a:b%c{d} e"},
	query:   map[string]string{"page": "3"},
	headers: map[string]string{"X-Tenant": "acme"},
	fields:  map[string]string{"order.id": "7"},
}

func TestFuncs(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    keyfunc.Func
		want string
	}{
		{"route", keyfunc.Route(), "/orders/%3Aid"},
		{"param", keyfunc.Param("id"), "42"},
		{"escaped param", keyfunc.Param("odd"), "a%3Ab%25c%7Bd%7D%20e"},
		{"query", keyfunc.Query("page"), "3"},
		{"header", keyfunc.Header("X-Tenant"), "acme"},
		{"field", keyfunc.Field("order.id"), "7"},
		{"const unescaped", keyfunc.Const("orders:v1"), "orders:v1"},
		{"join", keyfunc.Join(keyfunc.Const("orders"), keyfunc.Param("id"), keyfunc.Header("X-Tenant")), "orders:42:acme"},
	} {
		got, err := tc.f(req)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestMissingPartsAreErrors(t *testing.T) {
	for _, tc := range []struct {
		f    keyfunc.Func
		part string
	}{
		{keyfunc.Param("nope"), `param "nope"`},
		{keyfunc.Query("nope"), `query "nope"`},
		{keyfunc.Header("X-Nope"), `header "X-Nope"`},
		{keyfunc.Field("order.nope"), `field "order.nope"`},
		{keyfunc.Route(), `route`},
		{keyfunc.Join(keyfunc.Const("orders"), keyfunc.Param("id"), keyfunc.Query("nope")), `query "nope"`},
	} {
		got, err := tc.f(fake{params: map[string]string{"id": "1"}})
		if !errors.Is(err, keyfunc.ErrMissing) || got != "" {
			t.Errorf("%s: got %q, %v; want an error wrapping ErrMissing", tc.part, got, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.part) {
			t.Errorf("error %q does not name the part %s", err, tc.part)
		}
	}
}

func TestSourceErrorsKeepTheirKind(t *testing.T) {
	_, err := keyfunc.Field("id")(fake{fieldErr: fmt.Errorf("%w: not JSON", keyfunc.ErrUnreadable)})
	if !errors.Is(err, keyfunc.ErrUnreadable) || errors.Is(err, keyfunc.ErrMissing) || !strings.Contains(err.Error(), `field "id"`) {
		t.Fatalf("got %v", err)
	}
}

func TestBadConstructorArguments(t *testing.T) {
	for _, f := range []keyfunc.Func{
		keyfunc.Param(""), keyfunc.Query(""), keyfunc.Header(""), keyfunc.Field(""),
		keyfunc.Field("a..b"), keyfunc.Const(""), keyfunc.Join(), keyfunc.Join(keyfunc.Const("a"), nil),
	} {
		if got, err := f(req); err == nil || got != "" || errors.Is(err, keyfunc.ErrMissing) {
			t.Errorf("got %q, %v; want a set-up error", got, err)
		}
	}
}

func TestJoinIsUnambiguous(t *testing.T) {
	k := keyfunc.Join(keyfunc.Param("a"), keyfunc.Param("b"))
	x, _ := k(fake{params: map[string]string{"a": "a:b", "b": "c"}})
	y, _ := k(fake{params: map[string]string{"a": "a", "b": "b:c"}})
	if x == y {
		t.Fatalf("a:b+c and a+b:c both give %q", x)
	}
}

func TestTemplate(t *testing.T) {
	k, err := keyfunc.Template("orders:{param.id}:{header.X-Tenant}|{query.page}={field.order.id},{route}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := k(req)
	if want := "orders:42:acme|3=7,/orders/%3Aid"; got != want || err != nil {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	if _, err := k(fake{params: map[string]string{"id": "1"}}); !errors.Is(err, keyfunc.ErrMissing) || !strings.Contains(err.Error(), `header "X-Tenant"`) {
		t.Fatalf("missing header: %v", err)
	}
	constant, err := keyfunc.Template("global")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := constant(req); got != "global" {
		t.Fatalf("constant template gave %q", got)
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ t, want string }{
		{"", "empty template"},
		{"orders:{param.id", "position 8: '{' is not closed"},
		{"orders:{param.{id}}", "position 8: '{' is not closed"},
		{"orders}", "position 7: '}' without a matching '{'"},
		{"orders:{params.id}", "position 8: unknown placeholder {params.id}"},
		{"orders:{param}", "position 8: placeholder {param} lacks a name"},
		{"orders:{param.}", "position 8: placeholder {param.} lacks a name"},
		{"{route.x}", "position 1: unknown placeholder"},
		{"x:{field.a..b}", "position 3: placeholder {field.a..b}: empty segment 2"},
		{"{param.a}{param.b}", "position 10: two placeholders must be separated"},
		{"{param.a}-{param.b}", "position 11: two placeholders must be separated"},
		{"o:{header.X Y}", "position 3: placeholder {header.X Y}: the name contains a space"},
	} {
		f, err := keyfunc.Template(tc.t)
		if f != nil || !errors.Is(err, keyfunc.ErrTemplate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Template(%q) = %v; want an ErrTemplate naming %q", tc.t, err, tc.want)
		}
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"plain-id_1.x~/é": "plain-id_1.x~/é",
		"a:b|c,d=e":       "a%3Ab%7Cc%2Cd%3De",
		"100%":            "100%25",
		"{x} y\n\x7f":     "%7Bx%7D%20y%0A%7F",
	} {
		if got := keyfunc.Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func newJSONRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders/42?page=3", strings.NewReader(body))
	r.Header.Set("X-Tenant", "acme")
	r.SetPathValue("id", "42")
	return r
}

func TestHTTPSource(t *testing.T) {
	body := `{"order":{"id":"A-1","n":12.50,"paid":true,"tags":["x"],"none":null}}`
	r := newJSONRequest(body)
	src := &keyfunc.HTTPSource{Request: r, Pattern: "POST /orders/{id}"}
	k, err := keyfunc.Template("{route}|{param.id}|{query.page}|{header.x-tenant}|{field.order.id}|{field.order.n}|{field.order.paid}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := k(src)
	if want := "POST%20/orders/%7Bid%7D|42|3|acme|A-1|12.5|true"; got != want || err != nil {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	for path, kind := range map[string]error{"order.tags": keyfunc.ErrUnreadable, "order": keyfunc.ErrUnreadable,
		"order.id.x": keyfunc.ErrUnreadable, "order.none": keyfunc.ErrMissing, "order.absent": keyfunc.ErrMissing, "other.id": keyfunc.ErrMissing} {
		if _, err := keyfunc.Field(path)(src); !errors.Is(err, kind) {
			t.Errorf("field %s: %v, want %v", path, err, kind)
		}
	}
	// The handler still reads the whole body.
	if b, err := io.ReadAll(r.Body); err != nil || string(b) != body {
		t.Fatalf("body after Field: %q, %v", b, err)
	}
}

func TestHTTPSourceBadBodies(t *testing.T) {
	for body, kind := range map[string]error{
		"":                  keyfunc.ErrMissing,
		"not json":          keyfunc.ErrUnreadable,
		`{"id":1} {"id":2}`: keyfunc.ErrUnreadable,
		`[1,2]`:             keyfunc.ErrUnreadable,
	} {
		r := newJSONRequest(body)
		if _, err := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: r}); !errors.Is(err, kind) {
			t.Errorf("body %q: %v, want %v", body, err, kind)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != body {
			t.Errorf("body %q not restored: %q", body, b)
		}
	}
}

func TestHTTPSourceMaxBody(t *testing.T) {
	body := `{"id":"1","pad":"` + strings.Repeat("x", 100) + `"}`
	r := newJSONRequest(body)
	_, err := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: r, MaxBody: 50})
	if !errors.Is(err, keyfunc.ErrUnreadable) || !strings.Contains(err.Error(), "larger than 50 bytes") {
		t.Fatalf("got %v", err)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != body {
		t.Fatalf("the handler lost the body beyond the limit: %q", b)
	}
}

func TestHTTPSourcePathParamFunc(t *testing.T) {
	src := &keyfunc.HTTPSource{Request: newJSONRequest(""), PathParam: func(n string) string { return "p-" + n }}
	if got, _ := keyfunc.Param("id")(src); got != "p-id" {
		t.Fatalf("got %q", got)
	}
}

// bound is what encoding/json, which request binding uses, gives a handler
// for the field id of body: ok false when it fails to decode.
func bound(body string) (v any, ok bool) {
	var in struct {
		ID any `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		return nil, false
	}
	return in.ID, true
}

// TestHTTPSourceFieldMatchesKeysLikeEncodingJSON: encoding/json binds a key
// to a field ignoring case, the last match winning. Field matches keys the
// same way, and refuses a body where several keys match: the lock would be
// taken on one value while the handler works on another.
func TestHTTPSourceFieldMatchesKeysLikeEncodingJSON(t *testing.T) {
	for body, want := range map[string]string{
		`{"ID":"2"}`:                 "2",
		`{"Id":"3"}`:                 "3",
		`{"other":"x","iD":"4"}`:     "4",
		`{"id":"1","id":"5"}`:        "5", // a repeated key: the last one, for Field and encoding/json alike
		`{"ids":"1"}`:                "",  // no key matches: missing
		`{"id":"1","ID":"2"}`:        "unreadable",
		`{"Id":"1","iD":"2","x":""}`: "unreadable",
	} {
		got, err := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(body)})
		switch {
		case want == "unreadable":
			if !errors.Is(err, keyfunc.ErrUnreadable) {
				t.Errorf("%s: %q, %v; want ErrUnreadable", body, got, err)
			}
		case want == "":
			if !errors.Is(err, keyfunc.ErrMissing) {
				t.Errorf("%s: %q, %v; want ErrMissing", body, got, err)
			}
		default:
			if v, _ := bound(body); err != nil || got != want || v != want {
				t.Errorf("%s: %q, %v; encoding/json binds %v; want %q", body, got, err, v, want)
			}
		}
	}
	// Folding is Unicode's, as in encoding/json: the Kelvin sign is a "k".
	var k struct {
		K string `json:"k"`
	}
	kelvin := `{"\u212A":"kelvin"}`
	_ = json.Unmarshal([]byte(kelvin), &k)
	if got, err := keyfunc.Field("k")(&keyfunc.HTTPSource{Request: newJSONRequest(kelvin)}); err != nil || got != k.K || got != "kelvin" {
		t.Errorf("Kelvin sign: %q, %v; encoding/json binds %q", got, err, k.K)
	}
	// Nested objects too.
	src := &keyfunc.HTTPSource{Request: newJSONRequest(`{"Order":{"ID":"A"}}`)}
	if got, err := keyfunc.Field("order.id")(src); err != nil || got != "A" {
		t.Errorf("nested: %q, %v", got, err)
	}
	src = &keyfunc.HTTPSource{Request: newJSONRequest(`{"order":{"id":"A"},"ORDER":{"id":"B"}}`)}
	if _, err := keyfunc.Field("order.id")(src); !errors.Is(err, keyfunc.ErrUnreadable) {
		t.Errorf("two objects matching order: %v", err)
	}
}

// TestHTTPSourceFieldNumbers: a number gives one name per value a handler
// can bind it to: 1, 1.0 and 1e0 are one order, as are -0 and 0.
func TestHTTPSourceFieldNumbers(t *testing.T) {
	for want, lits := range map[string][]string{
		"1":                     {"1", "1.0", "1e0", "10e-1", "1.00", "0.1e1", "1E+0"},
		"0":                     {"0", "-0", "0.0", "-0.0", "0e5", "1e-400"},
		"-7":                    {"-7", "-7.0", "-0.7e1"},
		"12.5":                  {"12.5", "12.50", "1.25e1"},
		"100000000000000000000": {"1e20", "100000000000000000000"},
		"1e+21":                 {"1e21", "1000000000000000000000"},
		"9007199254740992":      {"9007199254740992", "9007199254740993"}, // one float64: a handler binding float64 sees one order
		"1.5e-07":               {"0.00000015", "1.5e-7"},
	} {
		for _, lit := range lits {
			body := `{"id":` + lit + `}`
			got, err := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(body)})
			if err != nil || got != want {
				t.Errorf("%s: %q, %v; want %q", lit, got, err, want)
			}
		}
	}
	if _, err := keyfunc.Field("id")(&keyfunc.HTTPSource{Request: newJSONRequest(`{"id":1e400}`)}); !errors.Is(err, keyfunc.ErrUnreadable) {
		t.Errorf("1e400: %v, want ErrUnreadable", err)
	}
}

// TestJSONBody: a body held in memory gives the fields HTTPSource gives for
// the same body, parsed once, and is left as it was.
func TestJSONBody(t *testing.T) {
	body := []byte(`{"order":{"id":"A-1","n":12.50,"paid":true,"tags":["x"],"none":null},"ID":1,"id":2}`)
	src := &keyfunc.JSONBody{Body: body}
	for path, want := range map[string]string{"order.id": "A-1", "order.n": "12.5", "order.paid": "true", "order.none": "", "absent": ""} {
		if got, err := src.Field(path); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"order.tags", "order", "id"} {
		if _, err := src.Field(path); !errors.Is(err, keyfunc.ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", path, err)
		}
	}
	for b, want := range map[string]error{"": nil, " \n": nil, "not json": keyfunc.ErrUnreadable, `{"id":1} {}`: keyfunc.ErrUnreadable} {
		if got, err := (&keyfunc.JSONBody{Body: []byte(b)}).Field("id"); got != "" || !errors.Is(err, want) {
			t.Errorf("body %q: %q, %v; want %v", b, got, err, want)
		}
	}
	_, err := (&keyfunc.JSONBody{Body: body, MaxBody: 50}).Field("order.id")
	if !errors.Is(err, keyfunc.ErrUnreadable) || !strings.Contains(err.Error(), "larger than 50 bytes") {
		t.Fatalf("MaxBody: %v", err)
	}
	if got, err := (&keyfunc.JSONBody{Body: body, MaxBody: int64(len(body))}).Field("order.id"); err != nil || got != "A-1" {
		t.Fatalf("a body of exactly MaxBody: %q, %v", got, err)
	}
}
