package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// AcquireAll takes every name or none, within one wait budget, and returns
// one Lease that covers them all: Release releases every name, Done closes
// and Lost reports true as soon as any of them is lost, Extend extends them
// all, and FenceOf gives each name's fencing token. opts apply to every
// name (TTL, Wait, Shared, Permits...), and the wait budget is one for the
// whole call.
//
// Two AcquireAlls that list the same names in different orders cannot
// deadlock: the names are taken in one canonical order, that of their
// store keys (the ordered acquisition of Redisson's RedissonMultiLock and
// Curator's InterProcessMultiLock, which both take the caller's order and
// so can deadlock). Where the store can (a MultiAcquirer: Redis keys one
// script may touch), an exclusive AcquireAll takes every name in one
// atomic step per attempt, holding none while it waits; otherwise it takes
// them one by one in that order, and a failure releases those it took.
// Either way, a failed AcquireAll leaves none of the names held. Names
// that map to one key are taken once.
//
// Each name is reported to the Observers as an acquire of its own. Names
// the context already holds (see ContextWithLease) are nested leases, as
// with Acquire. Errors are those of Acquire, for the name that failed; an
// empty list is ErrInvalidName.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...CallOption) (*Lease, error) {
	if l.err != nil {
		return nil, l.err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: AcquireAll: no names", ErrInvalidName)
	}
	type named struct{ name, key string }
	all := make([]named, 0, len(names))
	for _, name := range names {
		key, err := l.Key(name)
		if err != nil {
			return nil, err
		}
		all = append(all, named{name, key})
	}
	slices.SortFunc(all, func(a, b named) int { return compareStrings(a.key, b.key) })
	all = slices.CompactFunc(all, func(a, b named) bool { return a.key == b.key })
	if len(all) == 1 {
		return l.Acquire(ctx, all[0].name, opts...)
	}
	ttl, wait, route, mode, _, err := l.resolve(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := l.checkMode(all[0].name, mode); err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if ma, ok := l.store.(MultiAcquirer); ok && l.atomicAll(mode) {
		reqs := make([]*AcquireCall, len(all))
		held := false
		for i, n := range all {
			reqs[i] = &AcquireCall{Name: n.name, Key: n.key, Route: route, TTL: ttl, Start: start, Deadline: deadline}
			held = held || l.heldIn(ctx, n.key) != nil
		}
		if !held {
			lease, err := l.acquireAtomic(ctx, ma, reqs)
			if !errors.Is(err, ErrNotAtomic) {
				return lease, err
			}
		}
	}
	parts := make([]*Lease, 0, len(all))
	for _, n := range all {
		left := max(time.Until(deadline), 0)
		lease, err := l.Acquire(ctx, n.name, append(opts[:len(opts):len(opts)], Wait(left))...)
		if err != nil {
			for i := len(parts) - 1; i >= 0; i-- {
				_ = parts[i].Release(ctx)
			}
			return nil, err
		}
		parts = append(parts, lease)
	}
	return combine(l, parts), nil
}

// compareStrings orders store keys bytewise, the same in every process.
func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// atomicAll reports whether AcquireAll may take its names in one step of a
// MultiAcquirer: exclusive holds, and nothing that must see each name on
// its own (Handlers, the local queue, the fair queue).
func (l *Locker) atomicAll(mode Mode) bool {
	return mode == ModeExclusive && len(l.cfg.handlers) == 0 && l.cfg.queue == nil && l.queuer == nil
}

// acquireAtomic is spin for AcquireAll on a MultiAcquirer: every attempt
// tries all the keys in one step, and sleeps while one of them is held, so
// that it holds none of them while it waits. ErrNotAtomic comes back as
// is, before anything was taken, for the caller to go one by one.
func (l *Locker) acquireAtomic(ctx context.Context, ma MultiAcquirer, reqs []*AcquireCall) (*Lease, error) {
	first := reqs[0]
	keys := make([]string, len(reqs))
	names := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i], names[i] = r.Key, r.Name
		l.observeStart(ctx, r)
	}
	lease, err := l.spinAll(ctx, ma, first, keys, names)
	if errors.Is(err, ErrNotAtomic) {
		return nil, err
	}
	for i, r := range reqs {
		r.Attempts = first.Attempts
		var part *Lease
		if lease != nil {
			part = lease.parts[i]
		}
		l.observeAcquire(ctx, r, part, err)
	}
	return lease, err
}

// spinAll is the loop of acquireAtomic.
func (l *Locker) spinAll(ctx context.Context, ma MultiAcquirer, req *AcquireCall, keys, names []string) (*Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req.Attempts++
		token := rand.Text()
		sent := time.Now()
		ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
		ok, fences, err := ma.TryAcquireAll(ioCtx, keys, token, req.TTL, l.cfg.fencing)
		cancel()
		switch {
		case errors.Is(err, ErrNotAtomic):
			return nil, err
		case err != nil:
			for _, k := range keys { // whatever the attempt may have set
				l.undo(ctx, k, token, req.TTL)
			}
			if cerr := callerErr(ctx); cerr != nil {
				return nil, cerr
			}
			return nil, l.storageErr("acquire", req.Name, err)
		case ok:
			ttl := l.heldFor(req.TTL)
			until := validity(sent, ttl)
			parts := make([]*Lease, len(keys))
			for i, k := range keys {
				var fence int64
				if i < len(fences) {
					fence = fences[i]
				}
				parts[i] = l.newLease(names[i], k, token, fence, ttl, until, hold{})
			}
			return combine(l, parts), nil
		}
		left := time.Until(req.Deadline)
		if left <= 0 {
			return nil, l.timeoutErr(ctx, req)
		}
		sleep := min(l.sleep(), left)
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// combine returns the lease of AcquireAll over parts, the leases of its
// names in canonical order.
func combine(l *Locker, parts []*Lease) *Lease {
	p := parts[0]
	return &Lease{
		locker: l, name: p.name, key: p.key, token: p.token, fence: p.fence,
		mode: p.mode, permits: p.permits, parts: parts,
		all: &allState{},
	}
}

// allState is what a lease of AcquireAll keeps besides its parts: its Done
// channel, closed when the first part's closes.
type allState struct {
	once sync.Once
	done chan struct{}
}

// allDone is Done for a lease of AcquireAll.
func (l *Lease) allDone() <-chan struct{} {
	a := l.all
	a.once.Do(func() {
		a.done = make(chan struct{})
		var closeOnce sync.Once
		for _, p := range l.parts {
			// Each part's Done closes at its release or loss, at the
			// latest when its validity passes: the goroutine ends then.
			go func(c <-chan struct{}) {
				<-c
				closeOnce.Do(func() { close(a.done) })
			}(p.Done())
		}
	})
	return a.done
}

// allRelease is Release for a lease of AcquireAll: every part, in the
// reverse order of their acquisition.
func (l *Lease) allRelease(ctx context.Context) error {
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		errs = append(errs, l.parts[i].Release(ctx))
	}
	return errors.Join(errs...)
}

// allExtend is Extend for a lease of AcquireAll.
func (l *Lease) allExtend(ctx context.Context, ttl time.Duration) error {
	var errs []error
	for _, p := range l.parts {
		errs = append(errs, p.Extend(ctx, ttl))
	}
	return errors.Join(errs...)
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
