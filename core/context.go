package core

import (
	"context"
	"fmt"
)

// This file holds what a request's context carries for the lock engine: the
// leases it holds (for reentrancy and for handlers to find them) and a route
// label for telemetry. The per-request TTL and wait are in call.go.

type leaseKey struct{}

// leaseCtx is a context that carries a lease on top of the leases its
// parent carries (next, innermost first): its Value answers leaseKey with
// itself. It is one allocation where context.WithValue and a node were two,
// on every request of an adapter.
type leaseCtx struct {
	context.Context
	lease *Lease
	next  *leaseCtx
}

// Value returns c itself for leaseKey, else its parent's value.
func (c *leaseCtx) Value(key any) any {
	if _, ok := key.(leaseKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// String describes c as the context package's contexts describe
// themselves: its parent's String (or type), then what c adds.
func (c *leaseCtx) String() string {
	parent := fmt.Sprintf("%T", c.Context)
	if s, ok := c.Context.(fmt.Stringer); ok {
		parent = s.String()
	}
	return parent + ".WithLease(" + c.lease.name + ")"
}

// ContextWithLease returns a copy of ctx that carries lease, on top of the
// leases ctx already carries. Adapters call it so that the handler finds the
// lease with LeaseFromContext, and so that Acquire on that context for the
// same name is reentrant: it returns a nested lease without a store call (see
// Locker.Acquire). A nil lease returns ctx unchanged.
func ContextWithLease(ctx context.Context, lease *Lease) context.Context {
	if lease == nil {
		return ctx
	}
	next, _ := ctx.Value(leaseKey{}).(*leaseCtx)
	return &leaseCtx{Context: ctx, lease: lease, next: next}
}

// LeaseFromContext returns the lease most recently added to ctx with
// ContextWithLease, or nil.
func LeaseFromContext(ctx context.Context) *Lease {
	if n, ok := ctx.Value(leaseKey{}).(*leaseCtx); ok {
		return n.lease
	}
	return nil
}

// heldIn returns the outermost lease of l on key that ctx carries and that is
// still held, or nil.
func (l *Locker) heldIn(ctx context.Context, key string) *Lease {
	n, _ := ctx.Value(leaseKey{}).(*leaseCtx)
	for ; n != nil; n = n.next {
		if n.lease.parts != nil { // a lease of AcquireAll holds each of its names
			for _, p := range n.lease.parts {
				if outer := p.outer(); outer.locker == l && outer.key == key && outer.held() {
					return outer
				}
			}
			continue
		}
		outer := n.lease.outer()
		if outer.locker == l && outer.key == key && outer.held() {
			return outer
		}
	}
	return nil
}

type routeKey struct{}

// ContextWithRoute returns a copy of ctx labelled with route: a
// low-cardinality description of where locks taken with it come from, such as
// a route template ("/orders/:id") or a gRPC method ("/orders.v1.Orders/Pay"),
// never a raw lock name. Acquire copies it into AcquireCall.Route for telemetry
// handlers. The adapters set it.
func ContextWithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// RouteFromContext returns the route set on ctx with ContextWithRoute, or "".
func RouteFromContext(ctx context.Context) string {
	route, _ := ctx.Value(routeKey{}).(string)
	return route
}
