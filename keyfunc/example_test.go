package keyfunc_test

import (
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/reqlock/reqlock/keyfunc"
)

// A template is parsed once, at start-up; each request fills it.
func ExampleTemplate() {
	key, err := keyfunc.Template("orders:{param.id}:{header.X-Tenant}")
	if err != nil {
		panic(err) // a set-up mistake, with its position
	}
	r := httptest.NewRequest("POST", "/orders/42/pay", nil)
	r.SetPathValue("id", "42")
	r.Header.Set("X-Tenant", "acme")
	name, _ := key(&keyfunc.HTTPSource{Request: r})
	fmt.Println(name)

	r.Header.Del("X-Tenant")
	_, err = key(&keyfunc.HTTPSource{Request: r})
	fmt.Println(errors.Is(err, keyfunc.ErrMissing), err)
	// Output:
	// orders:42:acme
	// true keyfunc: missing key part: header "X-Tenant"
}

// Values are escaped, so that the parts of a name can always be told apart.
func ExampleJoin() {
	key := keyfunc.Join(keyfunc.Const("orders"), keyfunc.Query("id"), keyfunc.Query("tenant"))
	for _, target := range []string{"/?id=a:b&tenant=c", "/?id=a&tenant=b:c"} {
		name, _ := key(&keyfunc.HTTPSource{Request: httptest.NewRequest("GET", target, nil)})
		fmt.Println(name)
	}
	// Output:
	// orders:a%3Ab:c
	// orders:a:b%3Ac
}
