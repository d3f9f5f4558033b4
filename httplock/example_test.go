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

// Reads of an order share its lock and writes take it alone; a transfer
// locks both of its orders; a flash sale lets 5 buyers in at once, each on
// a segment of the item's stock.
func Example_modes() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	mux := http.NewServeMux()
	show := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %v", r.Method, httplock.Lease(r).Mode())
	})
	key, _ := keyfunc.Template("order:{param.id}")
	order := httplock.New(locker, key, httplock.WithSharedReads())
	mux.Handle("GET /orders/{id}", order(show))
	mux.Handle("PUT /orders/{id}", order(show))

	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
	mux.Handle("POST /transfer/{from}/{to}", httplock.New(locker, transfer)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "transfer under %v", httplock.Lease(r).Names())
	})))

	stock, _ := keyfunc.Template("stock:{param.sku}")
	mux.Handle("POST /flash/{sku}", httplock.New(locker, stock, httplock.WithPermits(5))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "sold from segment %d of 5", httplock.Lease(r).Slot())
	})))

	for _, req := range [][2]string{{"GET", "/orders/1"}, {"PUT", "/orders/1"}, {"POST", "/transfer/2/1"}, {"POST", "/flash/A-1"}} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(req[0], req[1], nil))
		fmt.Println(w.Code, w.Body)
	}
	// Output:
	// 200 GET shared
	// 200 PUT exclusive
	// 200 transfer under [order:1 order:2]
	// 200 sold from segment 0 of 5
}
