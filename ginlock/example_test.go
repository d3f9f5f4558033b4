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
