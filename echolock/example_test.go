package echolock_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echolock"
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
	e.POST("/orders/:id/pay", func(c echo.Context) error {
		// Pass c.Request().Context() on: it carries the lease, so this
		// Acquire (what a service function would do) is reentrant.
		ctx := c.Request().Context()
		lease, err := locker.Acquire(ctx, "order:"+c.Param("id"))
		if err != nil {
			return err
		}
		defer lease.Release(ctx)
		return c.String(http.StatusOK, "paid under "+echolock.Lease(c).Name())
	}, echolock.New(locker, key))

	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Body)
	// Output: 200 paid under order:42
}
