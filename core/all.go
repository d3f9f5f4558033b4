package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// AcquireAll takes every name or none, within one wait budget, and returns
// one Lease that covers them all: Release releases every name, Done closes
// and Lost reports true as soon as any of them is lost, Extend extends them
// all, and FenceOf and SlotOf give each name's fencing token and slot. opts
// apply to every name (TTL, Wait, Shared, Permits...), and the wait budget
// is one for the whole call.
//
// Two AcquireAlls that list the same names in different orders cannot
// deadlock: the names are taken in one canonical order, that of their
// store keys (Redisson's RedissonMultiLock and Curator's
// InterProcessMultiLock take the caller's order, and can deadlock). Where
// the store can (a MultiAcquirer: Redis keys one script may touch, etcd,
// ZooKeeper, SQL), the first attempt of an exclusive AcquireAll takes every
// name in one atomic step: one round trip when they are free. While one of
// them is held, AcquireAll takes them one by one in that order, each as
// Acquire does, so that a waiting writer is recorded where readers hold a
// name (Shared: writers do not starve). A failure releases those it took:
// a failed AcquireAll leaves none of the names held. Once it holds them
// all, it renews those taken first that have run down while it waited for
// a later one (Redisson's MultiLock likewise resets every lock's lease once
// it holds them all), and starts over, within the budget, if one expired.
// Names that map to one key are taken once.
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
	all := make([]named, 0, len(names))
	for _, name := range names {
		key, err := l.Key(name)
		if err != nil {
			return nil, err
		}
		all = append(all, named{name, key})
	}
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.key, b.key) }) // bytewise: the same in every process
	all = slices.CompactFunc(all, func(a, b named) bool { return a.key == b.key })
	if len(all) == 1 {
		return l.Acquire(ctx, all[0].name, opts...)
	}
	p, err := l.resolve(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := l.checkMode(all[0].name, p.mode); err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(p.wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if ma, ok := l.store.(MultiAcquirer); ok && l.atomicAll(p.mode) && !l.anyHeldIn(ctx, all) {
		reqs := make([]*AcquireCall, len(all))
		for i, n := range all {
			reqs[i] = &AcquireCall{Name: n.name, Key: n.key, Route: p.route, TTL: p.ttl, Start: start, Deadline: deadline, Attempts: 1}
		}
		if !l.cfg.noHolder {
			reqs[0].holder = l.holderFor(ctx, p, start) // one token for every key
		}
		if lease, done, err := l.acquireAtOnce(ctx, ma, reqs); done {
			return lease, err
		}
	}
	return l.acquireEach(ctx, all, opts, start, deadline)
}

// named is a name of AcquireAll and its store key.
type named struct{ name, key string }

// anyHeldIn reports whether ctx holds one of the names (see heldIn).
func (l *Locker) anyHeldIn(ctx context.Context, all []named) bool {
	for _, n := range all {
		if l.heldIn(ctx, n.key) != nil {
			return true
		}
	}
	return false
}

// atomicAll reports whether AcquireAll may take its names in one step of a
// MultiAcquirer: exclusive holds, and nothing that must see each name on
// its own (Handlers, the local queue, the fair queue).
func (l *Locker) atomicAll(mode Mode) bool {
	return mode == ModeExclusive && len(l.cfg.handlers) == 0 && l.cfg.queue == nil && l.queuer == nil
}

// acquireAtOnce is AcquireAll's one attempt at every key in one step of a
// MultiAcquirer. done is false when the caller must go on one by one: the
// store cannot take these keys in one step (ErrNotAtomic), or one of them
// is held; nothing was taken then, and the Observers have heard nothing.
// Otherwise the Observers hear of each name, and lease or err is the
// answer.
func (l *Locker) acquireAtOnce(ctx context.Context, ma MultiAcquirer, reqs []*AcquireCall) (lease *Lease, done bool, err error) {
	first := reqs[0]
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	token := l.newToken(first)
	sent := time.Now()
	ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
	ok, fences, err := ma.TryAcquireAll(ioCtx, keys, token, first.TTL, l.cfg.fencing)
	cancel()
	switch {
	case errors.Is(err, ErrNotAtomic), err == nil && !ok:
		return nil, false, nil
	case err != nil:
		for _, k := range keys { // whatever the attempt may have set
			l.undo(ctx, k, token, first.TTL)
		}
		if cerr := callerErr(ctx); cerr != nil {
			err = cerr
		} else {
			err = l.storageErr("acquire", first.Name, err)
		}
	default:
		ttl := l.heldFor(first.TTL)
		until := validity(sent, ttl)
		parts := make([]*Lease, len(keys))
		for i, r := range reqs {
			var fence int64
			if i < len(fences) {
				fence = fences[i]
			}
			parts[i] = l.newLease(r.Name, r.Key, token, fence, ttl, until, hold{})
		}
		lease = combine(l, parts)
	}
	for i, r := range reqs {
		l.observeStart(ctx, r)
		var part *Lease
		if lease != nil {
			part = lease.parts[i]
		}
		l.observeAcquire(ctx, r, part, err)
	}
	return lease, true, err
}

// acquireEach takes the names one by one, in canonical order, each with
// what is left of the budget (see AcquireAll).
func (l *Locker) acquireEach(ctx context.Context, all []named, opts []CallOption, start, deadline time.Time) (*Lease, error) {
	for {
		parts := make([]*Lease, 0, len(all))
		for _, n := range all {
			left := max(time.Until(deadline), 0)
			lease, err := l.Acquire(ctx, n.name, append(opts[:len(opts):len(opts)], Wait(left))...)
			if err != nil {
				_ = releaseParts(ctx, parts)
				return nil, err
			}
			parts = append(parts, lease)
		}
		err := l.renewParts(ctx, parts[:len(parts)-1])
		if err == nil {
			return combine(l, parts), nil
		}
		_ = releaseParts(ctx, parts)
		if !errors.Is(err, ErrNotHeld) {
			return nil, err
		}
		if time.Until(deadline) <= 0 {
			return nil, l.timeoutErr(ctx, &AcquireCall{Name: all[0].name, Start: start})
		}
	}
}

// releaseParts releases the leases AcquireAll took, in reverse order, and
// returns their errors joined.
func releaseParts(ctx context.Context, parts []*Lease) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		errs = append(errs, parts[i].Release(ctx))
	}
	return errors.Join(errs...)
}

// renewParts checks that each of parts, the names AcquireAll took before
// its last, still holds its name, and extends to its TTL each that has
// less than two thirds of it left, unless its watchdog renews it; it
// returns the first error, one wrapping ErrNotHeld for a part that is
// lost (another holder may have taken its name since).
func (l *Locker) renewParts(ctx context.Context, parts []*Lease) error {
	for _, p := range parts {
		if p.Lost() {
			return fmt.Errorf("%w: %q expired while AcquireAll waited for a later name", ErrNotHeld, p.name)
		}
		if p.parent != nil || p.renewing() || time.Until(p.ValidUntil()) >= 2*p.TTL()/3 {
			continue // a nested lease is its outer lease's to renew
		}
		if err := p.Extend(ctx, p.TTL()); err != nil {
			return err
		}
	}
	return nil
}

// renewing reports whether l's watchdog runs: it renews l itself.
func (l *Lease) renewing() bool {
	if l.watch == nil {
		return false
	}
	select {
	case <-l.watch.exited:
		return false
	default:
		return true
	}
}

// combine returns the lease of AcquireAll over parts, the leases of its
// names in canonical order.
func combine(l *Locker, parts []*Lease) *Lease {
	p := parts[0]
	return &Lease{
		locker: l, name: p.name, key: p.key, token: p.token, fence: p.fence,
		mode: p.mode, permits: p.permits, slot: p.slot, parts: parts,
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
	return releaseParts(ctx, l.parts)
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

// SlotOf returns the slot of one name of a lease of AcquireAll taken with
// Permits (or of the lease's own name), 0 for a name it does not cover or
// in the other modes. Slot is the slot of the first name.
func (l *Lease) SlotOf(name string) int {
	if l.parts == nil {
		if name == l.name {
			return l.slot
		}
		return 0
	}
	for _, p := range l.parts {
		if p.name == name {
			return p.slot
		}
	}
	return 0
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
