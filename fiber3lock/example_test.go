package fiber3lock_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/fiber3lock"
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
	app := fiber.New()
	app.Post("/orders/:id/pay", fiber3lock.New(locker, key), func(c fiber.Ctx) error {
		// Pass c.Context() on, not c or c.RequestCtx(): it carries the lease,
		// so this Acquire (what a service function would do) is reentrant.
		ctx := c.Context()
		lease, err := locker.Acquire(ctx, "order:"+c.Params("id"))
		if err != nil {
			return err
		}
		defer lease.Release(ctx)
		return c.SendString("paid under " + fiber3lock.Lease(c).Name())
	})

	resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil), fiber.TestConfig{})
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 paid under order:42
}

// Given to app.Use, the middleware runs before the request's route is
// matched: a key that needs a path parameter is a set-up mistake, answered
// 500 with what to change, before any call to Redis.
func Example_misplaced() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		log.Fatal(err)
	}
	app := fiber.New()
	app.Use(fiber3lock.New(locker, key)) // wrong: app.Post("/orders/:id/pay", fiber3lock.New(locker, key), pay)
	app.Post("/orders/:id/pay", func(c fiber.Ctx) error { return c.SendString("paid") })

	resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil), fiber.TestConfig{})
	if err != nil {
		log.Fatal(err)
	}
	var answer struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	fmt.Println(resp.StatusCode)
	fmt.Println(answer.Error)
	// Output:
	// 500
	// fiber3lock: the middleware was registered with app.Use (or as a group's middleware), where Fiber runs it before the request's route and its path parameters are known; register it on the route instead: app.Post(path, fiber3lock.New(...), handler) (param "id")
}

// Reads share, writes exclude: GET requests of an order hold its name
// shared and run together, a PUT holds it alone.
func ExampleWithSharedReads() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, _ := keyfunc.Template("order:{param.id}")
	lock := fiber3lock.New(locker, key, fiber3lock.WithSharedReads())
	mode := func(c fiber.Ctx) error { return c.SendString(fiber3lock.Lease(c).Mode().String()) }
	app := fiber.New()
	app.Get("/orders/:id", lock, mode)
	app.Put("/orders/:id", lock, mode)

	for _, method := range []string{http.MethodGet, http.MethodPut} {
		resp, err := app.Test(httptest.NewRequest(method, "/orders/42", nil), fiber.TestConfig{})
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
	app := fiber.New()
	app.Post("/transfers/:from/:to", fiber3lock.New(locker, transfer), func(c fiber.Ctx) error {
		return c.SendString(fmt.Sprint(fiber3lock.Lease(c).Names()))
	})

	resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/transfers/7/3", nil), fiber.TestConfig{})
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 [order:3 order:7]
}
