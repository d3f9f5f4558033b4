package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/keyfunc"
)

// grpcServer serves the orders API over gRPC, with reflection for grpcurl;
// every call is locked per order.
func grpcServer(s *store, locker *core.Locker, opts ...grpclock.Option) (*grpc.Server, error) {
	key, err := keyfunc.Template("order:{field.order_id}")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler()), // request spans, parents of the lock spans
		grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(locker, key, opts...)))
	ordersv1.RegisterOrdersServer(srv, &ordersService{store: s})
	reflection.Register(srv)
	return srv, nil
}

type ordersService struct {
	ordersv1.UnimplementedOrdersServer
	store *store
}

func (o *ordersService) Create(ctx context.Context, req *ordersv1.OrderRequest) (*ordersv1.Order, error) {
	defer o.store.enter(req.OrderId)()
	return reply(o.store.create(ctx, req.OrderId, req.AmountCents))
}

func (o *ordersService) Pay(ctx context.Context, req *ordersv1.OrderRequest) (*ordersv1.Order, error) {
	defer o.store.enter(req.OrderId)()
	return reply(o.store.pay(ctx, req.OrderId))
}

func (o *ordersService) Cancel(ctx context.Context, req *ordersv1.OrderRequest) (*ordersv1.Order, error) {
	defer o.store.enter(req.OrderId)()
	return reply(o.store.cancel(ctx, req.OrderId))
}

func reply(o Order, err error) (*ordersv1.Order, error) {
	switch {
	case err == nil:
		return &ordersv1.Order{Id: o.ID, State: o.State, AmountCents: o.AmountCents}, nil
	case errors.Is(err, errNotFound):
		return nil, status.Error(codes.NotFound, err.Error())
	case errors.Is(err, errExists):
		return nil, status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, errState):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return nil, status.Error(codes.Internal, err.Error())
}
