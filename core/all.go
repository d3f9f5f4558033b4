package core

import (
	"context"
	"errors"
)

// AcquireAll takes every name or none, within one wait budget, and returns
// one Lease that covers them all.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...CallOption) (*Lease, error) {
	return nil, errors.New("reqlock: AcquireAll: not yet")
}

// Names returns the names a lease of AcquireAll covers, in canonical
// order; the lease's one name otherwise.
func (l *Lease) Names() []string {
	if l.parts == nil {
		return []string{l.name}
	}
	names := make([]string, len(l.parts))
	for i, p := range l.parts {
		names[i] = p.name
	}
	return names
}

// FenceOf returns the fencing token of one name of a lease of AcquireAll
// (or of the lease's own name), 0 for a name it does not cover or where
// fencing is off.
func (l *Lease) FenceOf(name string) int64 {
	if l.parts == nil {
		if name == l.name {
			return l.fence
		}
		return 0
	}
	for _, p := range l.parts {
		if p.name == name {
			return p.fence
		}
	}
	return 0
}
