package kratoslock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/middleware/recovery"
	"github.com/go-kratos/kratos/v2/transport"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/kratoslock"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

// Lock each order, named by a field of the request message, on both of
// Kratos's transports.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, err := keyfunc.Template("order:{field.order.id}")
	if err != nil {
		log.Fatal(err)
	}
	lock := kratoslock.Server(locker, key)
	httpSrv := khttp.NewServer(khttp.Address(":8000"), khttp.Middleware(recovery.Recovery(), lock))
	grpcSrv := kgrpc.NewServer(kgrpc.Address(":9000"), kgrpc.Middleware(recovery.Recovery(), lock))
	_, _ = httpSrv, grpcSrv // register the services, then kratos.New(kratos.Server(httpSrv, grpcSrv)).Run()

	// What the transports do with a request: run the middleware around the
	// service method (testsvc stands for your generated code).
	pay := middleware.Chain(lock)(func(ctx context.Context, req any) (any, error) {
		// ctx carries the lease: an Acquire of the same name with it is
		// reentrant.
		return "paid under " + kratoslock.LeaseFromContext(ctx).Name(), nil
	})
	reply, err := pay(context.Background(), &testsvc.Request{Order: &testsvc.Order{Id: "42"}})
	fmt.Println(reply, err)
	// Output: paid under order:42 <nil>
}

// Reads share, writes exclude: requests of the read operations take the
// order's name shared and run together; the other operations' requests
// take it alone.
func ExampleWithSharedMethods() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)

	key, _ := keyfunc.Template("order:{field.order.id}")
	lock := kratoslock.Server(locker, key, kratoslock.WithSharedMethods("/shop.Orders/Get"))

	handler := middleware.Chain(lock)(func(ctx context.Context, req any) (any, error) {
		return kratoslock.LeaseFromContext(ctx).Mode().String(), nil
	})
	for _, op := range []string{"/shop.Orders/Get", "/shop.Orders/Pay"} {
		ctx := transport.NewServerContext(context.Background(), &operation{op})
		reply, _ := handler(ctx, &testsvc.Request{Order: &testsvc.Order{Id: "42"}})
		fmt.Println(op, reply)
	}
	// Output:
	// /shop.Orders/Get shared
	// /shop.Orders/Pay exclusive
}

// operation stands for the server transport of a request, which Kratos's
// servers put on its context: here only its operation.
type operation struct{ op string }

func (o *operation) Kind() transport.Kind            { return transport.KindGRPC }
func (o *operation) Endpoint() string                { return "" }
func (o *operation) Operation() string               { return o.op }
func (o *operation) RequestHeader() transport.Header { return header{} }
func (o *operation) ReplyHeader() transport.Header   { return header{} }

// header is an empty transport.Header.
type header struct{}

func (header) Get(string) string      { return "" }
func (header) Set(string, string)     {}
func (header) Add(string, string)     {}
func (header) Keys() []string         { return nil }
func (header) Values(string) []string { return nil }
