package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"reflect"
	"time"
)

// One Acquire goes through this file from top to bottom: Acquire checks its
// arguments, resolves TTL and wait (resolve, in call.go), runs the Handlers
// (chain), whose innermost link takes the local turn (LocalQueue) and then
// the lock (take: a hand-off from the previous local holder, or spin
// against the Store), and tells the Observers. Lease.Release (lease.go) goes
// back the same way: Handlers, then unlock (a local hand-off, or the
// Store's compare-and-delete, then the end of the local turn), then the
// Observers.

// Locker acquires named locks in a Store. It is safe for concurrent use;
// build one per process and share it, and Close it when done.
type Locker struct {
	cfg    config
	err    error
	store  Store
	owned  bool     // built by New or NewRedlock: Close closes the store
	notify Notifier // WithNotify on a store that can push; nil otherwise
	queuer Queuer   // WithFair; nil otherwise
	sharer Sharer   // the store as a Sharer, nil for a store that is not one
	// held is the store as a HeldAcquirer, when it is also a Sharer; nil
	// otherwise (see tryAcquire).
	held  HeldAcquirer
	lines lines // WithFair: the waiters, polled per key (fair.go)
	// rounder is the store as a TTLRounder, nil for a store that holds
	// what it is asked (see heldFor).
	rounder TTLRounder
	// acquire and release are the Handler chain around take and unlock,
	// composed once when the Locker is built.
	acquire func(context.Context, *AcquireCall) error
	release ReleaseFunc
}

// NewWithStore returns a Locker that keeps its locks in s. The Locker does
// not close s: close it after the Lockers that use it, if it has a Close
// method. Like New, it does no I/O, never panics and reports invalid options
// and a nil store through Err.
func NewWithStore(s Store, opts ...Option) *Locker {
	var err error
	if s == nil || isNilPointer(s) {
		err = fmt.Errorf("%w: NewWithStore: the store is nil", ErrInvalidOption)
	}
	return newLocker(s, false, err, opts)
}

// newLocker builds a Locker on s; err reports bad arguments, and owned says
// that the Locker's Close closes s.
func newLocker(s Store, owned bool, err error, opts []Option) *Locker {
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i))
			continue
		}
		opt(&cfg)
	}
	err = errors.Join(err, cfg.validate())
	settings := StoreSettings{IOTimeout: cfg.ioTimeout, NotifyLinger: cfg.notifyLinger, Fencing: cfg.fencing, Fair: cfg.fair}
	if c, ok := s.(Checker); ok && err == nil {
		err = c.Check(settings)
	}
	if cfg.fair && err == nil {
		err = checkFair(s)
	}
	l := &Locker{cfg: cfg, err: err, store: s, owned: owned}
	if err != nil {
		return l
	}
	if t, ok := s.(Tuner); ok {
		t.Tune(settings)
	}
	if cfg.fair {
		l.queuer = s.(Queuer)
	}
	if r, ok := s.(TTLRounder); ok {
		l.rounder = r
	}
	if sh, ok := s.(Sharer); ok {
		l.sharer = sh
		if h, ok := s.(HeldAcquirer); ok {
			l.held = h
		}
	}
	if n, ok := s.(Notifier); ok && cfg.notify {
		n.Announce()
		l.notify = n
	}
	l.acquire, l.release = chain(cfg.handlers, l.take, l.unlock)
	return l
}

// Close ends what the Locker runs in the background. A Locker built by New
// or NewRedlock also closes its store, which ends its subscriptions and the
// clean-ups of failed calls (keys they could not remove yet expire with
// their TTL) and waits for them. Close neither releases nor ends leases; it
// is idempotent and returns nil.
func (l *Locker) Close() error {
	if c, ok := l.store.(io.Closer); ok && l.owned {
		return c.Close()
	}
	return nil
}

// isNilPointer reports a typed nil, such as a (*redis.Client)(nil) or a nil
// store pointer, which would otherwise pass the nil check and panic at the
// first Acquire.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Err reports the configuration error of the Locker, nil if it is usable.
func (l *Locker) Err() error {
	return l.err
}

// Acquire takes the lock called name and returns its Lease, which the caller
// must Release. While another holder keeps the name, Acquire retries after a
// random sleep (WithSpin) until the wait budget runs out, cut by the
// context's deadline.
//
// The lock's TTL and the wait budget come from, strongest first:
//
//	TTL:   TTL(d)  > ContextWithTTL  > RouteTTL(d)  > WithTTL (the Locker's)
//	wait:  Wait(d) > ContextWithWait > RouteWait(d) > WithWait (the Locker's)
//
// that is: what the call site says; then what code earlier in the request
// put on the context; then the route's default (the adapters' WithTTL and
// WithWait); then the Locker's.
//
// Errors keep their kind (see Classify):
//   - ErrTimeout: the budget was spent while the name was held;
//   - context.Canceled or context.DeadlineExceeded: ctx ended first;
//   - ErrStorage: the store could not be reached or failed (returned when the
//     failing call ends, bounded by the I/O timeout; not retried until the
//     budget runs out);
//   - ErrInvalidName, ErrInvalidOption: bad input; nothing was sent.
//
// A cancellation of ctx wakes a waiting Acquire at once; during a store call
// it is seen when the call ends, within the I/O timeout.
//
// Acquire is reentrant through the context: when ctx carries (see
// ContextWithLease) a lease of this Locker for the same name that is still
// held, Acquire returns a nested lease at once, with no store call, no
// plugin and no call option applied (invalid options are still refused,
// and so is a mode the outer lease does not cover: an exclusive Acquire
// inside a shared hold would wait for itself). Releasing the nested lease
// releases nothing; the name is released when the outermost lease is. So a service
// function can lock "order:42" whether or not the route's middleware
// already did. Reentrancy goes by context, not by goroutine: goroutines that
// share a context carrying the lease all get nested leases, and run at once.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...CallOption) (*Lease, error) {
	if l.err != nil {
		return nil, l.err
	}
	key, err := l.Key(name)
	if err != nil {
		return nil, err
	}
	if outer := l.heldIn(ctx, key); outer != nil {
		return reenter(outer, name, opts)
	}
	p, err := l.resolve(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := l.checkMode(name, p.mode); err != nil {
		return nil, err
	}
	now := time.Now()
	deadline := now.Add(p.wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	req := &AcquireCall{Name: name, Key: key, Route: p.route, TTL: p.ttl, Start: now, Deadline: deadline, Mode: p.mode, Permits: p.permits}
	if !l.cfg.noHolder {
		req.holder = l.holderFor(ctx, p, now)
	}
	l.observeStart(ctx, req)
	panicked := true
	defer func() {
		if panicked {
			l.acquirePanicked(ctx, req)
		}
	}()
	err = l.acquire(ctx, req)
	panicked = false
	lease := req.lease
	switch {
	case err != nil && lease != nil: // a Handler refused the lock next took
		_ = lease.Release(ctx)
		lease = nil
	case err == nil && lease == nil:
		err = errors.New("reqlock: a Handler returned without calling next")
	}
	l.observeAcquire(ctx, req, lease, err)
	return lease, err
}

// errAcquirePanicked is the error the Observers see for an Acquire whose
// Handler chain panicked.
var errAcquirePanicked = errors.New("reqlock: acquire: the handler chain panicked")

// acquirePanicked runs while a panic of the Handler chain goes up through
// Acquire: a lock that the chain took before the panic has no holder, so it
// is released (in the store and in the local queue), and the Observers see
// the acquire fail with OutcomeError. The panic then goes on.
func (l *Locker) acquirePanicked(ctx context.Context, req *AcquireCall) {
	if lease := req.lease; lease != nil {
		func() {
			defer func() { _ = recover() }() // the Handler may panic again: the first panic goes on
			_ = lease.Release(ctx)
		}()
	}
	l.observeAcquire(ctx, req, nil, errAcquirePanicked)
}

// observeStart tells the StartObservers that an Acquire begins.
func (l *Locker) observeStart(ctx context.Context, req *AcquireCall) {
	for _, o := range l.cfg.observers {
		if so, ok := o.(StartObserver); ok {
			so.ObserveStart(ctx, StartEvent{Name: req.Name, Key: req.Key, Route: req.Route, TTL: req.TTL, Start: req.Start, Mode: req.Mode, Permits: req.Permits})
		}
	}
}

// observeAcquire tells the Observers how an Acquire ended, and keeps the
// LeaseObservers they return on the lease.
func (l *Locker) observeAcquire(ctx context.Context, req *AcquireCall, lease *Lease, err error) {
	if len(l.cfg.observers) == 0 {
		return
	}
	e := AcquireEvent{
		Name: req.Name, Key: req.Key, Route: req.Route, TTL: req.TTL,
		Mode: req.Mode, Permits: req.Permits, Start: req.Start, End: time.Now(), Attempts: req.Attempts,
		LocalWait: req.localWait, HandedOver: req.handedIn,
		Outcome: Classify(err), Err: err, Lease: lease,
	}
	for _, o := range l.cfg.observers {
		if lo := o.ObserveAcquire(ctx, e); lo != nil && lease != nil {
			lease.observers = append(lease.observers, lo)
		}
	}
}

// chain composes the Handlers around take and unlock once, when the Locker
// is built, so that a call allocates no closures. It holds the Handlers'
// contract: an AcquireCall is acquired once, and a lease is released in the
// store whether or not a Handler calls next.
func chain(handlers []Handler, take AcquireFunc, unlock ReleaseFunc) (func(context.Context, *AcquireCall) error, ReleaseFunc) {
	acquire := func(ctx context.Context, req *AcquireCall) (*Lease, error) {
		if req.nexted {
			return nil, errors.New("reqlock: a Handler called next twice")
		}
		req.nexted = true
		lease, err := take(ctx, req)
		req.lease = lease
		return lease, err
	}
	release := unlock
	for i := len(handlers) - 1; i >= 0; i-- {
		h, nextAcquire, nextRelease := handlers[i], acquire, release
		acquire = func(ctx context.Context, req *AcquireCall) (*Lease, error) {
			err := h.Acquire(ctx, req, nextAcquire)
			return req.lease, err
		}
		release = func(ctx context.Context, lease *Lease) error {
			return h.Release(ctx, lease, nextRelease)
		}
	}
	outerRelease := release
	release = func(ctx context.Context, lease *Lease) (err error) {
		defer func() {
			if !lease.unlocked.Load() { // a Handler did not call next, or panicked first
				err = errors.Join(err, unlock(ctx, lease))
			}
		}()
		return outerRelease(ctx, lease)
	}
	return func(ctx context.Context, req *AcquireCall) error {
		_, err := acquire(ctx, req)
		return err
	}, release
}

// take is the innermost acquire link: the local turn (WithLocalQueue), then
// the lock, handed off by the previous local holder or taken in the store.
func (l *Locker) take(ctx context.Context, req *AcquireCall) (*Lease, error) {
	ttl, err := checkTTL(req.TTL, "AcquireCall.TTL") // a Handler may have changed it
	if err != nil {
		return nil, err
	}
	req.TTL = ttl
	if l.cfg.queue == nil || req.Mode != ModeExclusive {
		return l.spin(ctx, req) // shares of one process run together
	}
	waitStart := time.Now()
	turn, err := l.cfg.queue.Enter(ctx, req.Name, req.Key, req.Deadline)
	req.localWait = time.Since(waitStart)
	switch {
	case errors.Is(err, ErrTimeout):
		return nil, l.timeoutErr(ctx, req)
	case err != nil:
		return nil, err
	case turn == nil:
		return l.spin(ctx, req)
	}
	taken := false
	defer func() {
		if !taken { // failed, or the store panicked: the next waiter may go
			turn.Leave()
		}
	}()
	var lease *Lease
	if prev := turn.Passed(); prev != nil {
		lease, err = l.takeOver(ctx, req, prev)
		req.handedIn = lease != nil
	}
	if lease == nil && err == nil {
		lease, err = l.spin(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	taken = true
	lease.turn = turn
	return lease, nil
}

// takeOver takes the lock of prev, handed off by its holder through the
// local queue, for req; nil and no error when prev can no longer be handed
// over (lost, or another Locker's), in which case the caller acquires in the
// store.
func (l *Locker) takeOver(ctx context.Context, req *AcquireCall, prev *Lease) (*Lease, error) {
	if prev.locker != l {
		// A queue shared by two Lockers passed another Locker's lease: that
		// Locker's store and settings govern it, so release it there.
		_ = prev.locker.unlockStore(ctx, prev)
		return nil, nil
	}
	lease, err := prev.handoff(ctx, req.Name, req.TTL)
	if errors.Is(err, ErrNotHeld) {
		return nil, nil
	}
	return lease, err
}

// spin is the pull-mode loop: try the store; when another holder has the
// name, sleep a random time (or until a release notice) and try again, until
// the wait budget runs out.
func (l *Locker) spin(ctx context.Context, req *AcquireCall) (*Lease, error) {
	if l.queuer != nil {
		return l.waitInLine(ctx, req)
	}
	var timer *time.Timer
	var wake <-chan struct{} // WithNotify: the release notices of req.Key
	var waiting bool         // an attempt saw shares: TryAcquireWaiting from then on (see tryAcquire)
	// again is the token of a first attempt that TryAcquireFree answered
	// busy, which may hold the name all the same (a re-sent transmission,
	// see FreeAcquirer): the next attempt sends it again, and an Acquire
	// that ends before then releases it.
	var again string
	stop := func() {}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		stop()
		if again != "" {
			l.forget(ctx, req, again)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req.Attempts++
		// A token of its own per attempt (but after a busy TryAcquireFree):
		// the clean-up of a failed attempt that a store leaves to the
		// background cannot touch a later one.
		token := again
		if token == "" {
			token = l.newToken(req) // 128 random bits from crypto/rand, and the holder
		}
		again = ""
		sent := time.Now()
		free := l.freeAttempt(req, timer == nil)
		ok, slot, fence, err := l.tryAcquire(ctx, req, token, timer == nil, &waiting) // no timer: no failed attempt yet
		if err != nil {
			if cerr := callerErr(ctx); cerr != nil {
				return nil, cerr
			}
			if errors.Is(err, ErrModeMismatch) {
				return nil, fmt.Errorf("%w: %s %q: %w", ErrInvalidOption, modeLabel(req.Mode, req.Permits), req.Name, err)
			}
			return nil, l.storageErr("acquire", req.Name, err)
		}
		if ok {
			ttl := l.heldFor(req.TTL)
			return l.newLease(req.Name, req.Key, token, fence, ttl, validity(sent, ttl), hold{req.Mode, req.Permits, slot}), nil
		}
		if free {
			again = token
		}
		left := time.Until(req.Deadline)
		if left <= 0 {
			return nil, l.timeoutErr(ctx, req)
		}
		sleep := min(l.sleep(), left)
		if timer == nil {
			timer = time.NewTimer(sleep)
			if l.notify != nil { // from the first failed attempt on
				wake, stop = l.notify.Watch(req.Key)
			}
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		case <-wake:
			timer.Stop() // no stale tick after Stop since Go 1.23
		}
	}
}

// heldFor returns how long the store holds a lock that a command set with
// ttl: what a TTLRounder answers (a store that rounds TTLs up, such as
// etcd's whole seconds), ttl for any other store.
func (l *Locker) heldFor(ttl time.Duration) time.Duration {
	if l.rounder == nil {
		return ttl
	}
	if d := l.rounder.StoreTTL(ttl); d > 0 {
		return d
	}
	return ttl
}

// detach returns ctx without its cancellation and deadline, as
// context.WithoutCancel does, but ctx itself when it has neither (the
// context Release already detached, context.Background): the same context,
// one allocation less on the release path.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		if _, ok := ctx.Deadline(); !ok {
			return ctx
		}
	}
	return context.WithoutCancel(ctx)
}

// tryAcquire is one attempt of spin in the store, each store call bounded
// by the I/O timeout; first is set for the first attempt of an Acquire,
// which expects the name to be free (see FreeAcquirer), unless the Acquire
// has no wait budget: its one attempt is then a TryAcquire, which counts a
// re-sent transmission of its own as acquired where TryAcquireFree may
// not (spin sends that token again, which a one-attempt Acquire cannot).
// A share is taken through the Sharer. An exclusive attempt after a failed one goes through
// TryAcquireWaiting on a Sharer, so that new shares wait behind it (writers
// do not starve); on a Sharer that is a HeldAcquirer, through
// TryAcquireHeld instead (one native command on Redis), until one reports
// that shares hold the name: then *waiting is set, and TryAcquireWaiting
// runs at once with the same token (TryAcquireHeld wrote nothing) and for
// the rest of the Acquire, so that the writer records itself one round
// trip later than without TryAcquireHeld, once per Acquire, and its
// success clears its record. slot is the share's slot under Permits, 0
// otherwise.
func (l *Locker) tryAcquire(ctx context.Context, req *AcquireCall, token string, first bool, waiting *bool) (ok bool, slot int, fence int64, err error) {
	ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
	defer cancel()
	if req.Mode != ModeExclusive {
		return l.sharer.TryAcquireShare(ioCtx, req.Key, token, req.TTL, Hold{N: req.Permits}, l.cfg.fencing)
	}
	if l.freeAttempt(req, first) {
		ok, fence, err = l.store.(FreeAcquirer).TryAcquireFree(ioCtx, req.Key, token, req.TTL, l.cfg.fencing)
		return ok, 0, fence, err
	}
	if l.sharer != nil && !first {
		if l.held != nil && !*waiting {
			ok, shared, fence, err := l.held.TryAcquireHeld(ioCtx, req.Key, token, req.TTL, l.cfg.fencing)
			if err != nil || ok || !shared {
				return ok, 0, fence, err
			}
			*waiting = true
			cancel() // the next call has an I/O timeout of its own
			ioCtx, cancel = context.WithTimeout(ctx, l.cfg.ioTimeout)
			defer cancel()
		}
		ok, fence, err = l.sharer.TryAcquireWaiting(ioCtx, req.Key, token, req.TTL, l.writerPatience(), l.cfg.fencing)
		return ok, 0, fence, err
	}
	ok, fence, err = l.store.TryAcquire(ioCtx, req.Key, token, req.TTL, l.cfg.fencing)
	return ok, 0, fence, err
}

// freeAttempt reports whether an attempt of req is a TryAcquireFree: the
// first exclusive attempt of an Acquire with a wait budget, on a
// FreeAcquirer.
func (l *Locker) freeAttempt(req *AcquireCall, first bool) bool {
	_, ok := l.store.(FreeAcquirer)
	return ok && first && req.Mode == ModeExclusive && req.Deadline.After(req.Start)
}

// forget releases the token of a busy TryAcquireFree that no later attempt
// sent again (the Acquire ended first): once, a compare-and-delete within
// the I/O timeout, in case a re-sent transmission took the name with it
// (see FreeAcquirer). It removes nothing another token holds.
func (l *Locker) forget(ctx context.Context, req *AcquireCall, token string) {
	ioCtx, cancel := context.WithTimeout(detach(ctx), l.cfg.ioTimeout)
	defer cancel()
	_, _ = l.store.Release(ioCtx, req.Key, token)
}

// callerErr returns the caller's context error: ctx's error, or
// context.DeadlineExceeded once ctx's deadline has passed even if its timer
// has not fired yet (a store's own timers for the same deadline may fire
// first, and its error must not hide the caller's deadline); nil otherwise.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// timeoutErr returns the error of a wait budget that is spent: the context's
// error when it was the context's deadline that cut the budget, ErrTimeout
// (wrapped with the name and the time waited) otherwise.
func (l *Locker) timeoutErr(ctx context.Context, req *AcquireCall) error {
	if err := callerErr(ctx); err != nil {
		return err
	}
	return fmt.Errorf("%w (name %q, waited %v, %d attempts)",
		ErrTimeout, req.Name, time.Since(req.Start).Round(time.Millisecond), req.Attempts)
}

// sleep draws a duration in [spinMin, spinMin+spinRandom).
func (l *Locker) sleep() time.Duration {
	d := l.cfg.spinMin
	if l.cfg.spinRandom > 0 {
		d += time.Duration(mrand.Int64N(int64(l.cfg.spinRandom)))
	}
	return d
}

// unlock is the innermost release link: the lock goes to the next local
// waiter if the local queue has one, else it is deleted in the store
// (compare-and-delete) and the local turn ends: store first, so that the
// next local waiter does not spin in vain.
func (l *Locker) unlock(ctx context.Context, lease *Lease) error {
	if !lease.unlocked.CompareAndSwap(false, true) || lease.handedOff() {
		return nil // a Handler called next twice; or the lock is another lease's
	}
	turn := lease.turn
	if turn == nil {
		return l.unlockStore(ctx, lease)
	}
	if lease.beginPass() {
		if turn.Pass(lease) {
			return nil
		}
		lease.endPass()
	}
	defer turn.Leave() // also if the store call panics
	return l.unlockStore(ctx, lease)
}

// unlockStore deletes the lease's lock in the store if it still holds it.
func (l *Locker) unlockStore(ctx context.Context, lease *Lease) error {
	ioCtx, cancel := context.WithTimeout(detach(ctx), l.cfg.ioTimeout)
	defer cancel()
	sent := time.Now()
	if lease.mode != ModeExclusive {
		return l.releaseShare(ioCtx, lease)
	}
	ok, err := l.store.Release(ioCtx, lease.key, lease.token)
	if err != nil {
		// The release may not have reached the store: an Undoer retries it
		// in the background, so that a healed link or a resumed server
		// frees the name at once rather than at the end of its TTL.
		if u, ok := l.store.(Undoer); ok {
			u.Undo(ioCtx, lease.key, lease.token, lease.TTL(), sent)
		}
		return l.storageErr("release", lease.name, err)
	}
	if !ok {
		return fmt.Errorf("%w: release %q: the lock had expired", ErrNotHeld, lease.name)
	}
	return nil
}

// undo removes a lock held for ttl that the Locker holds with no lease to
// release it (a hand-off that failed, a lease its watchdog gave up), if it
// still holds token: through an Undoer, at once and then in the background
// until it matters no more; otherwise one compare-and-delete. It is bounded
// by the I/O timeout.
func (l *Locker) undo(ctx context.Context, key, token string, ttl time.Duration) {
	ioCtx, cancel := context.WithTimeout(detach(ctx), l.cfg.ioTimeout)
	defer cancel()
	if u, ok := l.store.(Undoer); ok {
		u.Undo(ioCtx, key, token, ttl, time.Now())
		return
	}
	_, _ = l.store.Release(ioCtx, key, token)
}

// storageErr wraps a store error in ErrStorage. A context deadline that fired
// inside the store is our I/O timeout, not the caller's: it is reported as
// such and not wrapped, so that errors.Is(err, context.DeadlineExceeded)
// stays false for storage errors.
func (l *Locker) storageErr(op, name string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %s %q: no reply within the I/O timeout of %v", ErrStorage, op, name, l.cfg.ioTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %s %q: no reply within the I/O timeout of %v: %w", ErrStorage, op, name, l.cfg.ioTimeout, err)
	}
	return fmt.Errorf("%w: %s %q: %w", ErrStorage, op, name, err)
}

// releaseShare removes the share of lease in the store. A share whose
// release failed is removed in the background by a ShareUndoer, and
// otherwise expires at its TTL.
func (l *Locker) releaseShare(ctx context.Context, lease *Lease) error {
	sent := time.Now()
	ok, err := l.sharer.ReleaseShare(ctx, lease.key, lease.token)
	if err != nil {
		// As for a lock: the release may not have reached the store, and
		// a ShareUndoer retries it in the background.
		if u, ok := l.store.(ShareUndoer); ok {
			u.UndoShare(ctx, lease.key, lease.token, lease.TTL(), sent)
		}
		return l.storageErr("release", lease.name, err)
	}
	if !ok {
		return fmt.Errorf("%w: release %q: the %s had expired", ErrNotHeld, lease.name, modeLabel(lease.mode, lease.permits))
	}
	return nil
}
