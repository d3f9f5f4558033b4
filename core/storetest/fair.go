package storetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
)

// The properties of the fair queue (core.WithFair), for a store that
// implements core.Queuer; each is skipped for the others.

// queuers returns n new clients of the store as core.Queuers, or skips the
// property if the store is not one.
func (s *suite) queuers(n int) []core.Queuer {
	s.t.Helper()
	qs := make([]core.Queuer, n)
	for i := range qs {
		st := s.store()
		q, ok := st.(core.Queuer)
		switch {
		case !ok && i == 0:
			s.t.Skipf("storetest: %T does not implement core.Queuer: the fair queue's properties (WithFair) do not apply", st)
		case !ok:
			s.t.Fatalf("storetest: newStore returned a %T that implements core.Queuer and a %T that does not", qs[0], st)
		}
		qs[i] = q
	}
	return qs
}

// stores returns qs as core.Stores.
func stores(qs []core.Queuer) []core.Store {
	st := make([]core.Store, len(qs))
	for i, q := range qs {
		st[i] = q
	}
	return st
}

// enqueue calls q.Enqueue and fails the subtest on an error. Every token it
// queues leaves the queue when the subtest ends (Dequeue, which also
// releases the key if the token holds it).
func (s *suite) enqueue(q core.Queuer, key, tok string, ttl, patience time.Duration, fenced bool) core.Grant {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	g, err := q.Enqueue(ctx, key, tok, ttl, patience, fenced)
	if err != nil {
		s.t.Fatalf("storetest: Enqueue(%q, ttl %v, patience %v, fenced %v): %v", key, ttl, patience, fenced, err)
	}
	if !s.leaving[tok] {
		s.leaving[tok] = true
		s.t.Cleanup(func() {
			ctx, cancel := call()
			defer cancel()
			_ = q.Dequeue(ctx, key, tok)
		})
	}
	return g
}

// takeFree enqueues tok for key, which nobody holds or waits for, and fails
// the subtest unless tok takes it.
func (s *suite) takeFree(q core.Queuer, key, tok string) {
	s.t.Helper()
	if !s.enqueue(q, key, tok, s.long, s.long, false).OK {
		s.t.Fatalf("storetest: Enqueue of %s, which nobody holds or waits for, did not take it", key)
	}
}

// queue enqueues tok for key, which another token holds, and fails the
// subtest if tok takes it.
func (s *suite) queue(q core.Queuer, key, tok string, patience time.Duration, fenced bool) {
	s.t.Helper()
	if s.enqueue(q, key, tok, s.long, patience, fenced).OK {
		s.t.Fatalf("storetest: Enqueue of %s, which another token holds, took it", key)
	}
}

// dequeue calls q.Dequeue and fails the subtest on an error.
func (s *suite) dequeue(q core.Queuer, key, tok string) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	if err := q.Dequeue(ctx, key, tok); err != nil {
		s.t.Fatalf("storetest: Dequeue(%q): %v", key, err)
	}
}

// fairMutualExclusion: MutualExclusion with Lockers built WithFair, which
// wait in the store's queue instead of spinning.
func fairMutualExclusion(s *suite) {
	exclusion(s, stores(s.queuers(3)), core.WithFair())
}

// inLine is a Queuer that tells, on queued, when an Enqueue left its caller
// in line.
type inLine struct {
	core.Queuer
	queued chan struct{} // capacity 1
}

func (q inLine) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	g, err := q.Queuer.Enqueue(ctx, key, token, ttl, patience, fenced)
	if err == nil && !g.OK {
		select {
		case q.queued <- struct{}{}:
		default:
		}
	}
	return g, err
}

// fairGrantsInArrivalOrder: Lockers built WithFair, each on a client of its
// own, queue for a held name one after the other (each once the one before
// it is in line); when the holder releases, they get the name in the order
// they queued.
func fairGrantsInArrivalOrder(s *suite) {
	const waiters = 5
	qs := s.queuers(waiters + 1)
	name := s.lockName()
	first := s.hold(s.locker(qs[0], core.WithFair()), name)
	order := make(chan int, waiters)
	var errs errorList
	var wg sync.WaitGroup
	for i := 1; i <= waiters; i++ {
		q := inLine{qs[i], make(chan struct{}, 1)}
		// A patience no stall of a loaded host outlasts: a waiter whose place
		// died between two polls would queue again at the back.
		l := s.locker(q, core.WithFairPatience(30*time.Second), core.WithWait(time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			lease, err := l.Acquire(ctx, name)
			if err != nil {
				errs.add("waiter %d: Acquire(%q) with a wait of 1m: %v", i, name, err)
				return
			}
			order <- i
			if err := lease.Release(ctx); err != nil {
				errs.add("waiter %d: Release(%q): %v", i, name, err)
			}
		}()
		select {
		case <-q.queued:
		case <-time.After(30 * time.Second):
			errs.add("waiter %d was not in line for %q 30s after its Acquire began", i, name)
		}
	}
	ctx, cancel := call()
	defer cancel()
	if err := first.Release(ctx); err != nil {
		errs.add("Release(%q) by its first holder: %v", name, err)
	}
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	want := make([]int, waiters)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		s.t.Errorf("storetest: %d waiters that queued for a held name one after the other got it in the order %v; want the order they queued in, %v",
			waiters, got, want)
	}
	errs.report(s.t)
}

// awaitGrant returns the first grant (OK) that c receives within d; a store
// may also send poll requests (a Grant without OK), which it skips.
func awaitGrant(c <-chan core.Grant, d time.Duration) (core.Grant, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case g := <-c:
			if g.OK {
				return g, true
			}
		case <-timer.C:
			return core.Grant{}, false
		}
	}
}

// queuerReleaseGrantsTheHead: with two waiters in line (Enqueue), a Release
// by the holder grants the key to the first, which learns it on its Grants
// channel without polling (a grant with the fence its next Enqueue returns
// and a TTL within the one it asked for); the second still waits. Grants
// may be lost (the subscription may not be in place yet): the round is
// repeated, the new holder releasing, for 20 s (a loaded host may take
// seconds to set up the subscription).
func queuerReleaseGrantsTheHead(s *suite) {
	qs := s.queuers(3)
	key := s.key()
	holder, hq := token(), qs[0]
	if !s.enqueue(hq, key, holder, s.long, s.long, true).OK {
		s.t.Fatalf("storetest: Enqueue of %s, which nobody holds or waits for, did not take it", key)
	}
	start := time.Now()
	for round := 1; ; round++ {
		head, second := token(), token()
		hd := qs[round%2] // not the holder's client
		s.queue(hd, key, head, s.long, true)
		grants, stop := hd.Grants(key, head)
		s.queue(qs[2], key, second, s.long, true)
		select { // a store may confirm its subscription with a poll request
		case <-grants:
		case <-time.After(100 * time.Millisecond):
		}
		if !s.release(hq, key, holder) {
			s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
		}
		got, heard := awaitGrant(grants, 500*time.Millisecond)
		stop()
		polled := s.enqueue(hd, key, head, s.long, s.long, true)
		if !polled.OK {
			s.t.Fatalf("storetest: a Release of %s with two waiters in line did not grant it to the first: its next Enqueue reports that it waits", key)
		}
		if s.enqueue(qs[2], key, second, s.long, s.long, true).OK {
			s.t.Fatalf("storetest: the second waiter in line for %s took it while a release had granted it to the first", key)
		}
		s.dequeue(qs[2], key, second)
		if heard {
			if got.Fence <= 0 || got.Fence != polled.Fence {
				s.t.Errorf("storetest: the grant of %s on the Grants channel carries fence %d, and the waiter's next Enqueue fence %d: want one fence, above 0",
					key, got.Fence, polled.Fence)
			}
			if got.TTL <= 0 || got.TTL > s.long {
				s.t.Errorf("storetest: the grant of %s on the Grants channel lasts %v: want more than 0 and at most the TTL asked for, %v", key, got.TTL, s.long)
			}
			return
		}
		if time.Since(start) > 20*time.Second {
			s.t.Fatalf("storetest: no grant on the Grants channel of the first waiter in line for %s after %d releases in %v: waiters would learn of their grants only when they poll",
				key, round, time.Since(start).Round(time.Millisecond))
		}
		holder, hq = head, hd
	}
}

// queuerGiveUpPassesTheGrantOn: a waiter that gives up (Dequeue) after a
// release granted it the key, before it knew, passes the key on: the next
// waiter in line holds it at once (another token cannot take it), and its
// next Enqueue says so.
func queuerGiveUpPassesTheGrantOn(s *suite) {
	qs := s.queuers(3)
	key := s.key()
	holder, quitter, next := token(), token(), token()
	s.takeFree(qs[0], key, holder)
	s.queue(qs[1], key, quitter, s.long, false)
	s.queue(qs[2], key, next, s.long, false)
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	s.dequeue(qs[1], key, quitter)
	if !s.held(qs[0], key) {
		s.t.Fatalf("storetest: the first waiter in line for %s gave up (Dequeue) after a release granted it the key, and the key was free with a waiter in line: the grant was not passed on", key)
	}
	if !s.enqueue(qs[2], key, next, s.long, s.long, false).OK {
		s.t.Fatalf("storetest: the first waiter in line for %s gave up (Dequeue) after a release granted it the key, and the next waiter does not hold it: the grant left with the waiter", key)
	}
	if s.release(qs[1], key, quitter) {
		s.t.Errorf("storetest: a waiter that gave up still held %s: its Release reported true", key)
	}
	if !s.release(qs[2], key, next) {
		s.t.Errorf("storetest: Release of %s by the waiter it was passed on to reported false", key)
	}
}

// queuerSkipsDeadWaiters: a waiter that queued and then stopped calling
// Enqueue is dead once its patience has passed; a release skips it and
// grants the key to the live waiter behind it.
func queuerSkipsDeadWaiters(s *suite) {
	qs := s.queuers(3)
	key := s.key()
	patience := s.ttl
	holder, dead, live := token(), token(), token()
	s.takeFree(qs[0], key, holder)
	s.queue(qs[1], key, dead, patience, false)
	queued := time.Now() // after the store set dead's place, however slow the call
	s.queue(qs[2], key, live, s.long, false)
	sleepUntil(queued.Add(patience + patience/100 + s.res + 10*time.Millisecond))
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	if !s.enqueue(qs[2], key, live, s.long, s.long, false).OK {
		s.t.Fatalf("storetest: a release of %s did not grant it to the live waiter behind one that stopped calling Enqueue %v before, past its patience %v",
			key, time.Since(queued).Round(time.Millisecond), patience)
	}
	if !s.release(qs[2], key, live) {
		s.t.Errorf("storetest: Release of %s by the waiter it was granted to reported false", key)
	}
}

// queuerGrantToDeadWaiterExpires: a key that a release granted to a waiter
// that never calls again is held for the waiter's patience, not for the TTL
// it asked for: the next waiter in line gets it then (TTL resolution and
// slack allowed), and not before.
func queuerGrantToDeadWaiterExpires(s *suite) {
	qs := s.queuers(3)
	key := s.key()
	patience := s.ttl
	holder, dead, live := token(), token(), token()
	s.takeFree(qs[0], key, holder)
	s.queue(qs[1], key, dead, patience, false)
	start := time.Now()
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	released := time.Now()
	// The grant was set after start and before released; an Enqueue that
	// takes the key ran before it returned, one that waits after it was
	// sent.
	earliest := patience - s.res - patience/100
	latest := patience + s.res + s.slack
	for {
		sent := time.Now()
		ok := s.enqueue(qs[2], key, live, s.long, s.long, false).OK
		elapsed := time.Since(start)
		if ok {
			if elapsed < earliest {
				s.t.Errorf("storetest: %s was free %v after a release with a waiter in line (patience %v): the release did not grant it to the waiter for its patience",
					key, elapsed.Round(time.Millisecond), patience)
			}
			break
		}
		if late := sent.Sub(released); late > latest {
			s.t.Fatalf("storetest: %s, granted by a release to a waiter that never called again, was still held %v later: the grant must last the waiter's patience %v, not its TTL %v (TTL resolution %v, slack %v)",
				key, late.Round(time.Millisecond), patience, s.long, s.res, s.slack)
		}
		time.Sleep(s.poll)
	}
	if !s.release(qs[2], key, live) {
		s.t.Errorf("storetest: Release of %s by the waiter that got it reported false", key)
	}
}

// waiters returns the places of tokens, each with the TTL ttl, for Poll.
func waiters(ttl time.Duration, tokens ...string) []core.Waiter {
	ws := make([]core.Waiter, len(tokens))
	for i, tok := range tokens {
		ws[i] = core.Waiter{Token: tok, TTL: ttl}
	}
	return ws
}

// pollLine calls q.Poll and fails the subtest on an error or an index out
// of range. A waiter must be polled through the client that queued it, as
// a Locker does.
func (s *suite) pollLine(q core.Queuer, key string, ws []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	i, g, err := q.Poll(ctx, key, ws, patience, fenced)
	if err != nil {
		s.t.Fatalf("storetest: Poll(%q, %d waiters, patience %v, fenced %v): %v", key, len(ws), patience, fenced, err)
	}
	if i < -1 || i >= len(ws) {
		s.t.Fatalf("storetest: Poll of %s for %d waiters returned index %d: want -1 or an index of the waiters", key, len(ws), i)
	}
	if i >= 0 && (!g.OK || g.TTL <= 0 || g.TTL > ws[i].TTL) {
		s.t.Errorf("storetest: Poll of %s returned index %d with the grant %+v: want OK and a TTL above 0 and at most the one asked for, %v",
			key, i, g, ws[i].TTL)
	}
	return i, g
}

// queuerPollKeepsPlaces: waiters that Poll renews every sixth of their
// patience keep their places for three patiences, in arrival order, while
// a waiter that Poll does not list and that stopped polling is skipped: a
// release then grants the key to the first polled waiter, and its release
// to the second. A round in which this process stalled for 3/4 of a patience
// between the calls that keep the waiters alive proves nothing, and is run
// again with twice the patience (three rounds at most).
func queuerPollKeepsPlaces(s *suite) {
	qs := s.queuers(3)
	for round, patience := 1, s.ttl; ; round, patience = round+1, 2*patience {
		if pollKeepsPlaces(s, qs, patience) {
			return
		}
		if round == 3 {
			s.t.Fatalf("storetest: this process stalled for more than 3/4 of the patience in each of %d rounds (the last with a patience of %v): cannot tell whether Poll keeps places",
				round, patience)
		}
	}
}

// pollKeepsPlaces is one round of queuerPollKeepsPlaces on a fresh key. It
// reports false when the round proves nothing: a check failed after a stall.
func pollKeepsPlaces(s *suite, qs []core.Queuer, patience time.Duration) bool {
	key := s.key()
	holder, dead, first, second := token(), token(), token(), token()
	s.takeFree(qs[0], key, holder)
	queued := time.Now()
	s.queue(qs[1], key, dead, patience, false)
	last := time.Now() // before the first renewal of first and second
	s.queue(qs[2], key, first, patience, false)
	s.queue(qs[2], key, second, patience, false)
	stalled := false
	// Listed out of arrival order: Poll must keep the order of the queue.
	ws := waiters(s.long, second, first)
	for time.Since(queued) < 3*patience {
		time.Sleep(patience / 6)
		sent := time.Now()
		if i, _ := s.pollLine(qs[2], key, ws, patience, false); i >= 0 {
			s.t.Fatalf("storetest: Poll of %s, which its holder holds for %v, returned index %d: it granted a held key", key, s.long, i)
		}
		stalled = stalled || time.Since(last) > 3*patience/4
		last = sent
	}
	// Every step from here must end within 3/4 of a patience of the last
	// poll: the places, and the grant of the release, live a patience.
	inTime := func() bool { return !stalled && time.Since(last) <= 3*patience/4 }
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	if !s.held(qs[0], key) {
		if !inTime() {
			return false
		}
		s.t.Fatalf("storetest: a release of %s left it free, with two waiters in line that Poll renewed every %v for %v (patience %v): Poll did not keep their places",
			key, patience/6, 3*patience, patience)
	}
	i, _ := s.pollLine(qs[2], key, ws, patience, false)
	if i == -1 && s.release(qs[1], key, dead) { // whatever the stalls: dead never polled
		s.t.Fatalf("storetest: a release of %s granted it to a waiter that Poll did not list and that stopped polling %v before, past its patience %v: Poll must renew only the waiters it lists",
			key, time.Since(queued).Round(time.Millisecond), patience)
	}
	if i != 1 && !inTime() {
		return false
	}
	switch i {
	case 1:
	case 0:
		s.t.Fatalf("storetest: a release of %s granted it to the second of two waiters that Poll kept in line: want the first, in arrival order", key)
	default:
		s.t.Fatalf("storetest: a release of %s granted it to neither of two waiters that Poll kept in line: Poll reports that neither holds it", key)
	}
	if !s.release(qs[2], key, first) {
		if !inTime() {
			return false
		}
		s.t.Fatalf("storetest: Release of %s by the waiter Poll reported as its holder reported false", key)
	}
	if i, _ := s.pollLine(qs[2], key, ws[:1], patience, false); i != 0 {
		if !inTime() {
			return false
		}
		s.t.Fatalf("storetest: the release of %s by the first of two waiters that Poll kept in line did not grant it to the second (Poll returned %d)", key, i)
	}
	if !s.release(qs[2], key, second) {
		s.t.Errorf("storetest: Release of %s by the waiter Poll reported as its holder reported false", key)
	}
	return true
}

// queuerPollReportsAGrant: a waiter whose grant message is lost learns of
// its grant from Poll: after a release grants the key to the first waiter
// in line, listed second, Poll returns its index with a grant that lasts at
// most the patience and carries a fence above the previous holder's, the
// same as the message on its Grants channel when one came.
func queuerPollReportsAGrant(s *suite) {
	qs := s.queuers(2)
	key := s.key()
	// Less than the TTL asked for, s.long, and long enough that the places
	// outlive a loaded host's stalls until the release.
	patience := s.long / 3
	holder, granted, other := token(), token(), token()
	took := s.enqueue(qs[0], key, holder, s.long, s.long, true)
	if !took.OK {
		s.t.Fatalf("storetest: Enqueue of %s, which nobody holds or waits for, did not take it", key)
	}
	s.queue(qs[1], key, granted, patience, true)
	s.queue(qs[1], key, other, patience, true)
	grants, stop := qs[1].Grants(key, granted)
	defer stop()
	select { // a store may confirm its subscription with a poll request
	case <-grants:
	case <-time.After(100 * time.Millisecond):
	}
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	i, g := s.pollLine(qs[1], key, waiters(s.long, other, granted), patience, true)
	if i != 1 {
		s.t.Fatalf("storetest: Poll of %s after a release granted it to the first waiter in line, listed second, returned index %d: want 1", key, i)
	}
	if g.TTL <= 0 || g.TTL > patience {
		s.t.Errorf("storetest: Poll of %s reports a grant made by a release that lasts %v: want more than 0 and at most the patience, %v", key, g.TTL, patience)
	}
	if g.Fence <= took.Fence {
		s.t.Errorf("storetest: Poll of %s reports a grant made by a release with fence %d: want one above the previous holder's, %d", key, g.Fence, took.Fence)
	}
	if heard, ok := awaitGrant(grants, 500*time.Millisecond); ok && heard.Fence != g.Fence {
		s.t.Errorf("storetest: the grant of %s on the Grants channel carries fence %d, and Poll fence %d: want one fence", key, heard.Fence, g.Fence)
	}
	if !s.release(qs[1], key, granted) {
		s.t.Errorf("storetest: Release of %s by the waiter Poll reported as its holder reported false", key)
	}
}

// queuerPollGrantsAFreeKey: when a holder's lock expires with waiters in
// line, Poll grants the key to the first live waiter and returns its index;
// when that waiter is not among the listed ones, Poll returns -1 and the
// key is held by it all the same.
func queuerPollGrantsAFreeKey(s *suite) {
	qs := s.queuers(3)
	k1, k2 := s.key(), s.key()
	h1, h2, first, second, head, listed := token(), token(), token(), token(), token(), token()
	s.takeFree(qs[0], k1, h1)
	s.takeFree(qs[0], k2, h2)
	s.queue(qs[1], k1, first, s.long, false)
	s.queue(qs[1], k1, second, s.long, false)
	s.queue(qs[2], k2, head, s.long, false)
	s.queue(qs[1], k2, listed, s.long, false)
	// With the waiters in line, the holders let their locks expire: k2's
	// first.
	for _, k := range []struct{ key, holder string }{{k2, h2}, {k1, h1}} {
		if ok, _ := s.extend(qs[0], k.key, k.holder, s.ttl, false); !ok {
			s.t.Fatalf("storetest: Extend of %s by its holder reported false", k.key)
		}
	}
	taken := time.Now()
	sleepUntil(taken.Add(s.ttl + s.ttl/100 + s.res))
	ws := waiters(s.long, second, first)
	for {
		sent := time.Now() // a Poll that did not grant ran after it
		i, _ := s.pollLine(qs[1], k1, ws, s.long, false)
		if i == 1 {
			break
		}
		if i == 0 {
			s.t.Fatalf("storetest: Poll of %s, free with two waiters in line, granted it to the second: want the first", k1)
		}
		if elapsed := sent.Sub(taken); elapsed > s.ttl+s.res+s.slack {
			s.t.Fatalf("storetest: Poll of %s, whose holder's lock (extended to a TTL of %v) expired with two waiters in line, did not grant it %v later: Poll must grant a free key to the first live waiter (TTL resolution %v, slack %v)",
				k1, s.ttl, elapsed.Round(time.Millisecond), s.res, s.slack)
		}
		time.Sleep(s.poll)
	}
	if i, _ := s.pollLine(qs[1], k1, ws[:1], s.long, false); i != -1 {
		s.t.Errorf("storetest: Poll of %s granted it to the second waiter while the first held it", k1)
	}
	if !s.release(qs[1], k1, first) {
		s.t.Errorf("storetest: Release of %s by the waiter Poll granted it to reported false", k1)
	}

	if i, _ := s.pollLine(qs[1], k2, waiters(s.long, listed), s.long, false); i != -1 {
		s.t.Fatalf("storetest: Poll of %s, free with a waiter in line ahead of the one it listed, returned index %d: want -1, the key granted to the first waiter", k2, i)
	}
	if !s.held(qs[0], k2) {
		s.t.Fatalf("storetest: Poll of %s, free with a waiter in line that it did not list, left it free: want it granted to that waiter", k2)
	}
	if i, _ := s.pollLine(qs[2], k2, waiters(s.long, head), s.long, false); i != 0 {
		s.t.Fatalf("storetest: after a Poll of %s that found it free, the first waiter in line does not hold it (its Poll returned %d)", k2, i)
	}
	if !s.release(qs[2], k2, head) {
		s.t.Errorf("storetest: Release of %s by the waiter a Poll granted it to reported false", k2)
	}
}

// queuerPollRequeuesALostWaiter: a waiter that stopped polling past its
// patience and was skipped by a release (the next waiter's Poll shows that
// it holds the key) is queued again at the tail by its next Poll: behind a
// waiter that queued after it, and granted the key once that one releases.
func queuerPollRequeuesALostWaiter(s *suite) {
	qs := s.queuers(4)
	key := s.key()
	patience := s.ttl
	holder, lost, early, late := token(), token(), token(), token()
	s.takeFree(qs[0], key, holder)
	s.queue(qs[1], key, lost, patience, false)
	queued := time.Now()
	s.queue(qs[2], key, early, s.long, false)
	s.queue(qs[3], key, late, s.long, false)
	sleepUntil(queued.Add(patience + patience/100 + s.res + 10*time.Millisecond))
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	if i, _ := s.pollLine(qs[2], key, waiters(s.long, early), s.long, false); i != 0 {
		s.t.Fatalf("storetest: a release of %s did not grant it to the live waiter behind one that stopped polling past its patience %v (its Poll returned %d)",
			key, patience, i)
	}
	lostWs := waiters(s.long, lost)
	if i, _ := s.pollLine(qs[1], key, lostWs, s.long, false); i != -1 {
		s.t.Fatalf("storetest: Poll of %s for a waiter that lost its place returned index %d while another waiter held the key", key, i)
	}
	if !s.release(qs[2], key, early) {
		s.t.Fatalf("storetest: Release of %s by the waiter it was granted to reported false", key)
	}
	if i, _ := s.pollLine(qs[1], key, lostWs, s.long, false); i != -1 {
		s.t.Fatalf("storetest: a waiter of %s that lost its place (skipped as dead) and polled again got the key before a waiter that queued after it: Poll must queue it again at the tail", key)
	}
	if i, _ := s.pollLine(qs[3], key, waiters(s.long, late), s.long, false); i != 0 {
		s.t.Fatalf("storetest: a release of %s did not grant it to the next waiter in line (its Poll returned %d)", key, i)
	}
	if !s.release(qs[3], key, late) {
		s.t.Fatalf("storetest: Release of %s by the waiter it was granted to reported false", key)
	}
	if i, _ := s.pollLine(qs[1], key, lostWs, s.long, false); i != 0 {
		s.t.Fatalf("storetest: a waiter of %s that lost its place (skipped as dead) and polled again did not get the key once every waiter ahead had released it: Poll did not queue it again", key)
	}
	if !s.release(qs[1], key, lost) {
		s.t.Errorf("storetest: Release of %s by the waiter it was granted to reported false", key)
	}
}
