package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
)

// The properties of a Sharer (core.Sharer, the contract of lockstore.Sharer):
// shared holds, the read side of a read-write lock (Curator's
// InterProcessReadWriteLock, Redisson's RReadWriteLock), and numbered
// permits (Curator's InterProcessSemaphoreV2 with numbered leases). They
// run as the subtests of the group "Holds", each skipped for a store that
// is not a Sharer. AcquireAllIsAllOrNone, at the top level, is the property
// of a MultiAcquirer (Redisson's RedissonMultiLock taken in one step).

// holdsGroup is the name of the subtest that groups the Sharer's
// properties.
const holdsGroup = "Holds"

// holdProperties are the properties of a Sharer, in the order RunWith runs
// them, as subtests of holdsGroup.
var holdProperties = []property{
	{"SharesCoexistAndExcludeExclusive", sharesCoexistAndExcludeExclusive},
	{"HoldsNeverOverlapExclusive", holdsNeverOverlapExclusive},
	{"LockersOfEveryModeExclude", lockersOfEveryModeExclude},
	{"PermitsBoundHoldersAndSlots", permitsBoundHoldersAndSlots},
	{"SharesExpireOnTheirOwn", sharesExpireOnTheirOwn},
	{"ModeMismatchIsError", modeMismatchIsError},
	{"WaitingExclusiveBlocksNewShares", waitingExclusiveBlocksNewShares},
	{"ExpiredWaitingRecordFreesShares", expiredWaitingRecordFreesShares},
	{"HeldAcquireReportsShares", heldAcquireReportsShares},
	{"ShareCallsActOnlyForTheirToken", shareCallsActOnlyForTheirToken},
	{"ShareFencesShareTheCounter", shareFencesShareTheCounter},
	{"BadHoldIsInvalidOption", badHoldIsInvalidOption},
}

// sharers returns n new clients of the store as core.Sharers, or skips the
// property if the store is not one.
func (s *suite) sharers(n int) []core.Sharer {
	s.t.Helper()
	shs := make([]core.Sharer, n)
	for i := range shs {
		st := s.store()
		sh, ok := st.(core.Sharer)
		switch {
		case !ok && i == 0:
			s.t.Skipf("storetest: %T does not implement core.Sharer: the properties of shared holds and permits (core.Shared, core.Permits) do not apply", st)
		case !ok:
			s.t.Fatalf("storetest: newStore returned a %T that implements core.Sharer and a %T that does not", shs[0], st)
		}
		shs[i] = sh
	}
	return shs
}

// tryShareErr calls sh.TryAcquireShare and returns its answer whole. A
// share it takes is released when the subtest ends.
func (s *suite) tryShareErr(sh core.Sharer, key, tok string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	ctx, cancel := call()
	defer cancel()
	ok, slot, fence, err := sh.TryAcquireShare(ctx, key, tok, ttl, h, fenced)
	if ok && err == nil {
		s.t.Cleanup(func() {
			ctx, cancel := call()
			defer cancel()
			_, _ = sh.ReleaseShare(ctx, key, tok)
		})
	}
	return ok, slot, fence, err
}

// tryShare calls sh.TryAcquireShare and fails the subtest on an error.
func (s *suite) tryShare(sh core.Sharer, key, tok string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64) {
	s.t.Helper()
	ok, slot, fence, err := s.tryShareErr(sh, key, tok, ttl, h, fenced)
	if err != nil {
		s.t.Fatalf("storetest: TryAcquireShare(%q, ttl %v, %v, fenced %v): %v", key, ttl, h, fenced, err)
	}
	return ok, slot, fence
}

// share takes a share of key for tok, failing the subtest if it cannot;
// what says why it should.
func (s *suite) share(sh core.Sharer, key, tok string, ttl time.Duration, h core.Hold, fenced bool, what string) (int, int64) {
	s.t.Helper()
	ok, slot, fence := s.tryShare(sh, key, tok, ttl, h, fenced)
	if !ok {
		s.t.Fatalf("storetest: TryAcquireShare(%q, %v) reported false %s", key, h, what)
	}
	return slot, fence
}

// noShare fails the subtest if tok takes a share of key; what says why it
// should not.
func (s *suite) noShare(sh core.Sharer, key string, h core.Hold, what string) {
	s.t.Helper()
	if ok, _, _ := s.tryShare(sh, key, token(), s.long, h, false); ok {
		s.t.Fatalf("storetest: TryAcquireShare(%q, %v) by a new token reported true %s", key, h, what)
	}
}

// releaseShare calls sh.ReleaseShare and fails the subtest on an error.
func (s *suite) releaseShare(sh core.Sharer, key, tok string) bool {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, err := sh.ReleaseShare(ctx, key, tok)
	if err != nil {
		s.t.Fatalf("storetest: ReleaseShare(%q): %v", key, err)
	}
	return ok
}

// extendShare calls sh.ExtendShare and fails the subtest on an error.
func (s *suite) extendShare(sh core.Sharer, key, tok string, ttl time.Duration, fenced bool) (bool, int64) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, fence, err := sh.ExtendShare(ctx, key, tok, ttl, fenced)
	if err != nil {
		s.t.Fatalf("storetest: ExtendShare(%q, ttl %v, fenced %v): %v", key, ttl, fenced, err)
	}
	return ok, fence
}

// tryWaiting calls sh.TryAcquireWaiting and fails the subtest on an error.
// A lock it takes is released when the subtest ends.
func (s *suite) tryWaiting(sh core.Sharer, key, tok string, ttl, patience time.Duration, fenced bool) (bool, int64) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, fence, err := sh.TryAcquireWaiting(ctx, key, tok, ttl, patience, fenced)
	if err != nil {
		s.t.Fatalf("storetest: TryAcquireWaiting(%q, ttl %v, patience %v, fenced %v): %v", key, ttl, patience, fenced, err)
	}
	if ok {
		s.t.Cleanup(func() {
			ctx, cancel := call()
			defer cancel()
			_, _ = sh.Release(ctx, key, tok)
		})
	}
	return ok, fence
}

// notStalled fails the subtest if more than the shortest life of a record
// set with ttl has passed since start: what the subtest is about to
// conclude would then prove nothing.
func (s *suite) notStalled(start time.Time, ttl time.Duration, what string) {
	s.t.Helper()
	if elapsed := time.Since(start); elapsed >= s.earliest(ttl) {
		s.t.Fatalf("storetest: this process stalled %v, past a TTL of %v, before %s: cannot tell",
			elapsed.Round(time.Millisecond), ttl, what)
	}
}

// shared is the Hold of a shared holder.
var shared = core.Hold{}

// permits returns the Hold of a holder of one of n permits.
func permits(n int) core.Hold { return core.Hold{N: n} }

// sharesCoexistAndExcludeExclusive: many shared holders, on several
// clients, hold one key at once; while they do (or permit holders do),
// TryAcquire and TryAcquireWaiting of the key fail without an error; while
// an exclusive holder holds a key, TryAcquireShare fails, shared or
// permits.
func sharesCoexistAndExcludeExclusive(s *suite) {
	shs := s.sharers(3)
	key := s.key()
	var toks []string
	for i := range 6 {
		tok := token()
		slot, fence := s.share(shs[i%3], key, tok, s.long, shared, false,
			fmt.Sprintf("while %d other shared holders (and nothing else) held it: shared holders must hold a key together", i))
		if slot != 0 || fence != 0 {
			s.t.Errorf("storetest: TryAcquireShare(%q, shared) without fencing returned slot %d and fence %d; want 0 and 0", key, slot, fence)
		}
		toks = append(toks, tok)
	}
	if ok, _ := s.tryAcquire(shs[0], key, token(), s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquire of %s reported true while 6 shared holders held it", key)
	}
	if ok, _ := s.tryWaiting(shs[1], key, token(), s.long, s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while 6 shared holders held it", key)
	}
	for _, tok := range toks {
		if !s.releaseShare(shs[2], key, tok) {
			s.t.Errorf("storetest: ReleaseShare of %s by a shared holder reported false", key)
		}
	}

	pkey := s.key()
	s.share(shs[0], pkey, token(), s.long, permits(2), false, "of a free key")
	if ok, _ := s.tryAcquire(shs[1], pkey, token(), s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquire of %s reported true while a permit holder held it", pkey)
	}
	if ok, _ := s.tryWaiting(shs[2], pkey, token(), s.long, s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a permit holder held it", pkey)
	}

	xkey, holder := s.key(), token()
	s.acquire(shs[0], xkey, holder, s.long, false)
	s.noShare(shs[1], xkey, shared, "while an exclusive holder held it")
	s.noShare(shs[2], xkey, permits(3), "while an exclusive holder held it")
	if !s.release(shs[0], xkey, holder) {
		s.t.Errorf("storetest: Release of %s by its exclusive holder reported false after refused shares", xkey)
	}
	s.share(shs[1], xkey, token(), s.long, shared, false, "once its exclusive holder released it")
}

// holdChecker detects broken exclusion directly, as overlap does, for
// holders of several modes: each calls enter when its hold begins and the
// returned function when it ends. An exclusive hold that begins beside any
// other, a share that begins beside an exclusive hold, more than n permit
// holders at once or two in one slot are violations.
type holdChecker struct {
	n int // permits of the shares; 0 for shared holds

	mu                sync.Mutex
	exclusive, shares int
	slots             map[int]bool
	entries           int
	violations        []string
	more              int
}

func (c *holdChecker) violation(format string, args ...any) {
	if len(c.violations) < 3 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	} else {
		c.more++
	}
}

// enterExclusive marks the start of an exclusive hold.
func (c *holdChecker) enterExclusive() (exit func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries++
	if c.exclusive > 0 || c.shares > 0 {
		c.violation("an exclusive hold began while %d exclusive and %d shared holds were live", c.exclusive, c.shares)
	}
	c.exclusive++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.exclusive--
	}
}

// enterShare marks the start of a share in slot.
func (c *holdChecker) enterShare(slot int) (exit func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries++
	if c.exclusive > 0 {
		c.violation("a %v hold began while an exclusive hold was live", core.Hold{N: c.n})
	}
	if c.n > 0 {
		switch {
		case c.shares >= c.n:
			c.violation("a permit hold began while %d permit holders of %d were live", c.shares, c.n)
		case slot < 0 || slot >= c.n:
			c.violation("a permit hold got slot %d, outside 0..%d", slot, c.n-1)
		case c.slots[slot]:
			c.violation("a permit hold got slot %d, which a live holder had", slot)
		}
		c.slots[slot] = true
	}
	c.shares++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.shares--
		if c.n > 0 {
			delete(c.slots, slot)
		}
	}
}

// report fails the subtest on the violations seen.
func (c *holdChecker) report(t tb, key string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Errorf("storetest: holds of %s overlapped: %s (%d holds in all)", key, v, c.entries)
	}
	if c.more > 0 {
		t.Errorf("storetest: and %d more overlaps of holds of %s", c.more, key)
	}
}

// holdsNeverOverlapExclusive: goroutines on three clients take one key in
// turn, exclusively (TryAcquire, then TryAcquireWaiting while they wait)
// or shared, many times each; an exclusive hold never overlaps another
// hold. Then the same with permits(2) in place of shared holds: never more
// than 2 permit holders at once, in distinct slots 0 and 1.
func holdsNeverOverlapExclusive(s *suite) {
	shs := s.sharers(3)
	for _, h := range []core.Hold{shared, permits(2)} {
		contend(s, shs, h)
	}
}

// contend runs the rounds of holdsNeverOverlapExclusive with shares held
// as h.
func contend(s *suite, shs []core.Sharer, h core.Hold) {
	const perClient, rounds = 3, 8
	// A bound on the whole run that a working store never reaches: a
	// goroutine that has not done its rounds by then stops, and the
	// property checks what was done.
	deadline := time.Now().Add(10 * time.Second)
	key := s.key()
	c := &holdChecker{n: h.N, slots: map[int]bool{}}
	var errs errorList
	var exclusive, shares atomic.Int64 // the holds of each kind taken
	var wg sync.WaitGroup
	for i, sh := range shs {
		for g := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					excl := (i+g+r)%3 == 0
					if !hold(s, sh, key, h, excl, deadline, c, &errs) {
						return
					}
					if excl {
						exclusive.Add(1)
					} else {
						shares.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	c.report(s.t, key)
	errs.report(s.t)
	if e, sh := exclusive.Load(), shares.Load(); e == 0 || sh == 0 {
		s.t.Errorf("storetest: goroutines contending for %s exclusively and with %v took %d exclusive and %d shared holds in 10s: both must be taken",
			key, h, e, sh)
	}
}

// hold takes key once, exclusively or as h, trying until deadline with a
// token per attempt (as the Locker does), marks the hold in c for a moment
// and releases it. It reports whether it held the key and gave it back
// without an error.
func hold(s *suite, sh core.Sharer, key string, h core.Hold, excl bool, deadline time.Time, c *holdChecker, errs *errorList) bool {
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			return false
		}
		tok := token()
		ctx, cancel := call()
		var ok bool
		var slot int
		var err error
		switch {
		case excl && attempt == 0:
			ok, _, err = sh.TryAcquire(ctx, key, tok, s.long, false)
		case excl:
			// A patience like the Locker's: a few seconds.
			patience := roundUp(max(2*time.Second, 3*s.res), s.res)
			ok, _, err = sh.TryAcquireWaiting(ctx, key, tok, s.long, patience, false)
		default:
			ok, slot, _, err = sh.TryAcquireShare(ctx, key, tok, s.long, h, false)
		}
		cancel()
		if err != nil {
			errs.add("attempt on %s (exclusive %v, %v): %v", key, excl, h, err)
			return false
		}
		if !ok {
			time.Sleep(time.Millisecond + rand.N(3*time.Millisecond))
			continue
		}
		var exit func()
		if excl {
			exit = c.enterExclusive()
			time.Sleep(2 * time.Millisecond)
		} else {
			exit = c.enterShare(slot)
			time.Sleep(time.Millisecond)
		}
		exit()
		ctx, cancel = call()
		defer cancel()
		if excl {
			ok, err = sh.Release(ctx, key, tok)
		} else {
			ok, err = sh.ReleaseShare(ctx, key, tok)
		}
		if err != nil || !ok {
			errs.add("release of %s by its holder (exclusive %v, %v): %v, %v", key, excl, h, ok, err)
			return false
		}
		return true
	}
}

// lockersOfEveryModeExclude: MutualExclusion with modes. Lockers on three
// clients of the store, each with several goroutines, take one name in
// turn, exclusively or with core.Shared (then core.Permits(2)), as the
// Locker does it (TryAcquireShare, TryAcquireWaiting, ReleaseShare); an
// exclusive lease never overlaps another lease, permit leases never number
// more than 2 nor share a slot, and every acquire and release succeeds (the
// wait is generous).
func lockersOfEveryModeExclude(s *suite) {
	shs := s.sharers(3)
	for _, n := range []int{0, 2} {
		lockerContend(s, shs, n)
	}
}

// lockerContend runs the rounds of lockersOfEveryModeExclude with shares
// of n permits (0: core.Shared).
func lockerContend(s *suite, shs []core.Sharer, n int) {
	const perClient, rounds = 3, 6
	mode := core.Shared()
	if n > 0 {
		mode = core.Permits(n)
	}
	name := s.lockName()
	c := &holdChecker{n: n, slots: map[int]bool{}}
	var errs errorList
	var wg sync.WaitGroup
	for i, st := range shs {
		// A waiter waits only while the others run their sections, which
		// take seconds at most: a minute's budget is never spent.
		l := s.locker(st, core.WithWait(time.Minute))
		for g := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					excl := (i+g+r)%3 == 0
					opts := []core.CallOption{mode}
					if excl {
						opts = nil
					}
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					lease, err := l.Acquire(ctx, name, opts...)
					if err != nil {
						cancel()
						errs.add("Acquire(%q) (exclusive %v, %v) with a wait of 1m: %v", name, excl, core.Hold{N: n}, err)
						return
					}
					var exit func()
					if excl {
						exit = c.enterExclusive()
						time.Sleep(2 * time.Millisecond)
					} else {
						exit = c.enterShare(lease.Slot())
						time.Sleep(time.Millisecond)
					}
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
	c.report(s.t, name)
	errs.report(s.t)
}

// permitsBoundHoldersAndSlots: permits(3) on three clients: three holders
// get slots 0, 1 and 2, the lowest free each time; a fourth is refused and
// takes nothing; a released slot is the next one given, the lowest first;
// an attempt sent again with a holder's token keeps its slot.
func permitsBoundHoldersAndSlots(s *suite) {
	shs := s.sharers(3)
	key := s.key()
	h := permits(3)
	held := map[string]int{}
	take := func(i, want int, what string) string {
		s.t.Helper()
		tok := token()
		slot, _ := s.share(shs[i%3], key, tok, s.long, h, false, what)
		if slot != want {
			s.t.Fatalf("storetest: TryAcquireShare(%q, %v) gave slot %d %s; want %d, the lowest free slot (live holders' slots: %v)",
				key, h, slot, what, want, slices.Sorted(maps.Values(held)))
		}
		held[tok] = slot
		return tok
	}
	t0 := take(0, 0, "of a free key")
	t1 := take(1, 1, "while one of 3 permits was held")
	t2 := take(2, 2, "while two of 3 permits were held")
	refused := token()
	if ok, _, _ := s.tryShare(shs[0], key, refused, s.long, h, false); ok {
		s.t.Fatalf("storetest: TryAcquireShare(%q, %v) by a fourth token reported true while 3 permit holders held it: more than n holders at once", key, h)
	}
	if s.releaseShare(shs[0], key, refused) {
		s.t.Errorf("storetest: ReleaseShare of %s by a token whose TryAcquireShare was refused reported true: the refused attempt took a share", key)
	}

	if !s.releaseShare(shs[1], key, t1) {
		s.t.Fatalf("storetest: ReleaseShare of %s by the holder of slot 1 reported false", key)
	}
	delete(held, t1)
	t3 := take(0, 1, "after slot 1 was released")
	if !s.releaseShare(shs[0], key, t0) {
		s.t.Fatalf("storetest: ReleaseShare of %s by the holder of slot 0 reported false", key)
	}
	delete(held, t0)
	take(1, 0, "after slot 0 was released")

	for _, tok := range []string{t2, t3} {
		ok, slot, _ := s.tryShare(shs[2], key, tok, s.long, h, false)
		switch {
		case !ok:
			s.t.Fatalf("storetest: TryAcquireShare(%q, %v) sent again with the token of a live holder reported false: a retried attempt would wait for itself", key, h)
		case slot != held[tok]:
			s.t.Fatalf("storetest: TryAcquireShare(%q, %v) sent again with the token of the holder of slot %d gave slot %d: a re-sent attempt keeps its slot",
				key, h, held[tok], slot)
		}
	}
	s.noShare(shs[1], key, h, "while its 3 permits were held (after releases and re-sent attempts)")
}

// sharesExpireOnTheirOwn: each share expires at its own TTL. Of two permit
// holders, a long one taken first and a short one, the short one's slot is
// free again once its TTL has run out (not before), while the long one
// stays live and the key stays held; a key whose shares all ran out is
// free for an exclusive holder; and a TryAcquireShare sent again with a
// holder's token, or its ExtendShare, resets its TTL to the one it carries
// (checked at the end, to share the wait).
func sharesExpireOnTheirOwn(s *suite) {
	shs := s.sharers(3)
	rkey, rset, rttl := renewedShare(s, shs[0], "a re-sent TryAcquireShare", func(key, tok string) bool {
		ok, _, _ := s.tryShare(shs[0], key, tok, s.long, shared, false)
		return ok
	})
	ekey, eset, ettl := renewedShare(s, shs[1], "ExtendShare", func(key, tok string) bool {
		ok, _ := s.extendShare(shs[1], key, tok, s.long, false)
		return ok
	})

	key, long := s.key(), token()
	h := permits(2)
	s.share(shs[0], key, long, s.long, h, false, "of a free key")
	start := time.Now()
	slot, _ := s.share(shs[1], key, token(), s.ttl, h, false, "while one of 2 permits was held")
	set := time.Now()
	for {
		tok := token()
		sent := time.Now()
		ok, got, _ := s.tryShare(shs[2], key, tok, s.long, h, false)
		if ok {
			if elapsed := time.Since(start); elapsed < s.earliest(s.ttl) {
				s.t.Errorf("storetest: the slot of a permit holder of %s with TTL %v was given again %v later: before its TTL ran out (TTL resolution %v)",
					key, s.ttl, elapsed.Round(time.Millisecond), s.res)
			}
			if got != slot {
				s.t.Errorf("storetest: the slot freed by an expired permit holder of %s was %d, but the next holder got %d", key, slot, got)
			}
			break
		}
		if late := sent.Sub(set); late > s.ttl+s.res+s.slack {
			s.t.Fatalf("storetest: a permit holder of %s with TTL %v, not released, still held its slot %v later, while another holder had TTL %v: each share must expire on its own TTL (TTL resolution %v, slack %v)",
				key, s.ttl, late.Round(time.Millisecond), s.long, s.res, s.slack)
		}
		time.Sleep(s.poll)
	}
	if ok, _ := s.extendShare(shs[0], key, long, s.long, false); !ok {
		s.t.Errorf("storetest: ExtendShare of %s by the permit holder with TTL %v reported false after another holder's share expired: it expired with it", key, s.long)
	}
	if ok, _ := s.tryAcquire(shs[2], key, token(), s.long, false); ok {
		s.t.Errorf("storetest: TryAcquire of %s reported true after one of its permit holders expired while two others were live", key)
	}

	// Two shared holders with a short TTL, the second taken after the
	// first: the key is free for an exclusive holder once both ran out.
	skey := s.key()
	start = time.Now()
	s.share(shs[0], skey, token(), s.ttl, shared, false, "of a free key")
	s.share(shs[1], skey, token(), s.ttl, shared, false, "beside a shared holder")
	s.awaitExpiry(shs[2], skey, start, time.Now(), s.ttl)

	for _, r := range []struct {
		key, how string
		set      time.Time
		ttl      time.Duration
	}{{rkey, "a re-sent TryAcquireShare", rset, rttl}, {ekey, "ExtendShare", eset, ettl}} {
		sleepUntil(r.set.Add(s.surelyExpired(r.ttl) + s.slack))
		if !s.held(shs[2], r.key) {
			s.t.Errorf("storetest: a shared holder of %s taken with TTL %v, whose TTL %s reset to %v, was gone %v later: %s did not reset its TTL",
				r.key, r.ttl, r.how, s.long, time.Since(r.set).Round(time.Millisecond), r.how)
		}
	}
}

// renewedShare takes a share of a fresh key with a short TTL on sh, and
// renews it (how) with s.long before it could expire; renew reports whether
// the holder's call reported true. It returns the key, when the share's
// acquire returned, and its first TTL.
//
// A renewal that returned after the share could have expired (a loaded
// host) proves nothing: the round is run again with twice the TTL.
func renewedShare(s *suite, sh core.Sharer, how string, renew func(key, tok string) bool) (key string, set time.Time, ttl time.Duration) {
	s.t.Helper()
	for ttl = s.ttl; ; ttl *= 2 {
		key, tok := s.key(), token()
		start := time.Now()
		s.share(sh, key, tok, ttl, shared, false, "of a free key")
		set = time.Now()
		ok := renew(key, tok)
		if time.Since(start) < s.earliest(ttl) {
			if !ok {
				s.t.Fatalf("storetest: %s of %s by its shared holder, before its TTL %v ran out, reported false (a re-sent attempt would wait for itself)", how, key, ttl)
			}
			return key, set, ttl
		}
		if ttl >= s.long {
			s.t.Fatalf("storetest: this process stalled past the TTL between every TryAcquireShare and %s, up to a TTL of %v: cannot tell whether it resets the TTL", how, ttl)
		}
	}
}

// modeMismatchIsError: a shared hold while permits are live, permits(3)
// while permits(2) are live, and permits while shared holds are live, are
// errors wrapping core.ErrModeMismatch that take nothing; once the shares
// are released, the key can be held in another mode.
func modeMismatchIsError(s *suite) {
	shs := s.sharers(2)
	a, b := shs[0], shs[1]
	mismatch := func(key string, h core.Hold, live string) {
		s.t.Helper()
		tok := token()
		ok, _, _, err := s.tryShareErr(b, key, tok, s.long, h, false)
		if !errors.Is(err, core.ErrModeMismatch) {
			s.t.Errorf("storetest: TryAcquireShare(%q, %v) while %s were live returned %v, %v; want an error wrapping core.ErrModeMismatch",
				key, h, live, ok, err)
		}
		if ok {
			s.t.Errorf("storetest: TryAcquireShare(%q, %v) while %s were live reported true", key, h, live)
		}
		if s.releaseShare(b, key, tok) {
			s.t.Errorf("storetest: ReleaseShare of %s by the token of a TryAcquireShare(%v) refused as a mismatch reported true: the refused attempt took a share", key, h)
		}
	}

	pkey, p := s.key(), token()
	s.share(a, pkey, p, s.long, permits(2), false, "of a free key")
	mismatch(pkey, shared, "permits(2)")
	mismatch(pkey, permits(3), "permits(2)")
	mismatch(pkey, permits(1), "permits(2)")
	// The mismatches took no slot: one permit of 2 is left, and only one.
	if slot, _ := s.share(b, pkey, token(), s.long, permits(2), false, "while one of 2 permits was held (after refused mismatches)"); slot != 1 {
		s.t.Errorf("storetest: TryAcquireShare(%q, permits(2)) gave slot %d beside the holder of slot 0, after refused mismatches; want 1", pkey, slot)
	}
	s.noShare(a, pkey, permits(2), "while both of its 2 permits were held (a mismatch took a slot)")

	skey, sh := s.key(), token()
	s.share(a, skey, sh, s.long, shared, false, "of a free key")
	mismatch(skey, permits(2), "shared holds")
	if !s.releaseShare(a, skey, sh) {
		s.t.Fatalf("storetest: ReleaseShare of %s by its shared holder reported false", skey)
	}
	s.share(b, skey, token(), s.long, permits(2), false, "after its last shared holder released it: the mode of a key lasts only while its shares do")
}

// waitingExclusiveBlocksNewShares: writers do not starve. Once
// TryAcquireWaiting of a key that shared holders hold has failed, a new
// TryAcquireShare fails, before and after the shares are released; the
// waiter's next TryAcquireWaiting, with a token of its own as the Locker
// draws one per attempt, takes the key, and once it releases it, shares are
// taken again (its success cleared the key's record). A waiter of a
// key that permit holders hold keeps its free slots from new holders too.
func waitingExclusiveBlocksNewShares(s *suite) {
	shs := s.sharers(3)
	a, w, c := shs[0], shs[1], shs[2]
	key, reader := s.key(), token()
	s.share(a, key, reader, s.long, shared, false, "of a free key")
	start := time.Now()
	if ok, _ := s.tryWaiting(w, key, token(), s.long, s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a shared holder held it", key)
	}
	s.noShare(c, key, shared, fmt.Sprintf("while an exclusive waiter (TryAcquireWaiting, patience %v) was recorded: writers would starve", s.long))
	if !s.releaseShare(a, key, reader) {
		s.t.Fatalf("storetest: ReleaseShare of %s by its shared holder reported false", key)
	}
	s.noShare(c, key, shared, fmt.Sprintf("after its shares were released, while an exclusive waiter (patience %v) was recorded: the record must outlive the shares, until the waiter takes the key",
		s.long))
	s.notStalled(start, s.long, "the waiter's next attempt")
	// The waiter's next attempt has a token of its own, as the Locker
	// draws one per attempt: the record is the key's, not the token's.
	writer := token()
	if ok, _ := s.tryWaiting(w, key, writer, s.long, s.long, false); !ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s by the recorded waiter reported false once the shares were released", key)
	}
	s.noShare(c, key, shared, "while the waiter held it exclusively")
	if !s.release(w, key, writer) {
		s.t.Fatalf("storetest: Release of %s by the waiter that took it reported false", key)
	}
	s.share(c, key, token(), s.long, shared, false,
		"after the waiter took it and released it: a TryAcquireWaiting that succeeds must clear the key's record, also one that an earlier attempt of the waiter with another token set (the Locker draws a token per attempt)")

	// Permits too: a free slot is not given while a waiter is recorded.
	pkey := s.key()
	s.share(a, pkey, token(), s.long, permits(2), false, "of a free key")
	start = time.Now()
	if ok, _ := s.tryWaiting(w, pkey, token(), s.long, s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a permit holder held it", pkey)
	}
	s.noShare(c, pkey, permits(2), fmt.Sprintf("while one of 2 permits was held and an exclusive waiter (patience %v) was recorded: writers would starve", s.long))
	s.notStalled(start, s.long, "the refused permit")
}

// expiredWaitingRecordFreesShares: the record of a TryAcquireWaiting that
// failed on a shared key blocks new shares for its patience only: a waiter
// that gave up does not block shares for ever.
//
// A refused share proves the record was set only if it was refused before
// the record could expire; one that returned later (a loaded host) proves
// nothing, and the round is run again with twice the patience.
func expiredWaitingRecordFreesShares(s *suite) {
	shs := s.sharers(3)
	a, w, c := shs[0], shs[1], shs[2]
	for patience := roundUp(max(time.Second, 3*s.res), s.res); ; patience *= 2 {
		key := s.key()
		s.share(a, key, token(), s.long, shared, false, "of a free key")
		start := time.Now()
		if ok, _ := s.tryWaiting(w, key, token(), s.long, patience, false); ok {
			s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a shared holder held it", key)
		}
		set := time.Now()
		refused, _, _ := s.tryShare(c, key, token(), s.long, shared, false)
		if time.Since(start) >= s.earliest(patience) {
			if patience >= s.long {
				s.t.Fatalf("storetest: this process stalled past the patience between every TryAcquireWaiting and the next share, up to a patience of %v: cannot tell whether the record expires", patience)
			}
			continue
		}
		if refused {
			s.t.Fatalf("storetest: TryAcquireShare of %s by a new token reported true while an exclusive waiter (patience %v) was recorded: writers would starve", key, patience)
		}
		for {
			sent := time.Now()
			ok, _, _ := s.tryShare(c, key, token(), s.long, shared, false)
			if ok {
				if elapsed := time.Since(start); elapsed < s.earliest(patience) {
					s.t.Errorf("storetest: the record of an exclusive waiter of %s with patience %v stopped blocking shares %v later: before its patience ran out",
						key, patience, elapsed.Round(time.Millisecond))
				}
				return
			}
			if late := sent.Sub(set); late > patience+s.res+s.slack {
				s.t.Fatalf("storetest: the record of an exclusive waiter of %s with patience %v, which made no other attempt, still blocked shares %v later: a waiter that gave up would block shares for ever (TTL resolution %v, slack %v)",
					key, patience, late.Round(time.Millisecond), s.res, s.slack)
			}
			time.Sleep(s.poll)
		}
	}
}

// shareCallsActOnlyForTheirToken: ReleaseShare and ExtendShare with a token
// that holds no share of a key report false and change nothing (the
// holders' shares stay live, and expire at their own TTL); Release and
// Extend (the exclusive calls) with a share's token report false and leave
// the share as it was; ReleaseShare is idempotent and frees only its own
// share.
func shareCallsActOnlyForTheirToken(s *suite) {
	shs := s.sharers(2)
	a, b := shs[0], shs[1]
	key, s1, s2 := s.key(), token(), token()
	s.share(a, key, s1, s.long, shared, false, "of a free key")
	stranger := token()
	if s.releaseShare(b, key, stranger) {
		s.t.Errorf("storetest: ReleaseShare of %s with a token that holds no share of it reported true", key)
	}
	if ok, _ := s.extendShare(b, key, stranger, s.long, false); ok {
		s.t.Errorf("storetest: ExtendShare of %s with a token that holds no share of it reported true", key)
	}
	if ok, _ := s.extendShare(b, key, stranger, s.long, true); ok {
		s.t.Errorf("storetest: fenced ExtendShare of %s with a token that holds no share of it reported true", key)
	}
	if !s.held(b, key) {
		s.t.Fatalf("storetest: ReleaseShare or ExtendShare of %s with a token that holds no share of it freed another token's share: an exclusive holder took the key", key)
	}
	if s.release(b, key, s1) {
		s.t.Errorf("storetest: Release (exclusive) of %s with the token of a shared holder reported true", key)
	}
	if ok, _ := s.extend(b, key, s1, s.long, false); ok {
		s.t.Errorf("storetest: Extend (exclusive) of %s with the token of a shared holder reported true", key)
	}
	if !s.held(b, key) {
		s.t.Fatalf("storetest: Release or Extend (exclusive) of %s with the token of a shared holder freed the share: an exclusive holder took the key", key)
	}
	if ok, _ := s.extendShare(a, key, s1, s.long, false); !ok {
		s.t.Fatalf("storetest: ExtendShare of %s by its shared holder reported false after other tokens' calls", key)
	}

	s.share(b, key, s2, s.long, shared, false, "beside another shared holder")
	if !s.releaseShare(a, key, s1) {
		s.t.Fatalf("storetest: ReleaseShare of %s by a shared holder reported false", key)
	}
	if s.releaseShare(a, key, s1) {
		s.t.Errorf("storetest: a second ReleaseShare of %s with the same token reported true", key)
	}
	if !s.held(a, key) {
		s.t.Fatalf("storetest: ReleaseShare of %s, once and again, by one shared holder freed the other's share: an exclusive holder took the key", key)
	}
	if !s.releaseShare(b, key, s2) {
		s.t.Fatalf("storetest: ReleaseShare of %s by the other shared holder reported false after the first one's releases", key)
	}
	if s.held(a, key) {
		s.t.Errorf("storetest: %s was still held after its last shared holder released it", key)
	}

	// Extends by the wrong calls keep nothing alive: a share with a short
	// TTL expires at it, and the key with it.
	key, short, stranger := s.key(), token(), token()
	start := time.Now()
	s.share(a, key, short, s.ttl, shared, false, "of a free key")
	set := time.Now()
	if ok, _ := s.extendShare(b, key, stranger, s.long, true); ok {
		s.t.Errorf("storetest: ExtendShare of %s with a token that holds no share of it reported true", key)
	}
	if ok, _ := s.extend(b, key, short, s.long, true); ok {
		s.t.Errorf("storetest: Extend (exclusive) of %s with the token of a shared holder reported true", key)
	}
	if s.releaseShare(b, key, stranger) {
		s.t.Errorf("storetest: ReleaseShare of %s with a token that holds no share of it reported true (after its ExtendShare took a share?)", key)
	}
	s.awaitExpiry(b, key, start, set, s.ttl)
}

// shareFencesShareTheCounter: fenced shares, shared or permits, draw their
// fencing tokens from the key's counter of exclusive holds: interleaved
// exclusive and shared acquires and extends by several clients draw
// strictly increasing fences; a share taken without fencing gets 0.
func shareFencesShareTheCounter(s *suite) {
	shs := s.sharers(2)
	a, b := shs[0], shs[1]
	key := s.key()
	var last int64
	next := func(what string, fence int64) {
		s.t.Helper()
		if fence <= last {
			s.t.Fatalf("storetest: %s of %s drew fencing token %d after %d: the fences of a key must strictly increase whatever the mode (and be > 0)",
				what, key, fence, last)
		}
		last = fence
	}

	e1 := token()
	next("a fenced TryAcquire", s.acquire(a, key, e1, s.long, true))
	s.release(a, key, e1)

	r1, r2, r3 := token(), token(), token()
	_, f := s.share(b, key, r1, s.long, shared, true, "of a free key")
	next("a fenced shared TryAcquireShare after an exclusive hold", f)
	_, f = s.share(a, key, r2, s.long, shared, true, "beside a shared holder")
	next("a second fenced shared TryAcquireShare", f)
	ok, f := s.extendShare(b, key, r1, s.long, true)
	if !ok {
		s.t.Fatalf("storetest: fenced ExtendShare of %s by its shared holder reported false", key)
	}
	next("a fenced ExtendShare", f)
	if _, f := s.share(a, key, r3, s.long, shared, false, "beside shared holders"); f != 0 {
		s.t.Errorf("storetest: TryAcquireShare of %s without fencing returned fencing token %d; want 0", key, f)
	}
	for _, r := range []string{r1, r2, r3} {
		s.releaseShare(a, key, r)
	}

	e2 := token()
	next("a fenced TryAcquire after shared holds", s.acquire(b, key, e2, s.long, true))
	ok, f = s.extend(b, key, e2, s.long, true)
	if !ok {
		s.t.Fatalf("storetest: fenced Extend of %s by its holder reported false", key)
	}
	next("a fenced Extend", f)
	s.release(b, key, e2)

	p := token()
	_, f = s.share(a, key, p, s.long, permits(2), true, "of a free key")
	next("a fenced TryAcquireShare of permits(2)", f)
	if ok, f = s.extendShare(a, key, p, s.long, true); !ok {
		s.t.Fatalf("storetest: fenced ExtendShare of %s by its permit holder reported false", key)
	}
	next("a fenced ExtendShare of a permit", f)
	s.releaseShare(a, key, p)

	next("a fenced TryAcquire after a permit", s.acquire(b, key, token(), s.long, true))
}

// badHoldIsInvalidOption: TryAcquireShare with a Hold out of range (N < 0
// or N > core.MaxPermits) returns an error wrapping core.ErrInvalidOption
// and sets nothing; N == core.MaxPermits is in range.
func badHoldIsInvalidOption(s *suite) {
	shs := s.sharers(2)
	a, b := shs[0], shs[1]
	for _, h := range []core.Hold{{N: -1}, {N: core.MaxPermits + 1}} {
		for _, fenced := range []bool{false, true} {
			key, tok := s.key(), token()
			ok, _, _, err := s.tryShareErr(a, key, tok, s.long, h, fenced)
			if !errors.Is(err, core.ErrInvalidOption) {
				s.t.Errorf("storetest: TryAcquireShare(%q, Hold{N: %d}, fenced %v) returned %v, %v; want an error wrapping core.ErrInvalidOption",
					key, h.N, fenced, ok, err)
			}
			if ok {
				s.t.Errorf("storetest: TryAcquireShare(%q, Hold{N: %d}) reported true", key, h.N)
			}
			if s.releaseShare(b, key, tok) {
				s.t.Errorf("storetest: ReleaseShare of %s by the token of a TryAcquireShare(Hold{N: %d}) reported true: bad input took a share", key, h.N)
			}
			if s.held(b, key) {
				s.t.Fatalf("storetest: %s was held after TryAcquireShare(Hold{N: %d}): bad input must change nothing", key, h.N)
			}
			s.share(b, key, token(), s.long, shared, false, fmt.Sprintf("after a refused TryAcquireShare(Hold{N: %d}): bad input must change nothing", h.N))
		}
	}
	key := s.key()
	if slot, _ := s.share(a, key, token(), s.long, permits(core.MaxPermits), false, "of a free key (n = core.MaxPermits is in range)"); slot != 0 {
		s.t.Errorf("storetest: TryAcquireShare(%q, permits(%d)) of a free key gave slot %d; want 0", key, core.MaxPermits, slot)
	}
}

// acquireAllIsAllOrNone: for a store that implements core.MultiAcquirer,
// TryAcquireAll of keys one of which another token holds reports false
// and sets none of the others; of free keys, it sets each to the token
// (each released by Store.Release) and draws, per key, a fence above the
// key's last one. Keys are tried twice: of independent names, and of one
// hash tag (a Redis Cluster takes only those in one step); an answer
// wrapping core.ErrNotAtomic is a store saying it cannot, and the property
// is skipped only if every answer is that.
func acquireAllIsAllOrNone(s *suite) {
	st := s.store()
	m, ok := st.(core.MultiAcquirer)
	if !ok {
		s.t.Skipf("storetest: %T does not implement core.MultiAcquirer: names are taken one by one", st)
	}
	other := s.store()
	tag := s.lockName()
	sets := []struct {
		what string
		keys []string
	}{
		{"keys of independent names", []string{s.key(), s.key(), s.key()}},
		{"keys of one hash tag", []string{"storetest:{" + tag + "}:a", "storetest:{" + tag + "}:b", "storetest:{" + tag + "}:c"}},
	}
	atomic := 0
	for _, set := range sets {
		if allOrNone(s, m, st, other, set.what, set.keys) {
			atomic++
		}
	}
	if atomic == 0 {
		s.t.Skipf("storetest: TryAcquireAll answered core.ErrNotAtomic for every set of keys: nothing is taken in one step")
	}
}

// allOrNone checks acquireAllIsAllOrNone on keys, reporting false if the
// store answered ErrNotAtomic.
func allOrNone(s *suite, m core.MultiAcquirer, st, other core.Store, what string, keys []string) bool {
	s.t.Helper()
	tryAll := func(tok string, fenced bool) (bool, []int64, bool) {
		s.t.Helper()
		ctx, cancel := call()
		defer cancel()
		// Whatever it answers, what it may have set goes when the subtest
		// ends.
		s.t.Cleanup(func() {
			for _, k := range keys {
				ctx, cancel := call()
				_, _ = st.Release(ctx, k, tok)
				cancel()
			}
		})
		ok, fences, err := m.TryAcquireAll(ctx, keys, tok, s.long, fenced)
		if errors.Is(err, core.ErrNotAtomic) {
			return false, nil, false
		}
		if err != nil {
			s.t.Fatalf("storetest: TryAcquireAll(%v) of %s: %v", keys, what, err)
		}
		return ok, fences, true
	}
	// noneHeld fails the subtest if tok holds any of keys but the one
	// skipped.
	noneHeld := func(skip int, why string) {
		s.t.Helper()
		for i, k := range keys {
			if i != skip && s.held(other, k) {
				s.t.Fatalf("storetest: %s of %s was held after a TryAcquireAll %s: it must never leave some keys set and others not", k, what, why)
			}
		}
	}

	// The last fence of each key, drawn in an order other than the keys'.
	last := make([]int64, len(keys))
	for _, i := range []int{2, 0, 1, 2} {
		tok := token()
		last[i] = s.acquire(other, keys[i], tok, s.long, true)
		s.release(other, keys[i], tok)
	}

	holder, tok := token(), token()
	s.acquire(other, keys[1], holder, s.long, false)
	ok, _, atomic := tryAll(tok, true)
	if !atomic {
		noneHeld(1, "answered core.ErrNotAtomic")
		return false
	}
	if ok {
		s.t.Fatalf("storetest: TryAcquireAll(%v) of %s reported true while another token held %s", keys, what, keys[1])
	}
	noneHeld(1, "that reported false (another token held "+keys[1]+")")
	if !s.release(other, keys[1], holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false after a TryAcquireAll that failed: it took the key over", keys[1])
	}

	ok, fences, atomic := tryAll(tok, true)
	if !atomic {
		noneHeld(-1, "answered core.ErrNotAtomic")
		return false
	}
	if !ok {
		s.t.Fatalf("storetest: TryAcquireAll(%v) of free %s reported false", keys, what)
	}
	if len(fences) != len(keys) {
		s.t.Fatalf("storetest: fenced TryAcquireAll(%v) of %s returned %d fences; want one per key", keys, what, len(fences))
	}
	for i, k := range keys {
		if fences[i] <= last[i] {
			s.t.Errorf("storetest: fenced TryAcquireAll of %s drew fence %d for %s, whose last fence was %d: fences of a key must strictly increase",
				what, fences[i], k, last[i])
		}
		if !s.held(other, k) {
			s.t.Fatalf("storetest: %s of %s was free after a TryAcquireAll that reported true", k, what)
		}
	}
	for i, k := range keys {
		if !s.release(other, k, tok) {
			s.t.Fatalf("storetest: Release of %s by the token of a TryAcquireAll that took it reported false", k)
		}
		next := token()
		if f := s.acquire(other, k, next, s.long, true); f <= fences[i] {
			s.t.Errorf("storetest: a fenced TryAcquire of %s after a TryAcquireAll drew fence %d, not above its fence %d", k, f, fences[i])
		}
		s.release(other, k, next)
	}
	return true
}
