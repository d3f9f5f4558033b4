package core

import (
	"context"
	"fmt"
)

// Handoff passes l on as the local queue does at a release: l's holder
// offers it, and the holder of req takes it over (see handoff). Tests use it
// to drive a hand-over without a queue.
func (l *Lease) Handoff(ctx context.Context, req *Request) (*Lease, error) {
	if l == nil || l.parent != nil {
		return nil, fmt.Errorf("%w: handoff of a nil or nested lease", ErrNotHeld)
	}
	if req == nil || req.Key != l.key {
		return nil, fmt.Errorf("%w: Handoff: the request is nil or names another key than %q", ErrInvalidOption, l.key)
	}
	if _, err := checkTTL(req.TTL, "Handoff"); err != nil {
		return nil, err
	}
	l.beginPass()
	return l.handoff(ctx, req.Name, req.TTL)
}
