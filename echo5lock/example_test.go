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
