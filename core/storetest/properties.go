package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
)

// properties is the suite, in the order Run runs it: one subtest each,
// followed by the group of holdProperties.
var properties = []property{
	{"MutualExclusion", mutualExclusion},
	{"TTLFreesUnreleasedLock", ttlFreesUnreleasedLock},
	{"ReleaseByOtherTokenKeepsLock", releaseByOtherTokenKeepsLock},
	{"SecondReleaseReportsFalse", secondReleaseReportsFalse},
	{"ExpiredHolderCannotReleaseOrExtend", expiredHolderCannotReleaseOrExtend},
	{"ExtendByOtherTokenKeepsTTL", extendByOtherTokenKeepsTTL},
	{"ExtendByHolderKeepsLock", extendByHolderKeepsLock},
	{"FencesStrictlyIncrease", fencesStrictlyIncrease},
	{"ResentAcquireSucceedsAndResetsTTL", resentAcquireSucceedsAndResetsTTL},
	{"KeysAreIndependent", keysAreIndependent},
	{"BusyIsErrTimeout", busyIsErrTimeout},
	{"CancelIsContextCanceled", cancelIsContextCanceled},
	{"DeadlineIsContextDeadlineExceeded", deadlineIsContextDeadlineExceeded},
	{"StoreDownIsErrStorage", storeDownIsErrStorage},
	{"FreeAcquireIsTryAcquire", freeAcquireIsTryAcquire},
	{"HeldAcquireIsTryAcquire", heldAcquireIsTryAcquire},
	{"UndoByHolderFreesLock", undoByHolderFreesLock},
	{"UndoByOtherTokenKeepsLock", undoByOtherTokenKeepsLock},
	{"UndoOfWaiterLeavesQueue", undoOfWaiterLeavesQueue},
	{"NotifierWakesWatchers", notifierWakesWatchers},
	{"FairMutualExclusion", fairMutualExclusion},
	{"FairGrantsInArrivalOrder", fairGrantsInArrivalOrder},
	{"QueuerReleaseGrantsTheHead", queuerReleaseGrantsTheHead},
	{"QueuerGiveUpPassesTheGrantOn", queuerGiveUpPassesTheGrantOn},
	{"QueuerSkipsDeadWaiters", queuerSkipsDeadWaiters},
	{"QueuerGrantToDeadWaiterExpires", queuerGrantToDeadWaiterExpires},
	{"QueuerPollKeepsPlaces", queuerPollKeepsPlaces},
	{"QueuerPollReportsAGrant", queuerPollReportsAGrant},
	{"QueuerPollGrantsAFreeKey", queuerPollGrantsAFreeKey},
	{"QueuerPollRequeuesALostWaiter", queuerPollRequeuesALostWaiter},
	{"AcquireAllIsAllOrNone", acquireAllIsAllOrNone},
}

// overlap detects broken mutual exclusion directly: each holder calls enter
// when its critical section begins and the returned function when it ends;
// an enter that finds another holder inside is an overlap.
type overlap struct {
	inside, entries, overlaps atomic.Int64
}

func (o *overlap) enter() (exit func()) {
	o.entries.Add(1)
	if o.inside.Add(1) > 1 {
		o.overlaps.Add(1)
	}
	return func() { o.inside.Add(-1) }
}

// mutualExclusion: Lockers on three clients of the store, each with several
// goroutines, take one name in turn; no two critical sections may overlap,
// and every acquire and release succeeds (the wait is generous).
func mutualExclusion(s *suite) {
	exclusion(s, []core.Store{s.store(), s.store(), s.store()})
}

// exclusion is mutualExclusion with a Locker on each of stores, built with
// opts.
func exclusion(s *suite, stores []core.Store, opts ...core.Option) {
	const goroutines, rounds = 3, 10
	name := s.lockName()
	var o overlap
	var errs errorList
	var wg sync.WaitGroup
	for _, st := range stores {
		// A waiter waits only while the others run their sections, which
		// take seconds at most: a minute's budget is never spent.
		l := s.locker(st, append([]core.Option{core.WithWait(time.Minute)}, opts...)...)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					lease, err := l.Acquire(ctx, name)
					if err != nil {
						cancel()
						errs.add("Acquire(%q) with a wait of 1m: %v", name, err)
						return
					}
					exit := o.enter()
					time.Sleep(time.Millisecond)
					exit()
					if err := lease.Release(ctx); err != nil {
						errs.add("Release(%q): %v", name, err)
					}
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	if n := o.overlaps.Load(); n > 0 {
		s.t.Errorf("storetest: %d of %d critical sections overlapped another: two holders had the lock at once",
			n, o.entries.Load())
	}
	errs.report(s.t)
}

// errorList collects the errors of several goroutines and reports the first
// few of them.
type errorList struct {
	mu    sync.Mutex
	first []string
	n     int
}

func (e *errorList) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n++; len(e.first) < 3 {
		e.first = append(e.first, fmt.Sprintf(format, args...))
	}
}

func (e *errorList) report(t tb) {
	t.Helper()
	for _, msg := range e.first {
		t.Errorf("storetest: %s", msg)
	}
	if more := e.n - len(e.first); more > 0 {
		t.Errorf("storetest: and %d more such errors", more)
	}
}

// ttlFreesUnreleasedLock: a lock that is not released stays held until its
// TTL runs out, and is free soon after.
func ttlFreesUnreleasedLock(s *suite) {
	a, b := s.store(), s.store()
	key := s.key()
	start := time.Now()
	s.acquire(a, key, token(), s.ttl, false)
	s.awaitExpiry(b, key, start, time.Now(), s.ttl) // its first attempt comes right after
}

// releaseByOtherTokenKeepsLock: Release with another token than the
// holder's reports false and leaves the lock to its holder.
func releaseByOtherTokenKeepsLock(s *suite) {
	a, b := s.store(), s.store()
	key, holder := s.key(), token()
	s.acquire(a, key, holder, s.long, false)
	if s.release(b, key, token()) {
		s.t.Errorf("storetest: Release of %s with a token that does not hold it reported true", key)
	}
	if !s.held(b, key) {
		s.t.Fatalf("storetest: Release of %s with a token that does not hold it freed the lock: another token took it", key)
	}
	if !s.release(a, key, holder) {
		s.t.Errorf("storetest: Release of %s by its holder reported false", key)
	}
}

// secondReleaseReportsFalse: a Release repeated with the same token, or of
// a key nobody holds, reports false.
func secondReleaseReportsFalse(s *suite) {
	a := s.store()
	key, holder := s.key(), token()
	s.acquire(a, key, holder, s.long, false)
	if !s.release(a, key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	if s.release(a, key, holder) {
		s.t.Errorf("storetest: a second Release of %s with the same token reported true", key)
	}
	if s.release(a, s.key(), token()) {
		s.t.Errorf("storetest: Release of a key that was never taken reported true")
	}
}

// expiredHolderCannotReleaseOrExtend: once a lock has expired and another
// token took it, the former holder's Release and Extend report false and
// leave the new holder's lock alone; an Extend of an expired key that
// nobody took does not bring it back.
func expiredHolderCannotReleaseOrExtend(s *suite) {
	a, b := s.store(), s.store()
	key, old := s.key(), token()
	start := time.Now()
	s.acquire(a, key, old, s.ttl, false)
	next := s.awaitExpiry(b, key, start, time.Now(), s.ttl)
	if ok, _ := s.extend(a, key, old, s.long, false); ok {
		s.t.Errorf("storetest: Extend of %s by a holder whose lock had expired and was taken by another token reported true", key)
	}
	if s.release(a, key, old) {
		s.t.Errorf("storetest: Release of %s by a holder whose lock had expired and was taken by another token reported true", key)
	}
	if !s.held(a, key) {
		s.t.Fatalf("storetest: Extend or Release of %s by its expired holder freed the new holder's lock", key)
	}
	if !s.release(b, key, next) {
		s.t.Fatalf("storetest: Release of %s by its new holder reported false", key)
	}
	if ok, _ := s.extend(a, key, old, s.long, false); ok {
		s.t.Errorf("storetest: Extend of %s, which nobody holds, by a former holder reported true", key)
	}
	if s.held(b, key) {
		s.t.Errorf("storetest: Extend of %s, which nobody holds, by a former holder took the key again", key)
	}
}

// extendByOtherTokenKeepsTTL: Extend with another token than the holder's,
// fenced or not, reports false and leaves the holder's TTL as it was.
func extendByOtherTokenKeepsTTL(s *suite) {
	a, b := s.store(), s.store()
	key := s.key()
	start := time.Now()
	s.acquire(a, key, token(), s.ttl, false)
	set := time.Now()
	if ok, _ := s.extend(b, key, token(), s.long, false); ok {
		s.t.Errorf("storetest: Extend of %s with a token that does not hold it reported true", key)
	}
	if ok, _ := s.extend(b, key, token(), s.long, true); ok {
		s.t.Errorf("storetest: fenced Extend of %s with a token that does not hold it reported true", key)
	}
	s.awaitExpiry(b, key, start, set, s.ttl)
}

// extendByHolderKeepsLock: Extend by the holder reports true and keeps the
// lock past the TTL it was taken with.
//
// An Extend that reports false proves a bug only if it ran before the lock
// could expire; one that returned later (a loaded host) proves nothing, and
// the round is run again with twice the TTL.
func extendByHolderKeepsLock(s *suite) {
	a, b := s.store(), s.store()
	for ttl := s.ttl; ; ttl *= 2 {
		key, holder := s.key(), token()
		start := time.Now()
		s.acquire(a, key, holder, ttl, false)
		set := time.Now()
		ok, _ := s.extend(a, key, holder, s.long, false)
		if !ok {
			if elapsed := time.Since(start); elapsed < s.earliest(ttl) {
				s.t.Fatalf("storetest: Extend of %s by its holder reported false %v after the acquire, before its TTL %v ran out",
					key, elapsed.Round(time.Millisecond), ttl)
			}
			if ttl >= s.long {
				s.t.Fatalf("storetest: this process stalled past the TTL between every acquire and Extend, up to a TTL of %v: cannot tell whether Extend keeps the lock", ttl)
			}
			continue
		}
		sleepUntil(set.Add(s.surelyExpired(ttl) + s.slack))
		if !s.held(b, key) {
			s.t.Fatalf("storetest: %s, taken with TTL %v and extended by its holder to %v, was free %v later",
				key, ttl, s.long, time.Since(start).Round(time.Millisecond))
		}
		if !s.release(a, key, holder) {
			s.t.Errorf("storetest: Release of %s by its holder after an Extend reported false", key)
		}
		return
	}
}

// fencesStrictlyIncrease: fenced acquires and extends of one key, by
// different clients and tokens, draw strictly increasing fencing tokens
// above 0; an acquire that is not fenced gets 0 and does not reset the
// counter. Every store must support fencing.
func fencesStrictlyIncrease(s *suite) {
	a, b := s.store(), s.store()
	key := s.key()
	var last int64
	next := func(what string, fence int64) {
		s.t.Helper()
		if fence <= last {
			s.t.Fatalf("storetest: %s of %s drew fencing token %d after %d: fencing tokens must strictly increase (and be > 0)",
				what, key, fence, last)
		}
		last = fence
	}

	first := token()
	next("a fenced TryAcquire", s.acquire(a, key, first, s.long, true))
	s.release(a, key, first)

	second := token()
	next("a fenced TryAcquire by another client, after a release,", s.acquire(b, key, second, s.long, true))
	ok, fence := s.extend(b, key, second, s.long, true)
	if !ok {
		s.t.Fatalf("storetest: fenced Extend of %s by its holder reported false", key)
	}
	next("a fenced Extend by the holder", fence)
	s.release(b, key, second)

	unfenced := token()
	if fence := s.acquire(a, key, unfenced, s.long, false); fence != 0 {
		s.t.Errorf("storetest: TryAcquire of %s without fencing returned fencing token %d; want 0", key, fence)
	}
	s.release(a, key, unfenced)

	third := token()
	next("a fenced TryAcquire after one without fencing", s.acquire(b, key, third, s.long, true))
}

// resentAcquireSucceedsAndResetsTTL: a TryAcquire sent again with the token
// that holds the key (a retried attempt whose first reply was lost) counts
// as acquired and resets the TTL to the one it carries.
//
// A resent attempt that returned after the first one's lock could have
// expired (a loaded host) may have taken a free key, which proves nothing:
// the round is run again with twice the TTL.
func resentAcquireSucceedsAndResetsTTL(s *suite) {
	a, b := s.store(), s.store()
	for ttl := s.ttl; ; ttl *= 2 {
		key, holder := s.key(), token()
		start := time.Now()
		s.acquire(a, key, holder, ttl, false)
		set := time.Now()
		if ok, _ := s.tryAcquire(a, key, holder, s.long, false); !ok {
			s.t.Fatalf("storetest: TryAcquire of %s sent again with the token that holds it reported false: a retried attempt would wait for itself", key)
		}
		if time.Since(start) >= s.earliest(ttl) {
			if ttl >= s.long {
				s.t.Fatalf("storetest: this process stalled past the TTL between every acquire and its resending, up to a TTL of %v: cannot tell whether a resent attempt resets the TTL", ttl)
			}
			continue
		}
		sleepUntil(set.Add(s.surelyExpired(ttl) + s.slack))
		if !s.held(b, key) {
			s.t.Fatalf("storetest: %s was free %v after a TryAcquire with TTL %v sent again with TTL %v: the resent attempt did not reset the TTL",
				key, time.Since(start).Round(time.Millisecond), ttl, s.long)
		}
		if !s.release(a, key, holder) {
			s.t.Errorf("storetest: Release of %s by its holder reported false", key)
		}
		return
	}
}

// keysAreIndependent: locks on different keys do not block or release each
// other.
func keysAreIndependent(s *suite) {
	a, b := s.store(), s.store()
	k1, k2 := s.key(), s.key()
	t1, t2 := token(), token()
	s.acquire(a, k1, t1, s.long, false)
	if ok, _ := s.tryAcquire(b, k2, t2, s.long, false); !ok {
		s.t.Fatalf("storetest: TryAcquire of %s failed while only %s was held", k2, k1)
	}
	if !s.release(a, k1, t1) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", k1)
	}
	if !s.held(a, k2) {
		s.t.Errorf("storetest: releasing %s freed %s too", k1, k2)
	}
	if !s.release(b, k2, t2) {
		s.t.Errorf("storetest: Release of %s by its holder reported false", k2)
	}
}

// errorKinds are the kinds of error a Locker reports, with their names for
// messages.
var errorKinds = []struct {
	err  error
	name string
}{
	{core.ErrTimeout, "core.ErrTimeout"},
	{core.ErrStorage, "core.ErrStorage"},
	{core.ErrNotHeld, "core.ErrNotHeld"},
	{context.Canceled, "context.Canceled"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
}

// kindName returns the name of the error kind k.
func kindName(k error) string {
	for _, kind := range errorKinds {
		if kind.err == k {
			return kind.name
		}
	}
	return k.Error()
}

// kinds describes err by the kinds it is, for messages.
func kinds(err error) string {
	if err == nil {
		return "no error"
	}
	var names []string
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			names = append(names, k.name)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("an error of no known kind (%v)", err)
	}
	return fmt.Sprintf("%s (%v)", strings.Join(names, " and "), err)
}

// wantKind fails the subtest unless err is of kind want and of no other
// kind.
func (s *suite) wantKind(what string, err, want error, why string) {
	s.t.Helper()
	ok := errors.Is(err, want)
	for _, k := range errorKinds {
		if k.err != want && errors.Is(err, k.err) {
			ok = false
		}
	}
	if !ok {
		s.t.Errorf("storetest: %s: got %s; want %s alone: %s", what, kinds(err), kindName(want), why)
	}
}

// busy returns a Locker that holds a fresh name, and another Locker, on a
// client of its own, that wants it.
func (s *suite) busy() (waiter *core.Locker, name string) {
	s.t.Helper()
	name = s.lockName()
	s.hold(s.locker(s.store()), name)
	return s.locker(s.store()), name
}

// busyIsErrTimeout: an Acquire whose wait runs out while another holder
// keeps the name fails with core.ErrTimeout.
func busyIsErrTimeout(s *suite) {
	l, name := s.busy()
	ctx, cancel := call()
	defer cancel()
	_, err := l.Acquire(ctx, name, core.Wait(100*time.Millisecond))
	s.wantKind("Acquire of a held name with a wait of 100ms", err, core.ErrTimeout,
		"a busy lock is ErrTimeout, and a store that reports a held key as an error turns it into a storage failure")
}

// cancelIsContextCanceled: an Acquire waiting for a held name whose context
// is cancelled fails with context.Canceled, promptly.
func cancelIsContextCanceled(s *suite) {
	l, name := s.busy()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	_, err := l.Acquire(ctx, name, core.Wait(10*time.Second))
	s.wantKind("Acquire of a held name, its context cancelled after 100ms", err, context.Canceled,
		"the caller's cancellation is neither a busy lock nor a storage failure")
	if took := time.Since(start); took > 5*time.Second {
		s.t.Errorf("storetest: Acquire took %v to return after its context was cancelled at 100ms", took.Round(time.Millisecond))
	}
}

// deadlineIsContextDeadlineExceeded: an Acquire waiting for a held name
// whose context's deadline passes fails with context.DeadlineExceeded,
// never ErrTimeout.
func deadlineIsContextDeadlineExceeded(s *suite) {
	l, name := s.busy()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := l.Acquire(ctx, name, core.Wait(10*time.Second))
	s.wantKind("Acquire of a held name with a wait of 10s and a context deadline of 150ms", err, context.DeadlineExceeded,
		"the caller's deadline is neither a busy lock nor a storage failure")
}

// storeDownIsErrStorage: while the store is down (Options.Down), Acquire,
// Extend and Release fail with core.ErrStorage, never ErrTimeout or
// ErrNotHeld; once it is up again (Options.Up) locks work again.
func storeDownIsErrStorage(s *suite) {
	if s.down == nil {
		s.t.Skipf("storetest: no Options.Down and Options.Up: cannot take the store down to check that its failures are ErrStorage")
	}
	st := s.store()
	l := s.locker(st, core.WithWait(time.Second))
	held := s.hold(l, s.lockName())
	name := s.lockName()

	s.down()
	up := sync.OnceFunc(s.up)
	defer up()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := l.Acquire(ctx, name)
	s.wantKind("Acquire with a wait of 1s while the store is down", err, core.ErrStorage,
		"a failing store must not look like a busy lock")
	err = held.Extend(ctx, s.long)
	s.wantKind("Lease.Extend while the store is down", err, core.ErrStorage,
		"a failing store must not look like a lost lock")
	err = held.Release(ctx)
	s.wantKind("Lease.Release while the store is down", err, core.ErrStorage,
		"a failing store must not look like an expired lock")
	up()

	// The store answers again, after its clients have reconnected: the name
	// can be taken, and the held lock released (its Release above did not
	// reach the store).
	deadline := time.Now().Add(15 * time.Second)
	for {
		lease, err := l.Acquire(ctx, name)
		if err == nil {
			if err := lease.Release(ctx); err != nil {
				s.t.Errorf("storetest: Release after Options.Up: %v", err)
			}
			break
		}
		if !errors.Is(err, core.ErrStorage) || time.Now().After(deadline) {
			s.t.Fatalf("storetest: Acquire of a free name after Options.Up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cctx, ccancel := call()
	defer ccancel()
	if _, err := st.Release(cctx, held.Key(), held.Token()); err != nil {
		s.t.Errorf("storetest: Release after Options.Up: %v", err)
	}
}

// notifierWakesWatchers: a store that implements core.Notifier sends a
// notice on the Watch channel of a key after a release of the key through
// another client that called Announce, and none before. Notices may be
// lost: the release is repeated until one arrives, for a few seconds.
func notifierWakesWatchers(s *suite) {
	watcher := s.store()
	wn, ok := watcher.(core.Notifier)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.Notifier", watcher)
	}
	releaser := s.store()
	rn, ok := releaser.(core.Notifier)
	if !ok {
		s.t.Fatalf("storetest: newStore returned a %T that implements core.Notifier and a %T that does not", watcher, releaser)
	}
	wn.Announce()
	rn.Announce()
	key := s.key()
	c, stop := wn.Watch(key)
	defer stop()

	holder := token()
	s.acquire(releaser, key, holder, s.long, false)
	select {
	case <-c:
		s.t.Fatalf("storetest: the Watch channel of %s received a notice while nothing was released: waiters would spin without sleeping", key)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	for releases := 1; ; releases++ {
		if !s.release(releaser, key, holder) {
			s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
		}
		select {
		case <-c:
			return
		case <-time.After(250 * time.Millisecond):
		}
		if time.Since(start) > 20*time.Second { // the subscription may take a while on a loaded host
			s.t.Fatalf("storetest: no notice on the Watch channel of %s after %d announced releases by another client in %v",
				key, releases, time.Since(start).Round(time.Millisecond))
		}
		holder = token()
		s.acquire(releaser, key, holder, s.long, false)
	}
}
