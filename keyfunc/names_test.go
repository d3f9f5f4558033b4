package keyfunc_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/keyfunc"
)

// names runs k.Names on the JSON body and the path parameters params
// ("from", "a", "to", "b").
func names(t *testing.T, k keyfunc.Func, body string, max int, params ...string) ([]string, error) {
	t.Helper()
	r := newJSONRequest(body)
	for i := 0; i+1 < len(params); i += 2 {
		r.SetPathValue(params[i], params[i+1])
	}
	return k.Names(&keyfunc.HTTPSource{Request: r}, max)
}

func mustTemplates(t *testing.T, ts ...string) keyfunc.Func {
	t.Helper()
	k, err := keyfunc.Templates(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    keyfunc.Func
		body   string
		params []string
		want   []string
	}{
		{"one name", keyfunc.Param("id"), "", nil, []string{"42"}},
		{"items", mustTemplates(t, "item:{field.items[*].id}"), `{"items":[{"id":"b"},{"id":2},{"ID":"a:b"}]}`, nil,
			[]string{"item:b", "item:2", "item:a%3Ab"}},
		{"scalars", mustTemplates(t, "item:{field.order.ids[*]}"), `{"order":{"ids":[3,1.0,"x"]}}`, nil, []string{"item:3", "item:1", "item:x"}},
		{"repeats collapse", mustTemplates(t, "item:{field.ids[*]}"), `{"ids":[1,"1",1.0,2]}`, nil, []string{"item:1", "item:2"}},
		{"transfer", mustTemplates(t, "order:{param.from}", "order:{param.to}"), "", []string{"from", "a", "to", "b"}, []string{"order:a", "order:b"}},
		{"transfer to itself", mustTemplates(t, "order:{param.from}", "order:{param.to}"), "", []string{"from", "a", "to", "a"}, []string{"order:a"}},
		{"combinations", mustTemplates(t, "{field.a[*]}:{field.b[*]}"), `{"a":[1,2],"b":["x","y"]}`, nil, []string{"1:x", "1:y", "2:x", "2:y"}},
		{"All of keys with arrays of their own", keyfunc.All(mustTemplates(t, "a:{field.a[*]}"), keyfunc.Const("c"), mustTemplates(t, "b:{field.b[*]}")),
			`{"a":[1,2,3],"b":["x"]}`, nil, []string{"a:1", "a:2", "a:3", "c", "b:x"}},
		{"nested All", keyfunc.All(keyfunc.All(keyfunc.Const("x"), keyfunc.Const("y")), keyfunc.Join(keyfunc.Const("z"), keyfunc.Field("n[*]"))),
			`{"n":[1,2]}`, nil, []string{"x", "y", "z:1", "z:2"}},
	} {
		got, err := names(t, tc.key, tc.body, 0, tc.params...)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestNamesErrors(t *testing.T) {
	items := mustTemplates(t, "item:{field.items[*].id}")
	for _, tc := range []struct {
		name string
		key  keyfunc.Func
		body string
		max  int
		want error
		text string
	}{
		{"no array", items, `{}`, 0, keyfunc.ErrMissing, `field "items[*].id": no items`},
		{"null array", items, `{"items":null}`, 0, keyfunc.ErrMissing, "no items"},
		{"empty array", items, `{"items":[]}`, 0, keyfunc.ErrMissing, "no items"},
		{"empty item", items, `{"items":[{"id":1},{"id":""}]}`, 0, keyfunc.ErrMissing, `field "items[*].id": item 1 is empty`},
		{"item without the field", items, `{"items":[{"id":1},{}]}`, 0, keyfunc.ErrMissing, "item 1 is empty"},
		{"not an array", items, `{"items":{"id":1}}`, 0, keyfunc.ErrUnreadable, "not an array"},
		{"item not an object", items, `{"items":[1]}`, 0, keyfunc.ErrUnreadable, "item 0"},
		{"item not a scalar", items, `{"items":[{"id":[1]}]}`, 0, keyfunc.ErrUnreadable, "item 0"},
		{"not JSON", items, `{`, 0, keyfunc.ErrUnreadable, "not JSON"},
		{"more items than the bound", items, `{"items":[{"id":1},{"id":2},{"id":3}]}`, 2, keyfunc.ErrTooMany, "more than 2 names"},
		{"more items than the default bound", items, `{"items":[` + strings.Repeat(`{"id":1},`, 64) + `{"id":2}]}`, 0, keyfunc.ErrTooMany, "more than 64 names"},
		{"more combinations than the bound", mustTemplates(t, "{field.a[*]}:{field.b[*]}"), `{"a":[1,2],"b":[1,2]}`, 3, keyfunc.ErrTooMany, "more than 3 names"},
		{"more keys than the bound", keyfunc.All(keyfunc.Const("a"), keyfunc.Const("b"), keyfunc.Const("c")), ``, 2, keyfunc.ErrTooMany, "more than 2"},
		{"a missing part of a second key", mustTemplates(t, "order:{param.id}", "order:{param.to}"), ``, 0, keyfunc.ErrMissing, `param "to"`},
	} {
		got, err := names(t, tc.key, tc.body, tc.max)
		if got != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %q, %v; want an error wrapping %v saying %q", tc.name, got, err, tc.want, tc.text)
		}
	}
}

// TestSeveralNamesAsAPlainFunc: a key that yields several names, called as a
// plain Func, gives its one name when it has one, and fails with
// ErrMultiple (a set-up mistake, not the client's) when it has more.
func TestSeveralNamesAsAPlainFunc(t *testing.T) {
	items := mustTemplates(t, "item:{field.ids[*]}")
	src := &keyfunc.HTTPSource{Request: newJSONRequest(`{"ids":[7]}`)}
	if got, err := items(src); err != nil || got != "item:7" {
		t.Errorf("one item: %q, %v", got, err)
	}
	src = &keyfunc.HTTPSource{Request: newJSONRequest(`{"ids":[7,8]}`)}
	if _, err := items(src); !errors.Is(err, keyfunc.ErrMultiple) || errors.Is(err, keyfunc.ErrMissing) || !strings.Contains(err.Error(), `2 items of field "ids[*]"`) {
		t.Errorf("two items: %v", err)
	}
	if _, err := keyfunc.All(keyfunc.Const("a"), keyfunc.Const("b"))(src); !errors.Is(err, keyfunc.ErrMultiple) {
		t.Errorf("All of two: %v", err)
	}
	if got, err := keyfunc.All(keyfunc.Const("a"))(src); err != nil || got != "a" {
		t.Errorf("All of one: %q, %v", got, err)
	}
}

// TestItemsNeedAnArraySource: a Source that cannot list an array's items
// makes a "[*]" key fail with ErrUnsupported, a set-up mistake.
func TestItemsNeedAnArraySource(t *testing.T) {
	_, err := keyfunc.Field("ids[*]").Names(req, 0)
	if !errors.Is(err, keyfunc.ErrUnsupported) || !strings.Contains(err.Error(), `field "ids[*]"`) {
		t.Fatalf("got %v", err)
	}
}

func TestArrayPathErrors(t *testing.T) {
	for path, want := range map[string]string{
		"a[*].b[*]": "more than one [*]",
		"a[*][*]":   "[*] twice",
		"[*]":       "must follow a field name",
		"a.[*]":     "must follow a field name",
		"a[*]b":     "must end the segment",
		"a[*]b[*]":  "[*] twice",
	} {
		_, err := keyfunc.Field(path)(req)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Field(%q): %v; want %q", path, err, want)
		}
		if _, err := keyfunc.Template("x:{field." + path + "}"); !errors.Is(err, keyfunc.ErrTemplate) || !strings.Contains(err.Error(), want) {
			t.Errorf("Template with %q: %v; want %q", path, err, want)
		}
	}
	for _, bad := range []keyfunc.Func{keyfunc.All(), keyfunc.All(keyfunc.Const("a"), nil)} {
		if _, err := bad.Names(req, 0); err == nil || errors.Is(err, keyfunc.ErrMissing) {
			t.Errorf("got %v; want a set-up error", err)
		}
	}
	if _, err := keyfunc.Templates(); !errors.Is(err, keyfunc.ErrTemplate) {
		t.Errorf("Templates(): %v", err)
	}
	if _, err := keyfunc.Templates("a:{param.x}", "b:{param.y"); !errors.Is(err, keyfunc.ErrTemplate) || !strings.Contains(err.Error(), "b:{param.y") {
		t.Errorf("Templates with a bad one: %v", err)
	}
}

// TestJSONBodyFields: a buffered body lists an array's items as a request's
// body does.
func TestJSONBodyFields(t *testing.T) {
	body := `{"items":[{"id":"A"},{"id":2.50},{"id":null}],"ids":[true]}`
	src := &keyfunc.HTTPSource{Request: newJSONRequest(body)}
	for _, path := range []string{"items[*].id", "ids[*]", "absent[*]", "items[*]"} {
		a, erra := (&keyfunc.JSONBody{Body: []byte(body)}).Fields(path)
		b, errb := src.Fields(path)
		if !slices.Equal(a, b) || fmt.Sprint(erra) != fmt.Sprint(errb) {
			t.Errorf("%s: JSONBody %q, %v; HTTPSource %q, %v", path, a, erra, b, errb)
		}
	}
	got, _ := src.Fields("items[*].id")
	if want := []string{"A", "2.5", ""}; !slices.Equal(got, want) {
		t.Errorf("items: %q, want %q", got, want)
	}
}

// ExampleTemplates: a transfer locks both of its orders.
func ExampleTemplates() {
	key, err := keyfunc.Templates("order:{param.from}", "order:{param.to}")
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("POST", "/transfer/7/3", nil)
	r.SetPathValue("from", "7")
	r.SetPathValue("to", "3")
	names, _ := key.Names(&keyfunc.HTTPSource{Request: r}, 0)
	fmt.Println(names)
	// Output: [order:7 order:3]
}

// A "[*]" path locks every item of an order at once.
func ExampleField_items() {
	key, _ := keyfunc.Template("item:{field.items[*].sku}")
	body := `{"items":[{"sku":"A-1","n":2},{"sku":"B-7","n":1}]}`
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	names, err := key.Names(&keyfunc.HTTPSource{Request: r}, 0)
	fmt.Println(names, err)
	// Output: [item:A-1 item:B-7] <nil>
}
