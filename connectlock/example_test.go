package connectlock_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/connectlock"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// orders is a service (testsvc stands for your generated code) whose Do
// runs under the lock of its order.
type orders struct {
	testsvcconnect.UnimplementedTestHandler
}

func (orders) Do(ctx context.Context, req *connect.Request[testsvc.Request]) (*connect.Response[testsvc.Reply], error) {
	// ctx carries the lease: an Acquire of the same name with it (what a
	// service function would do) is reentrant.
	return connect.NewResponse(&testsvc.Reply{Lock: connectlock.LeaseFromContext(ctx).Name()}), nil
}

// Lock each order, named by a field of the request message, while its call
// runs.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, err := keyfunc.Template("order:{field.order.id}")
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(testsvcconnect.NewTestHandler(orders{},
		connect.WithInterceptors(connectlock.NewInterceptor(locker, key))))
	srv := httptest.NewServer(mux) // HTTP/1.1 serves unary calls
	defer srv.Close()

	api := testsvcconnect.NewTestClient(srv.Client(), srv.URL)
	resp, err := api.Do(context.Background(), connect.NewRequest(&testsvc.Request{Order: &testsvc.Order{Id: "42"}}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("paid under", resp.Msg.Lock)
	// Output: paid under order:42
}

// reads is a service whose Do reports how its call holds the order's name.
type reads struct {
	testsvcconnect.UnimplementedTestHandler
}

func (reads) Do(ctx context.Context, req *connect.Request[testsvc.Request]) (*connect.Response[testsvc.Reply], error) {
	return connect.NewResponse(&testsvc.Reply{Lock: connectlock.LeaseFromContext(ctx).Mode().String()}), nil
}

// Reads share, writes exclude: calls of the read procedures take the
// order's name shared and run together; the other procedures' calls take
// it alone.
func ExampleWithSharedMethods() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, _ := keyfunc.Template("order:{field.order.id}")
	mux := http.NewServeMux()
	mux.Handle(testsvcconnect.NewTestHandler(reads{}, connect.WithInterceptors(
		connectlock.NewInterceptor(locker, key, connectlock.WithSharedMethods(testsvcconnect.TestDoProcedure)))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	api := testsvcconnect.NewTestClient(srv.Client(), srv.URL)
	resp, err := api.Do(context.Background(), connect.NewRequest(&testsvc.Request{Order: &testsvc.Order{Id: "42"}}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Do holds the order", resp.Msg.Lock)
	// Output: Do holds the order shared
}
