package main

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/keyfunc"
)

// grpcServer serves the orders API over gRPC, with reflection (for clients such as grpcurl);
// every call is locked per order.
//
// gRPC reads a unary call's whole request message before it calls the
// interceptors, so the lock is never held while a client sends; the limits
// bound that reading: messages of at most cfg.MaxBody bytes (a larger one is
// answered ResourceExhausted, without a lock), the connection handshake
// within cfg.ReadTimeout, and keepalives that close idle and dead
// connections. The budget interceptor, before the lock, bounds each call to
// cfg.HandlerTimeout.
func grpcServer(s *store, locker *core.Locker, cfg Config, opts ...grpclock.Option) (*grpc.Server, error) {
	key, err := keyfunc.Template("order:{field.order_id}")
	if err != nil {
		return nil, err
	}
	if err := grpclock.Check(locker, key, opts...); err != nil {
		return nil, err
	}
	srv := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler()), // request spans, parents of the lock spans
		grpc.MaxRecvMsgSize(int(cfg.MaxBody)),
		grpc.ConnectionTimeout(cfg.ReadTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 5 * time.Minute,  // close connections without calls
			Time:              time.Minute,      // ping a client silent for this long...
			Timeout:           20 * time.Second, // ...and close its connection if the ping is not answered
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(budgetInterceptor(cfg.HandlerTimeout), grpclock.UnaryServerInterceptor(locker, key, opts...)))
	ordersv1.RegisterOrdersServer(srv, &ordersService{store: s})
	reflection.Register(srv)
	return srv, nil
}

// budgetInterceptor bounds the rest of the chain, lock wait included, to d
// (or to the client's deadline, if that comes first).
func budgetInterceptor(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return next(ctx, req)
	}
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
	case errors.Is(err, errInvalid):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errExists):
		return nil, status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, errState):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case retryable(err):
		return nil, status.Error(codes.Unavailable, "nothing was written, try again: "+err.Error())
	}
	return nil, status.Error(codes.Internal, err.Error())
}
