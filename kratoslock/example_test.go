package kratoslock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-kratos/kratos/v2/middleware"
	"github.com/go-kratos/kratos/v2/middleware/recovery"
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
