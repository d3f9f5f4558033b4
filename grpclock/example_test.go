package grpclock_test

import (
	"context"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Lock every call by the order id in its request message, and streams by
// their first message.
func ExampleUnaryServerInterceptor() {
	locker := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true}))
	key, err := keyfunc.Template("order:{field.order.id}")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(locker, key)),
		grpc.ChainStreamInterceptor(grpclock.StreamServerInterceptor(locker, key)),
	)
	_ = srv // register services, then srv.Serve(listener)
}

// Lock only the methods that change an order, with go-grpc-middleware's
// selector.
func ExampleUnaryServerInterceptor_selector() {
	locker := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true}))
	key, _ := keyfunc.Template("order:{field.order_id}")
	writes := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Method == "Pay" || c.Method == "Cancel"
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		selector.UnaryServerInterceptor(grpclock.UnaryServerInterceptor(locker, key), writes),
	))
	_ = srv
}
