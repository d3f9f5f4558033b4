package httplock_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Lock each order for the length of its pay request, on a Go 1.22 ServeMux.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		log.Fatal(err)
	}
	lock := httplock.New(locker, key)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "paid under %s", httplock.Lease(r).Name())
	})))

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Body)
	// Output: 200 paid under order:42
}
