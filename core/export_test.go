package core

import (
	"context"
	"fmt"
)

// Handoff passes l on as the local queue does at a release: l's holder
// offers it, and the holder of req takes it over (see handoff). Tests use it
// to drive a hand-off without a queue.
func (l *Lease) Handoff(ctx context.Context, req *AcquireCall) (*Lease, error) {
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

// FairPolls returns how many polls of the Locker's fair waiters of key, those
// still in line, have returned (each counted once per waiter it included),
// so that a test can wait for the poll that follows a waiter's
// subscription instead of guessing how long it takes.
func (l *Locker) FairPolls(key string) int {
	l.lines.mu.Lock()
	defer l.lines.mu.Unlock()
	n := 0
	if ln := l.lines.m[key]; ln != nil {
		for _, w := range ln.waiters {
			n += w.polls
		}
	}
	return n
}
