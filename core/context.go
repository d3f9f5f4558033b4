package core

import "context"

// This file holds what a request's context carries for the lock engine: the
// leases it holds (for reentrancy and for handlers to find them) and a route
// label for telemetry. The per-request TTL and wait are in call.go.

type leaseKey struct{}

// leaseNode links the leases carried by a context, innermost first.
type leaseNode struct {
	lease *Lease
	next  *leaseNode
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
	next, _ := ctx.Value(leaseKey{}).(*leaseNode)
	return context.WithValue(ctx, leaseKey{}, &leaseNode{lease: lease, next: next})
}

// LeaseFromContext returns the lease most recently added to ctx with
// ContextWithLease, or nil.
func LeaseFromContext(ctx context.Context) *Lease {
	if n, ok := ctx.Value(leaseKey{}).(*leaseNode); ok {
		return n.lease
	}
	return nil
}

// heldIn returns the outermost lease of l on key that ctx carries and that is
// still held, or nil.
func (l *Locker) heldIn(ctx context.Context, key string) *Lease {
	n, _ := ctx.Value(leaseKey{}).(*leaseNode)
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
