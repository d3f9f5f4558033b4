package ginlock_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
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
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, key), func(c *gin.Context) {
		// Pass c.Request.Context() on, not c: it carries the lease, so this
		// Acquire (what a service function would do) is reentrant.
		ctx := c.Request.Context()
		lease, err := locker.Acquire(ctx, "order:"+c.Param("id"))
		if err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		defer lease.Release(ctx)
		c.String(http.StatusOK, "paid under %s", ginlock.Lease(c).Name())
	})

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Body)
	// Output: 200 paid under order:42
}

// Reads of an order share its lock and writes take it alone; a transfer
// locks both of its orders; a flash sale lets 5 buyers in at once, each on
// a segment of the item's stock.
func Example_modes() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithWait(2*time.Second))

	show := func(c *gin.Context) { c.String(http.StatusOK, "%s %v", c.Request.Method, ginlock.Lease(c).Mode()) }
	r := gin.New()
	key, _ := keyfunc.Template("order:{param.id}")
	order := ginlock.New(locker, key, ginlock.WithSharedReads())
	r.GET("/orders/:id", order, show)
	r.PUT("/orders/:id", order, show)

	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
	r.POST("/transfer/:from/:to", ginlock.New(locker, transfer), func(c *gin.Context) {
		c.String(http.StatusOK, "transfer under %v", ginlock.Lease(c).Names())
	})

	stock, _ := keyfunc.Template("stock:{param.sku}")
	r.POST("/flash/:sku", ginlock.New(locker, stock, ginlock.WithPermits(5)), func(c *gin.Context) {
		c.String(http.StatusOK, "sold from segment %d of 5", ginlock.Lease(c).Slot())
	})

	for _, req := range [][2]string{{"GET", "/orders/1"}, {"PUT", "/orders/1"}, {"POST", "/transfer/2/1"}, {"POST", "/flash/A-1"}} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(req[0], req[1], nil))
		fmt.Println(w.Code, w.Body)
	}
	// Output:
	// 200 GET shared
	// 200 PUT exclusive
	// 200 transfer under [order:1 order:2]
	// 200 sold from segment 0 of 5
}
