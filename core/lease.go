package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/internal/drift"
)

// Lease is a lock held in a Store. Release it when the critical section
// ends, typically with defer. Its methods are safe for concurrent use.
type Lease struct {
	locker *Locker
	name   string
	key    string
	token  string
	fence  int64
	// mode, permits and slot say how the lease holds its name (Shared,
	// Permits); a share is released and extended through the Sharer.
	mode    Mode
	permits int
	slot    int
	// parts are the leases of the names of an AcquireAll lease, in
	// canonical order; nil for the lease of one name.
	parts []*Lease
	all   *allState

	// parent is the outermost lease of a nested (reentrant) lease, which
	// owns the hold in the store; nil for a lease that owns it itself.
	parent *Lease
	// turn is the lease's turn in the local queue (WithLocalQueue), nil
	// without one; the lease hands it on or leaves it at release.
	turn LocalTurn
	// observers are told how the lease ends; set before Acquire returns.
	observers []LeaseObserver
	unlocked  atomic.Bool // the innermost release link ran

	releaseOnce sync.Once
	releaseErr  error
	extendMu    sync.Mutex // one Extend at a time, so validUntil follows the store

	mu         sync.Mutex
	state      leaseState
	loss       Outcome       // why the lease was lost (OutcomeNotHeld, OutcomeGaveUp); 0 if it was not
	ttl        time.Duration // the TTL last given in the store
	validUntil time.Time     // see validity
	// basis is the TTL validUntil counts from (validUntil less
	// validFor(basis) is when the command that set it was sent): ttl, or
	// less while a shorter extend is on its way, or may still land.
	basis time.Duration
	// unsureTTL is the shortest TTL of the Extends that failed with an
	// error, 0 when none did. Their commands may still land in the store,
	// later than any call sent since (a stalled store runs what it had
	// received in an order of its own), and set the lock to that TTL from
	// then on: the lease counts on no longer a TTL from any later extend.
	unsureTTL time.Duration
	done      chan struct{} // made on the first call of Done
	after     *afterDone    // AfterDone's functions, a list started when done closes
	expiry    *time.Timer   // closes done when validUntil passes
	watch     *watchdog     // renews the hold (WithWatchdog); nil otherwise
	// want is the TTL a lease granted for less (WithFair: a grant lasts the
	// waiter's patience at first) is extended to by its watchdog, which
	// then stops unless WithWatchdog is on; 0 otherwise.
	want time.Duration
}

// leaseState is where a lease is in its life. Every lease starts held:
//
//	held ──Release──────────────────────────────▶ released
//	held ──watchdog gave up / Extend found it gone──▶ lost ──Release──▶ released
//	held ──Release, offered to a local waiter──▶ passing ──taken over──▶ handedOff
//	                                             passing ──not taken──▶ held (Release goes on)
//
// Done is closed in every state but held (and when the validity passes
// while held). A nested lease has a state of its own only for its own
// Release; for the rest it follows its outermost lease.
type leaseState uint8

const (
	stateHeld      leaseState = iota // owns its lock in the store
	stateLost                        // the lock was found gone, or given up; not yet released
	stateReleased                    // Release ran: the store release was sent
	statePassing                     // Release offers the lock to a local waiter
	stateHandedOff                   // the lock passed to the next holder's lease
)

// newLease builds a lease that owns a hold of key with token in the store,
// valid until validUntil, and starts its watchdog (WithWatchdog). Every such
// lease is made here: by Acquire, and by a hand-off for the next holder.
func (l *Locker) newLease(name, key, token string, fence int64, ttl time.Duration, validUntil time.Time, h hold) *Lease {
	lease := &Lease{
		locker:     l,
		name:       name,
		key:        key,
		token:      token,
		fence:      fence,
		mode:       h.mode,
		permits:    h.permits,
		slot:       h.slot,
		ttl:        ttl,
		basis:      ttl,
		validUntil: validUntil,
	}
	if l.cfg.watchdog {
		lease.startWatchdog()
	}
	return lease
}

// nested returns a lease for a reentrant Acquire of outer's name: it shares
// outer's hold in the store and releases nothing itself.
func nested(outer *Lease) *Lease {
	return &Lease{
		locker:  outer.locker,
		name:    outer.name,
		key:     outer.key,
		token:   outer.token,
		fence:   outer.fence,
		mode:    outer.mode,
		permits: outer.permits,
		slot:    outer.slot,
		parent:  outer,
	}
}

// outer returns the lease that owns the hold in the store: l, or the
// outermost lease of a nested one.
func (l *Lease) outer() *Lease {
	if l.parent != nil {
		return l.parent
	}
	return l
}

// held reports whether l still owns its hold, as far as this process knows.
func (l *Lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateHeld && time.Now().Before(l.validUntil)
}

// handedOff reports whether l's lock passed to another lease.
func (l *Lease) handedOff() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateHandedOff
}

// lose moves a held lease to lost for the reason given, and closes Done.
func (l *Lease) lose(reason Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stateHeld {
		l.state, l.loss = stateLost, reason
		l.closeDoneLocked()
	}
}

// beginPass moves a held lease that is still valid to passing, before its
// lock is offered to a local waiter, and reports whether it did.
func (l *Lease) beginPass() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateHeld || !time.Now().Before(l.validUntil) {
		return false
	}
	l.state = statePassing
	return true
}

// endPass moves a lease whose lock no waiter took back to held, unless the
// watchdog gave it up meanwhile.
func (l *Lease) endPass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == statePassing {
		l.state = stateHeld
	}
}

// validity is when a lock given ttl by a command sent at sent is to be taken
// as gone (see internal/drift), so that Done closes before the store frees
// the key.
func validity(sent time.Time, ttl time.Duration) time.Time {
	return drift.Validity(sent, ttl)
}

// validFor is how long a lock given ttl is valid after its command was sent.
func validFor(ttl time.Duration) time.Duration {
	return drift.ValidFor(ttl)
}

// Name returns the lock name given to Acquire; for a lease of
// AcquireAll, the first of its names in canonical order (see Names).
func (l *Lease) Name() string { return l.name }

// Mode returns how the lease holds its name: ModeExclusive, ModeShared or
// ModePermits.
func (l *Lease) Mode() Mode { return l.mode }

// Permits returns the n of Permits(n) the lease was taken with, 0 in the
// other modes.
func (l *Lease) Permits() int { return l.permits }

// Slot returns which of the n slots of Permits(n) the lease holds, 0 to
// n-1, distinct among the name's holders at any instant: a handler works
// on segment Slot() of a hot item's stock. It is 0 in the other modes.
func (l *Lease) Slot() int { return l.slot }

// Key returns the store key that holds the lock.
func (l *Lease) Key() string { return l.key }

// Token returns the lease's random value stored under Key: 128 bits or more
// from crypto/rand, unique to this lease. Release and Extend act only while the
// key still holds it.
func (l *Lease) Token() string { return l.token }

// Fence returns the lease's fencing token (WithFencing), or 0 where fencing
// is off. Tokens are strictly increasing per name: a lease acquired after
// another one of the same name (or handed the hold locally) has a higher
// token, in any process, also across restarts and failovers of the store
// within the limits its documentation states (see WithFencing). They are
// not consecutive. A nested lease has its outermost lease's token.
//
// Pass the token with every write made under the lease to a store that
// keeps, per resource, the highest token it has accepted and rejects writes
// with a lower one; a holder that lost its lock while paused is then refused
// instead of overwriting its successor's work.
func (l *Lease) Fence() int64 { return l.fence }

// TTL returns the lifetime the lock was last given in the store (at acquire or
// Extend): the TTL asked for, or, for a store that holds locks longer than
// asked (a core.TTLRounder: etcd rounds TTLs up to whole seconds and to its
// minimum lease TTL), the TTL the store holds, which is how long the name
// stays taken if the holder dies. ValidUntil and the watchdog count from it
// (from less after an Extend that failed, whose command may still land).
func (l *Lease) TTL() time.Duration {
	if l.parts != nil {
		ttl := l.parts[0].TTL()
		for _, p := range l.parts[1:] {
			ttl = min(ttl, p.TTL())
		}
		return ttl
	}
	l = l.outer()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// ValidUntil returns until when the lease is safe to rely on unless extended:
// the TTL counted from the moment the acquiring (or extending) command was
// sent, less a margin for clock drift (1% of the TTL plus 2 ms). The store frees
// the key a little later.
func (l *Lease) ValidUntil() time.Time {
	if l.parts != nil {
		v := l.parts[0].ValidUntil()
		for _, p := range l.parts[1:] {
			if pv := p.ValidUntil(); pv.Before(v) {
				v = pv
			}
		}
		return v
	}
	l = l.outer()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Done returns a channel that is closed once the lease is released or lost:
// when Release is called, when Extend finds the lock gone, or when the TTL runs
// out (ValidUntil passes) without an Extend, a little before the store frees the
// key. Adapters cancel the request's context when it closes.
//
// Done and Lost read the clock: after a pause of the process (a GC pause, a
// stopped VM) past ValidUntil, the holder's code may run before the lease's
// timer does, and its first call of Done (or Lost) already finds the lease
// lost and the channel closed, including a channel taken before the pause.
//
// With WithWatchdog, Done closes when a renewal finds the lock gone, or when
// the store stayed unreachable until less than one renewal interval of validity
// was left (about a third of the TTL before the lock can expire): time for
// the request to notice and stop before anyone else can take the name.
//
// A nested lease (see Locker.Acquire) returns the channel of its outermost
// lease, which owns the hold.
func (l *Lease) Done() <-chan struct{} {
	if l.parts != nil {
		return l.allDone()
	}
	l = l.outer()
	l.mu.Lock()
	defer l.mu.Unlock()
	valid := time.Now().Before(l.validUntil)
	if l.done == nil {
		l.done = make(chan struct{})
		switch {
		case l.state != stateHeld:
			close(l.done)
		case valid:
			l.expiry = time.AfterFunc(time.Until(l.validUntil), l.expire)
		}
	}
	if l.state == stateHeld && !valid {
		l.closeDoneLocked() // the timer has not run yet: the process was paused
	}
	return l.done
}

// AfterDone arranges to call f in its own goroutine once Done closes (the
// lease released or lost), as context.AfterFunc does for a context: nothing
// waits meanwhile, where a goroutine blocked on Done would cost each
// request a goroutine, and its release the scheduling of it. Adapters
// cancel the request's context with it. The returned stop function
// deregisters f; it reports whether it did so before f was started (false
// once f has been started, or when stop was called before).
func (l *Lease) AfterDone(f func()) (stop func() bool) {
	if l.parts != nil {
		return afterChan(l.allDone(), f)
	}
	l = l.outer()
	done := l.Done() // arms the expiry timer, or finds the lease over
	a := &afterDone{f: f, lease: l}
	l.mu.Lock()
	select {
	case <-done:
		l.mu.Unlock()
		go f()
		return a.never
	default:
	}
	a.next, l.after = l.after, a
	l.mu.Unlock()
	return a.stop
}

// afterDone is a function of AfterDone, in its lease's list.
type afterDone struct {
	f     func()
	lease *Lease
	next  *afterDone
}

// stop takes a out of its lease's list, if it is still there.
func (a *afterDone) stop() bool {
	l := a.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := &l.after; *p != nil; p = &(*p).next {
		if *p == a {
			*p = a.next
			return true
		}
	}
	return false
}

// never is the stop function of a function started at once.
func (*afterDone) never() bool { return false }

// afterChan is AfterDone for a channel that no lease closes itself (a
// lease of AcquireAll, whose Done merges its parts'): a goroutine waits.
func afterChan(done <-chan struct{}, f func()) (stop func() bool) {
	stopped := make(chan struct{})
	var once sync.Once
	started := make(chan bool, 1)
	go func() {
		select {
		case <-done:
			started <- true
			f()
		case <-stopped:
			started <- false
		}
	}()
	return func() bool {
		ran := false
		once.Do(func() {
			close(stopped)
			ran = !<-started
		})
		return ran
	}
}

// expire runs when validUntil passes, unless an Extend moved it meanwhile.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if left := time.Until(l.validUntil); left > 0 && l.state == stateHeld {
		l.expiry.Reset(left)
		return
	}
	l.closeDoneLocked()
}

// closeDoneLocked closes Done (if it was asked for) and stops the watchdog.
func (l *Lease) closeDoneLocked() {
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.watch.signal()
	if l.done != nil {
		select {
		case <-l.done:
		default:
			close(l.done)
		}
	}
	for a := l.after; a != nil; a = a.next {
		go a.f()
	}
	l.after = nil
}

// Lost reports whether the lease lost its lock before it was released or
// handed off: the watchdog gave up renewing it, Extend found the key gone,
// or its validity (ValidUntil) passed, which it reads from the clock (see
// Done). Done is closed then. A nested lease reports its outermost lease's
// state.
func (l *Lease) Lost() bool {
	if l.parts != nil {
		lost := false
		for _, p := range l.parts {
			lost = p.Lost() || lost // each reads its clock: Done agrees
		}
		return lost
	}
	l = l.outer()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stateHeld && !time.Now().Before(l.validUntil) {
		l.closeDoneLocked() // before the timer, after a pause: Done agrees with Lost
		return true
	}
	return l.loss != 0
}

// errReleasePanicked is what Release reports after a Handler panicked in it.
var errReleasePanicked = errors.New("reqlock: release: the handler chain panicked")

// Release deletes the lock if this lease still holds it, through the
// Handlers; or, with a local queue (WithLocalQueue) that has a waiter for the
// name, hands the lock off to it without a store call. It never deletes a
// key that another holder has taken since: it returns an error wrapping
// ErrNotHeld when the lock had expired, or ErrStorage when the store failed:
// a store that is an Undoer (most are) then keeps trying to delete it in the background, so that the name is free
// as soon as the store or the link heals; with the others, the lock
// expires on its TTL.
//
// Release works on a cancelled or expired context: it keeps ctx's values but
// not its cancellation, and bounds the call with the Locker's I/O timeout, so
// that `defer lease.Release(ctx)` in a handler whose request was abandoned
// still frees the name. Release is idempotent: the Handlers run once, and
// later calls return the first call's result.
//
// With a store client that retries failed commands (go-redis's MaxRetries),
// a release whose reply was lost may be sent again and report ErrNotHeld
// although its first transmission deleted the key; either way the key is no
// longer this lease's.
//
// Releasing a nested lease (see Locker.Acquire) releases nothing in the
// store and runs no plugin: the name stays held until its outermost lease is
// released.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: release of a nil lease", ErrNotHeld)
	}
	if l.parts != nil {
		return l.allRelease(ctx)
	}
	if l.parent != nil {
		l.mu.Lock()
		l.state = stateReleased
		l.mu.Unlock()
		return nil
	}
	l.releaseOnce.Do(func() {
		l.stopWatchdog() // no renewal races the release
		ctx := detach(ctx)
		start := time.Now()
		l.mu.Lock()
		before := l.outcomeLocked(start)
		l.mu.Unlock()
		// Stays if a Handler panics, so that later calls do not report success.
		l.releaseErr = errReleasePanicked
		defer func() {
			l.mu.Lock()
			if l.state == stateHeld || l.state == stateLost {
				l.state = stateReleased
			}
			passed := l.state == statePassing || l.state == stateHandedOff
			l.closeDoneLocked()
			l.mu.Unlock()
			l.observeRelease(ctx, start, before, passed, l.releaseErr)
		}()
		l.releaseErr = l.locker.release(ctx, l)
	})
	return l.releaseErr
}

// outcomeLocked is how the lease stands at a release that starts at start:
// OutcomeReleased, or the way it was lost.
func (l *Lease) outcomeLocked(start time.Time) Outcome {
	switch {
	case l.loss != 0:
		return l.loss
	case !start.Before(l.validUntil):
		return OutcomeExpired
	}
	return OutcomeReleased
}

// observeRelease tells the lease's observers how it ended.
func (l *Lease) observeRelease(ctx context.Context, start time.Time, before Outcome, passed bool, err error) {
	if len(l.observers) == 0 {
		return
	}
	outcome := before
	switch {
	case errors.Is(err, errReleasePanicked):
		outcome = OutcomeError
	case before.Lost():
	case passed:
		outcome = OutcomeHandedOff
	case err != nil:
		outcome = Classify(err)
	}
	e := ReleaseEvent{Lease: l, Start: start, End: time.Now(), Outcome: outcome, Err: err}
	for _, o := range l.observers {
		o.ObserveRelease(ctx, e)
	}
}

// Extend resets the lock's lifetime in the store to ttl from now, if this
// lease still holds it (compare-and-extend). It returns an error wrapping
// ErrNotHeld when the lease was released or the lock had expired, in which
// case Done is closed; ErrStorage when the store failed; the context's error
// when ctx ended. ttl is rounded up to whole milliseconds and must be between
// 1 ms and MaxTTL. Calls of Extend on one lease run one at a time. Extending
// a nested lease extends its outermost lease. With WithWatchdog, later
// renewals use ttl (as the store holds it: see TTL), and the next one is
// timed from this Extend.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	ttl, err := checkTTL(ttl, "Extend")
	if err != nil {
		return err
	}
	if l.parts != nil {
		return l.allExtend(ctx, ttl)
	}
	if l.parent != nil {
		l.mu.Lock()
		released := l.state == stateReleased
		l.mu.Unlock()
		if released {
			return fmt.Errorf("%w: extend %q: the nested lease was released", ErrNotHeld, l.name)
		}
		l = l.parent
	}
	if err := l.extend(ctx, ttl); err != nil {
		return err
	}
	l.watch.reschedule()
	return nil
}

// safeTTL is how long the lease counts on a lock that an extend set to ttl,
// from when it was sent: ttl, or less while an Extend of a shorter TTL may
// still land (see unsureTTL). l.mu must be held.
func (l *Lease) safeTTL(ttl time.Duration) time.Duration {
	if l.unsureTTL > 0 {
		return min(ttl, l.unsureTTL)
	}
	return ttl
}

// extend is Extend on a lease that owns its hold, for a valid ttl; a ttl
// of 0 renews it for its TTL (or the one it wants), read once the Extends
// before it are done: a watchdog's renewal that waited for a user's Extend
// must not set the lock back to the TTL the lease had before it.
func (l *Lease) extend(ctx context.Context, ttl time.Duration) error {
	l.extendMu.Lock()
	defer l.extendMu.Unlock()
	l.mu.Lock()
	gone := l.state != stateHeld
	if ttl <= 0 {
		ttl = max(l.ttl, l.want)
	}
	l.mu.Unlock()
	if gone {
		return fmt.Errorf("%w: extend %q: the lease was released or lost", ErrNotHeld, l.name)
	}
	ioCtx, cancel := context.WithTimeout(ctx, l.locker.cfg.ioTimeout)
	defer cancel()
	sent := time.Now()
	// From the moment it is sent, the store may run the extend, whatever
	// becomes of its reply: the lock then expires ttl (as the store holds
	// it) after some moment from sent on, which for a shorter ttl is
	// sooner than the validity the lease had. Keep the earlier of the two
	// until the reply tells.
	held := l.locker.heldFor(ttl)
	l.mu.Lock()
	if v := validity(sent, l.safeTTL(held)); l.state == stateHeld && v.Before(l.validUntil) {
		l.validUntil, l.basis = v, l.safeTTL(held)
		if l.expiry != nil {
			l.expiry.Reset(time.Until(v))
		}
	}
	l.mu.Unlock()
	ok, err := l.locker.extendStore(ioCtx, l, ttl)
	if err != nil {
		l.mu.Lock()
		l.unsureTTL = l.safeTTL(held)
		l.mu.Unlock()
		if cerr := callerErr(ctx); cerr != nil {
			return cerr
		}
		return l.locker.storageErr("extend", l.name, err)
	}
	if !ok {
		l.lose(OutcomeNotHeld)
		return fmt.Errorf("%w: extend %q: the lock had expired", ErrNotHeld, l.name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stateHeld {
		l.ttl, l.basis = held, l.safeTTL(held)
		l.validUntil = validity(sent, l.basis)
		if l.expiry != nil {
			l.expiry.Reset(time.Until(l.validUntil))
		}
	}
	return nil
}
