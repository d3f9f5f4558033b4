package echo5lock_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echo5lock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Lock each order for the length of its pay request.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithWait(2*time.Second))

	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.POST("/orders/:id/pay", func(c *echo.Context) error {
		// Pass c.Request().Context() on: it carries the lease, so this
		// Acquire (what a service function would do) is reentrant.
		ctx := c.Request().Context()
		lease, err := locker.Acquire(ctx, "order:"+c.Param("id"))
		if err != nil {
			return err
		}
		defer lease.Release(ctx)
		return c.String(http.StatusOK, "paid under "+echo5lock.Lease(c).Name())
	}, echo5lock.New(locker, key))

	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Body)
	// Output: 200 paid under order:42
}

// Registered with e.Pre, the middleware runs before routing: a key that reads
// a path parameter there is a set-up mistake, answered 500 with a message
// that says where the middleware goes (and without a Redis call).
func Example_pre() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.Pre(echo5lock.New(locker, key)) // wrong: e.Use, a group or the route
	e.POST("/orders/:id/pay", func(c *echo.Context) error { return c.String(http.StatusOK, "paid") })

	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Print(w.Code, " ", w.Body)
	// Output: 500 {"error":"echo5lock: the middleware runs before routing (registered with e.Pre?); register it with e.Use, a group or a route"}
}

// Reads of an order share its lock and writes take it alone; a transfer
// locks both of its orders; a flash sale lets 5 buyers in at once, each on
// a segment of the item's stock.
func Example_modes() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithWait(2*time.Second))

	e := echo.New()
	show := func(c *echo.Context) error {
		return c.String(http.StatusOK, fmt.Sprintf("%s %v", c.Request().Method, echo5lock.Lease(c).Mode()))
	}
	key, _ := keyfunc.Template("order:{param.id}")
	order := echo5lock.New(locker, key, echo5lock.WithSharedReads())
	e.GET("/orders/:id", show, order)
	e.PUT("/orders/:id", show, order)

	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
	e.POST("/transfer/:from/:to", func(c *echo.Context) error {
		return c.String(http.StatusOK, fmt.Sprintf("transfer under %v", echo5lock.Lease(c).Names()))
	}, echo5lock.New(locker, transfer))

	stock, _ := keyfunc.Template("stock:{param.sku}")
	e.POST("/flash/:sku", func(c *echo.Context) error {
		return c.String(http.StatusOK, fmt.Sprintf("sold from segment %d of 5", echo5lock.Lease(c).Slot()))
	}, echo5lock.New(locker, stock, echo5lock.WithPermits(5)))

	for _, req := range [][2]string{{"GET", "/orders/1"}, {"PUT", "/orders/1"}, {"POST", "/transfer/2/1"}, {"POST", "/flash/A-1"}} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(req[0], req[1], nil))
		fmt.Println(w.Code, w.Body)
	}
	// Output:
	// 200 GET shared
	// 200 PUT exclusive
	// 200 transfer under [order:1 order:2]
	// 200 sold from segment 0 of 5
}
