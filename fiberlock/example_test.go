package fiberlock_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/fiberlock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Lock each order for the length of its pay request. The middleware goes
// on the route, before its handler: under app.Use the route's parameters
// are not known yet.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithWait(2*time.Second))

	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		log.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/orders/:id/pay", fiberlock.New(locker, key), func(c *fiber.Ctx) error {
		// Pass c.UserContext() on, not c.Context(): it carries the lease,
		// so this Acquire (what a service function would do) is reentrant.
		ctx := c.UserContext()
		lease, err := locker.Acquire(ctx, "order:"+c.Params("id"))
		if err != nil {
			return err
		}
		defer lease.Release(ctx)
		return c.SendString("paid under " + fiberlock.Lease(c).Name())
	})

	resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil), -1)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 paid under order:42
}

// Reads share, writes exclude: GET requests of an order hold its name
// shared and run together, a PUT holds it alone.
func ExampleWithSharedReads() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, _ := keyfunc.Template("order:{param.id}")
	lock := fiberlock.New(locker, key, fiberlock.WithSharedReads())
	mode := func(c *fiber.Ctx) error { return c.SendString(fiberlock.Lease(c).Mode().String()) }
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/orders/:id", lock, mode)
	app.Put("/orders/:id", lock, mode)

	for _, method := range []string{http.MethodGet, http.MethodPut} {
		resp, err := app.Test(httptest.NewRequest(method, "/orders/42", nil), -1)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(method, string(body))
	}
	// Output:
	// GET shared
	// PUT exclusive
}

// A key of two path parameters locks both orders of a transfer at once.
func ExampleNew_severalNames() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	transfer, _ := keyfunc.Templates("order:{param.from}", "order:{param.to}")
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/transfers/:from/:to", fiberlock.New(locker, transfer), func(c *fiber.Ctx) error {
		return c.SendString(fmt.Sprint(fiberlock.Lease(c).Names()))
	})

	resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/transfers/7/3", nil), -1)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 [order:3 order:7]
}
