package grpclock_test

import (
	"context"
	"fmt"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Lock every call by the order id in its request message, and streams by
// their first message. Here the request is a wrapperspb.StringValue whose
// field "value" is the order id; with your own messages the template names
// their fields, e.g. "order:{field.order.id}".
func ExampleUnaryServerInterceptor() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)
	defer locker.Close()
	key, err := keyfunc.Template("order:{field.value}")
	if err != nil {
		panic(err)
	}
	lock := grpclock.UnaryServerInterceptor(locker, key)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(lock),
		grpc.ChainStreamInterceptor(grpclock.StreamServerInterceptor(locker, key)),
	)
	defer srv.Stop() // register services, then srv.Serve(listener)

	// What the server does with each call: the interceptor, then the method.
	pay := func(ctx context.Context, req any) (any, error) {
		return "paid under " + grpclock.LeaseFromContext(ctx).Name(), nil
	}
	reply, err := lock(context.Background(), wrapperspb.String("42"), &grpc.UnaryServerInfo{FullMethod: "/shop.Orders/Pay"}, pay)
	fmt.Println(reply, err)
	// Output: paid under order:42 <nil>
}

// Lock only the methods that change an order, with go-grpc-middleware's
// selector.
func ExampleUnaryServerInterceptor_selector() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)
	defer locker.Close()
	key, _ := keyfunc.Template("order:{field.value}")
	writes := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Method == "Pay" || c.Method == "Cancel"
	})
	lock := selector.UnaryServerInterceptor(grpclock.UnaryServerInterceptor(locker, key), writes)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lock))
	defer srv.Stop()

	method := func(ctx context.Context, req any) (any, error) {
		if l := grpclock.LeaseFromContext(ctx); l != nil {
			return "under " + l.Name(), nil
		}
		return "unlocked", nil
	}
	for _, m := range []string{"/shop.Orders/Pay", "/shop.Orders/Get"} {
		reply, _ := lock(context.Background(), wrapperspb.String("42"), &grpc.UnaryServerInfo{FullMethod: m}, method)
		fmt.Println(m, reply)
	}
	// Output:
	// /shop.Orders/Pay under order:42
	// /shop.Orders/Get unlocked
}

// Reads share, writes exclude: calls of the read methods take the order's
// name shared and run together; calls of the other methods take it alone.
func ExampleWithSharedMethods() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)
	defer locker.Close()
	key, _ := keyfunc.Template("order:{field.value}")
	lock := grpclock.UnaryServerInterceptor(locker, key, grpclock.WithSharedMethods("/shop.Orders/Get"))

	method := func(ctx context.Context, req any) (any, error) {
		return grpclock.LeaseFromContext(ctx).Mode().String(), nil
	}
	for _, m := range []string{"/shop.Orders/Get", "/shop.Orders/Pay"} {
		reply, _ := lock(context.Background(), wrapperspb.String("43"), &grpc.UnaryServerInfo{FullMethod: m}, method)
		fmt.Println(m, reply)
	}
	// Output:
	// /shop.Orders/Get shared
	// /shop.Orders/Pay exclusive
}

// A key that yields several names locks them all at once, in one canonical
// order (core.Locker.AcquireAll): here the two accounts of a transfer.
func ExampleUnaryServerInterceptor_severalNames() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client)
	defer locker.Close()
	key, _ := keyfunc.Templates("account:{header.x-from}", "account:{header.x-to}")
	lock := grpclock.UnaryServerInterceptor(locker, key)

	transfer := func(ctx context.Context, req any) (any, error) {
		return grpclock.LeaseFromContext(ctx).Names(), nil
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-from", "7", "x-to", "3"))
	reply, err := lock(ctx, wrapperspb.String("t1"), &grpc.UnaryServerInfo{FullMethod: "/bank.Accounts/Transfer"}, transfer)
	fmt.Println(reply, err)
	// Output: [account:3 account:7] <nil>
}
