package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
)

// The properties of an Inspector (core.Inspector, the contract of
// lockstore.Inspector): List finds the held lock keys under a prefix, page
// by page, and nothing else; Inspect tells a key's holders, fair-queue
// waiters, waiting writer and fence as they are; neither changes anything. They run as the subtests of the group
// "Inspect", each skipped for a store that is not an Inspector (and the
// parts of a Sharer or a Queuer skipped for a store that is not one).

// inspectGroup is the name of the subtest that groups the Inspector's
// properties.
const inspectGroup = "Inspect"

// inspectProperties are the properties of an Inspector, in the order
// RunWith runs them, as subtests of inspectGroup.
var inspectProperties = []property{
	{"ListFindsHeldKeysOnly", listFindsHeldKeysOnly},
	{"ListPrefixIsLiteral", listPrefixIsLiteral},
	{"ListPagesCoverEveryKey", listPagesCoverEveryKey},
	{"ListBadLimitOrCursorIsInvalidOption", listBadLimitOrCursorIsInvalidOption},
	{"InspectExclusiveHolder", inspectExclusiveHolder},
	{"InspectShares", inspectShares},
	{"InspectWaitingWriter", inspectWaitingWriter},
	{"InspectFairQueue", inspectFairQueue},
	{"InspectLeavesOutExpiredAndDead", inspectLeavesOutExpiredAndDead},
	{"InspectAndListAreReadOnly", inspectAndListAreReadOnly},
	{"InspectAndListBesideHolds", inspectAndListBesideHolds},
	{"LockerInspectIdentifiesHolders", lockerInspectIdentifiesHolders},
}

// maxListPages bounds the pages of one listing: a List whose cursor never
// comes back "" fails the property instead of running for ever.
const maxListPages = 1 << 20

// inspectors returns n new clients of the store, each a
// core.Inspector, or skips the property if the store is not one.
func (s *suite) inspectors(n int) []core.Store {
	s.t.Helper()
	sts := make([]core.Store, n)
	for i := range sts {
		st := s.store()
		_, ok := st.(core.Inspector)
		switch {
		case !ok && i == 0:
			s.t.Skipf("storetest: %T does not implement core.Inspector: the properties of listing and inspecting locks do not apply", st)
		case !ok:
			s.t.Fatalf("storetest: newStore returned a %T that implements core.Inspector and a %T that does not", sts[0], st)
		}
		sts[i] = st
	}
	return sts
}

// inspectSharers returns n new clients of the store as core.Sharers that
// are Inspectors, or skips the property if the store is not both.
func (s *suite) inspectSharers(n int) []core.Sharer {
	s.t.Helper()
	return inspectorsAs[core.Sharer](s, n, "core.Sharer", "shared holds, permits and waiting writers")
}

// inspectQueuers returns n new clients of the store as core.Queuers that
// are Inspectors, or skips the property if the store is not both.
func (s *suite) inspectQueuers(n int) []core.Queuer {
	s.t.Helper()
	return inspectorsAs[core.Queuer](s, n, "core.Queuer", "the fair queue")
}

// inspectorsAs returns n new clients of the store as Ts (the capability
// called name) that are Inspectors, or skips the property if the store is
// not both: the Inspector's properties of what do not apply.
func inspectorsAs[T any](s *suite, n int, name, what string) []T {
	s.t.Helper()
	sts := s.inspectors(n)
	ts := make([]T, n)
	for i, st := range sts {
		t, ok := st.(T)
		if !ok {
			s.t.Skipf("storetest: %T does not implement %s: the Inspector's properties of %s do not apply", st, name, what)
		}
		ts[i] = t
	}
	return ts
}

// inspector returns st as the Inspector it is.
func inspector(st core.Store) core.Inspector { return st.(core.Inspector) }

// prefixKey returns a fresh listing prefix of the property, shaped like a
// Locker's for names under "<name>:", and a function that returns the key
// of a name under it.
func (s *suite) prefixKey() (prefix string, key func(name string) string) {
	prefix = "storetest:{" + s.lockName() + ":"
	return prefix, func(name string) string { return prefix + name + "}" }
}

// listPage calls List once; the error is returned, a page longer than
// limit or a key outside prefix is a problem.
func listPage(in core.Inspector, prefix, cursor string, limit int) (keys []string, next string, problem string, err error) {
	ctx, cancel := call()
	defer cancel()
	keys, next, err = in.List(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, "", "", err
	}
	if len(keys) > limit {
		return keys, next, fmt.Sprintf("List(%q, cursor %q, limit %d) returned a page of %d keys: no page may be longer than the limit", prefix, cursor, limit, len(keys)), nil
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			return keys, next, fmt.Sprintf("List(%q) returned %q, which does not begin with the prefix", prefix, k), nil
		}
	}
	return keys, next, "", nil
}

// listing follows List's cursor from "" until it comes back "", in pages
// of limit, and returns how many times each key was listed; between two
// pages it calls between (if not nil) with the keys of the page.
func listing(in core.Inspector, prefix string, limit int, between func(page []string)) (map[string]int, error) {
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == maxListPages {
			return seen, fmt.Errorf("List(%q, limit %d) handed out %d pages without a last one (next never came back \"\")", prefix, limit, pages)
		}
		keys, next, problem, err := listPage(in, prefix, cursor, limit)
		if err != nil {
			if cursor != "" {
				return seen, fmt.Errorf("List(%q, cursor %q it handed out, limit %d): %w", prefix, cursor, limit, err)
			}
			return seen, fmt.Errorf("List(%q, limit %d): %w", prefix, limit, err)
		}
		if problem != "" {
			return seen, errors.New(problem)
		}
		for _, k := range keys {
			seen[k]++
		}
		if next == "" {
			return seen, nil
		}
		if between != nil {
			between(keys)
		}
		cursor = next
	}
}

// listAll is listing for the property's goroutine: an error fails the
// subtest.
func (s *suite) listAll(st core.Store, prefix string, limit int) map[string]int {
	s.t.Helper()
	seen, err := listing(inspector(st), prefix, limit, nil)
	if err != nil {
		s.t.Fatalf("storetest: %v", err)
	}
	return seen
}

// inspect calls Inspect, fails the subtest on an error and reports a state
// that no store may answer (malformed).
func (s *suite) inspect(st core.Store, key string) core.KeyState {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ks, err := inspector(st).Inspect(ctx, key)
	if err != nil {
		s.t.Fatalf("storetest: Inspect(%q): %v", key, err)
	}
	for _, p := range malformed(key, ks) {
		s.t.Errorf("storetest: Inspect(%q) returned %s", key, p)
	}
	return ks
}

// malformed returns what is wrong with ks, the answer of Inspect(key),
// whatever the store holds: a holder or waiter without a token or twice,
// an exclusive holder beside another holder, shares of different holds or
// out of their slots, a waiter or the writer that is also a holder,
// negative durations or fences.
func malformed(key string, ks core.KeyState) []string {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if ks.Key != key {
		bad("the state of key %q", ks.Key)
	}
	holders := map[string]bool{}
	exclusive := 0
	for _, h := range ks.Holders {
		switch {
		case h.Token == "":
			bad("a holder without a token (%+v): every holder has the token it holds by", h)
		case holders[h.Token]:
			bad("the holder %q twice", h.Token)
		}
		holders[h.Token] = true
		if h.TTL < 0 || h.Fence < 0 {
			bad("a holder with a negative TTL or fence (%+v)", h)
		}
		if h.Exclusive {
			exclusive++
			if h.Hold != (core.Hold{}) || h.Slot != 0 {
				bad("an exclusive holder with a hold or a slot (%+v): those are a share's", h)
			}
			continue
		}
		switch {
		case h.Hold != ks.Holders[0].Hold:
			bad("shares of different holds, %v and %v: the shares of a key have one mode", ks.Holders[0].Hold, h.Hold)
		case h.Hold.Check() != nil:
			bad("a share of %v, out of range", h.Hold)
		case h.Hold.Shared() && h.Slot != 0:
			bad("a shared holder in slot %d: want 0", h.Slot)
		case !h.Hold.Shared() && (h.Slot < 0 || h.Slot >= h.Hold.N):
			bad("a holder of %v in slot %d: want 0..%d", h.Hold, h.Slot, h.Hold.N-1)
		}
	}
	if exclusive > 0 && len(ks.Holders) > 1 {
		bad("%d holders, %d of them exclusive: an exclusive holder holds a key alone", len(ks.Holders), exclusive)
	}
	waiters := map[string]bool{}
	for _, w := range ks.Waiters {
		switch {
		case w.Token == "":
			bad("a waiter without a token (%+v)", w)
		case waiters[w.Token]:
			bad("the waiter %q twice", w.Token)
		case holders[w.Token]:
			bad("the waiter %q among the holders too: a waiter does not hold the key", w.Token)
		}
		waiters[w.Token] = true
		if w.TTL < 0 || w.Patience < 0 {
			bad("a waiter with a negative TTL or patience (%+v)", w)
		}
	}
	if ks.Writer != "" && holders[ks.Writer] {
		bad("the writer %q among the holders too: a waiting writer does not hold the key", ks.Writer)
	}
	if ks.Fence < 0 {
		bad("the fence %d", ks.Fence)
	}
	return ps
}

// storeTTL is how long st holds a lock asked for ttl (core.TTLRounder).
func storeTTL(st core.Store, ttl time.Duration) time.Duration {
	if r, ok := st.(core.TTLRounder); ok {
		return r.StoreTTL(ttl)
	}
	return ttl
}

// lateEnough is how long after a hold asked for ttl was set the suite
// waits before it inspects it, so that the TTL left is surely less than
// the TTL asked for, TTL resolution and clock rates allowed.
func (s *suite) lateEnough(st core.Store, ttl time.Duration) time.Duration {
	return s.res + storeTTL(st, ttl)/100 + 250*time.Millisecond
}

// checkTTL fails the subtest if got, the TTL left that an Inspect sent at
// sent and returned at returned reported for what, a hold asked for ttl by
// a call sent at start that returned at set, is more than the store can
// hold it still or less than it surely holds it still (TTL resolution and
// 1% for clock rates allowed). 0 is a store that cannot tell.
func (s *suite) checkTTL(st core.Store, what string, got, ttl time.Duration, start, set, sent, returned time.Time) {
	s.t.Helper()
	s.checkLeft("TTL", what, got, ttl, storeTTL(st, ttl), start, set, sent, returned)
}

// checkLeft fails the subtest if got, the time left (kind: "TTL" or
// "patience") that an Inspect sent at sent and returned at returned
// reported for what, asked for asked and kept by the store for held by a
// call sent at start that returned at set, is more than it can have left
// or less than it surely has left (TTL resolution and 1% for clock rates
// allowed). 0 is a store that cannot tell.
func (s *suite) checkLeft(kind, what string, got, asked, held time.Duration, start, set, sent, returned time.Time) {
	s.t.Helper()
	if got == 0 {
		return
	}
	if hi := held - sent.Sub(set) + s.res + held/100; got > hi {
		s.t.Errorf("storetest: Inspect reported a %s left of %v for %s, set with %v at least %v before: more than it can have left (%v at most, TTL resolution %v): the %s asked for, or another's, not its own %s left?",
			kind, got, what, asked, sent.Sub(set).Round(time.Millisecond), hi, s.res, kind, kind)
	}
	if lo := held - returned.Sub(start) - s.res - held/100; got < lo {
		s.t.Errorf("storetest: Inspect reported a %s left of %v for %s, set with %v at most %v before: less than it surely has left (%v at least, TTL resolution %v)",
			kind, got, what, asked, returned.Sub(start).Round(time.Millisecond), lo, s.res)
	}
}

// exclusiveHolder returns the one holder of ks, failing the subtest unless
// it is tok, exclusive.
func (s *suite) exclusiveHolder(ks core.KeyState, key, tok, what string) core.HolderState {
	s.t.Helper()
	if len(ks.Holders) != 1 || !ks.Held() || ks.Holders[0].Token != tok || !ks.Holders[0].Exclusive {
		s.t.Fatalf("storetest: Inspect of %s, %s, returned the holders %+v: want one, exclusive, with the token %q", key, what, ks.Holders, tok)
	}
	return ks.Holders[0]
}

// checkFence fails the subtest unless the fences that Inspect reported for
// key, h's and the key's, agree with fence, the last one h drew (0 is a
// store that cannot tell).
func (s *suite) checkFence(ks core.KeyState, h core.HolderState, key, what string, fence int64) {
	s.t.Helper()
	if h.Fence != 0 && h.Fence != fence {
		s.t.Errorf("storetest: Inspect of %s reported the fence %d for its holder, whose %s drew %d: want that fence (or 0 if the store cannot tell one holder's from the key's)",
			key, h.Fence, what, fence)
	}
	if ks.Fence != 0 && ks.Fence < fence {
		s.t.Errorf("storetest: Inspect of %s reported the key's last fence as %d, below the %d that its holder's %s drew", key, ks.Fence, fence, what)
	}
}

// tokens returns the tokens of ws, in order.
func tokens(ws []core.WaiterState) []string {
	toks := make([]string, len(ws))
	for i, w := range ws {
		toks[i] = w.Token
	}
	return toks
}

// listFindsHeldKeysOnly: List finds every key held under its prefix
// (exclusively, fenced or not; by shared holders and permit holders, also
// with a waiting writer; with waiters in its fair queue) and nothing else:
// not a key nobody ever held, nor one released, nor one whose holders'
// TTLs ran out, nor one outside the prefix, nor one that only waiters or
// a waiting writer's record are left on; and no companion key (fence
// counter, queue, share or waiter record): every key it lists is one the
// property passed to TryAcquire, TryAcquireShare or Enqueue.
func listFindsHeldKeysOnly(s *suite) {
	sts := s.inspectors(3)
	a, b, c := sts[0], sts[1], sts[2]
	prefix, key := s.prefixKey()
	passed := map[string]bool{} // the lock keys the property passed to the store
	want := map[string]string{} // a key that must be listed: how it is held
	not := map[string]string{}  // a key that must not be listed: why
	use := func(name string) string {
		k := key(name)
		passed[k] = true
		return k
	}
	var lastSet time.Time // when the last short hold was set

	k := use("exclusive")
	s.acquire(a, k, token(), s.long, false)
	want[k] = "held exclusively"
	k, tok := use("fenced"), token()
	s.acquire(b, k, tok, s.long, true)
	if ok, _ := s.extend(b, k, tok, s.long, true); !ok {
		s.t.Fatalf("storetest: fenced Extend of %s by its holder reported false", k)
	}
	want[k] = "held exclusively, after a fenced TryAcquire and a fenced Extend"
	k, tok = use("released"), token()
	s.acquire(a, k, tok, s.long, true)
	s.release(a, k, tok)
	not[k] = "its holder released it (after a fenced TryAcquire)"
	k = use("never")
	s.release(b, k, token())
	if ok, _ := s.extend(b, k, token(), s.long, true); ok {
		s.t.Fatalf("storetest: fenced Extend of %s, which nobody holds, reported true", k)
	}
	not[k] = "nobody ever held it (only a Release and a fenced Extend by tokens that did not hold it)"
	k = use("expired")
	s.acquire(c, k, token(), s.ttl, true)
	lastSet = time.Now()
	not[k] = fmt.Sprintf("its holder's TTL of %v ran out", s.ttl)
	stem := strings.TrimSuffix(prefix, ":") + "}"
	s.acquire(a, stem, token(), s.long, false)
	not[stem] = "it is outside the prefix (it is the prefix's stem)"
	outside := "storetest:{" + s.lockName() + ":exclusive}"
	s.acquire(a, outside, token(), s.long, false)
	not[outside] = "it is outside the prefix"

	if _, ok := a.(core.Sharer); ok {
		shs := []core.Sharer{a.(core.Sharer), b.(core.Sharer), c.(core.Sharer)}
		k = use("shared")
		s.share(shs[0], k, token(), s.long, shared, true, "of a free key")
		s.share(shs[1], k, token(), s.long, shared, false, "beside a shared holder")
		want[k] = "held by two shared holders"
		k = use("permits")
		s.share(shs[2], k, token(), s.long, permits(2), true, "of a free key")
		want[k] = "held by a holder of one of 2 permits"
		k = use("writer")
		s.share(shs[0], k, token(), s.long, shared, false, "of a free key")
		if ok, _ := s.tryWaiting(shs[1], k, token(), s.long, s.long, true); ok {
			s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a shared holder held it", k)
		}
		want[k] = "held by a shared holder, with a waiting writer"
		k, tok = use("writeronly"), token()
		s.share(shs[0], k, tok, s.long, shared, false, "of a free key")
		if ok, _ := s.tryWaiting(shs[1], k, token(), s.long, s.long, false); ok {
			s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a shared holder held it", k)
		}
		s.releaseShare(shs[0], k, tok)
		not[k] = "only a waiting writer's record is left on it: its shared holder released it"
		k, tok = use("releasedshare"), token()
		s.share(shs[2], k, tok, s.long, permits(3), true, "of a free key")
		s.releaseShare(shs[2], k, tok)
		not[k] = "its only share was released (after a fenced TryAcquireShare)"
		k = use("expiredshare")
		s.share(shs[1], k, token(), s.ttl, shared, true, "of a free key")
		lastSet = time.Now()
		not[k] = fmt.Sprintf("its only share's TTL of %v ran out", s.ttl)
	}

	if _, ok := a.(core.Queuer); ok {
		qs := []core.Queuer{a.(core.Queuer), b.(core.Queuer), c.(core.Queuer)}
		k = use("queued")
		if !s.enqueue(qs[0], k, token(), s.long, s.long, true).OK {
			s.t.Fatalf("storetest: Enqueue of %s, which nobody holds or waits for, did not take it", k)
		}
		s.queue(qs[1], k, token(), s.long, true)
		s.queue(qs[2], k, token(), s.long, false)
		want[k] = "held, with two waiters in its fair queue"
		k = use("waitersonly")
		if !s.enqueue(qs[0], k, token(), s.ttl, s.long, true).OK {
			s.t.Fatalf("storetest: Enqueue of %s, which nobody holds or waits for, did not take it", k)
		}
		lastSet = time.Now()
		s.queue(qs[1], k, token(), s.long, true)
		not[k] = fmt.Sprintf("only waiters of its fair queue are left on it: its holder's TTL of %v ran out, and nobody called since", s.ttl)
	}

	// The short holds have surely run out by then (the bound of
	// TTLFreesUnreleasedLock).
	sleepUntil(lastSet.Add(s.ttl + s.res + s.slack))
	seen := s.listAll(c, prefix, core.MaxListLimit)
	if k := key("waitersonly"); not[k] != "" && s.inspect(c, k).Held() {
		// A store that hands a key freed by its TTL to the head of its
		// queue by itself (ZooKeeper reaps the dead holder's node), maybe
		// during the listing: the key proves nothing.
		delete(not, k)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if seen[k] == 0 {
			s.t.Errorf("storetest: List(%q) did not list %s, which is %s", prefix, k, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(not)) {
		if seen[k] > 0 {
			s.t.Errorf("storetest: List(%q) listed %s, which is not held: %s", prefix, k, not[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		if !passed[k] {
			s.t.Errorf("storetest: List(%q) listed %q, a key the property never passed to TryAcquire, TryAcquireShare or Enqueue: List lists lock keys only, never a companion key (a fence counter, a queue, a share or waiter record)",
				prefix, k)
		}
	}
}

// listPrefixIsLiteral: List matches its prefix as it is: characters that
// SCAN's MATCH patterns (* ? [ ] \) or SQL's LIKE (% _ \) give a meaning
// to, and letters of another case, match only themselves. It is shown for
// prefixes of both shapes an operator lists under: one inside a key's
// hash tag (a Locker's key "storetest:{name}" under the name prefix
// "name:"), and one before it (a Locker's WithPrefix, its keys
// "prefix{name}"), each beside decoy keys of the same shape.
func listPrefixIsLiteral(s *suite) {
	st := s.inspectors(1)[0]
	stem := "storetest:{" + s.lockName() + ":"
	prefix := stem + `a*b?c[d]e%f_g\h:`
	decoys := map[string]string{
		stem + `aXXbYcde%f_gh:1}`:          "a glob pattern of the prefix matches it (*, ?, [d] and \\h unescaped)",
		stem + `a*b?c[d]eZZfQgh:1}`:        "a LIKE pattern of the prefix matches it (%, _ and \\h unescaped)",
		strings.ToLower(prefix) + "1}":     "it differs from the prefix in case",
		strings.ToUpper(prefix) + "1}":     "it differs from the prefix in case",
		strings.TrimSuffix(prefix, ":"):    "it is the prefix without its last character",
		stem + `a*b?c[d]e%f_g\\h:1}`:       "it has a backslash more than the prefix",
		stem + `a*b?c[d]e%f_g\h` + "}":     "it is shorter than the prefix",
		stem + `a*b?c[d]e%f_g\h;:1}`:       "it differs from the prefix in one character",
		stem + `a*b?c[d]e%f_g\hh:1}`:       "it differs from the prefix in one character",
		"x" + prefix[1:] + "1}":            "it differs from the prefix in its first character",
		"storetest:{" + s.lockName() + "}": "it is outside the prefix",
	}
	s.listsLiterally(st, prefix, prefix+"1}", decoys)

	// The prefix of a Locker's keys, before their hash tag.
	stem = "storetest:" + s.lockName() + ":"
	prefix = stem + `a*b?c[d]e%f_g\h:`
	decoys = map[string]string{
		stem + `aXXbYcde%f_gh:{1}`:                        "a glob pattern of the prefix matches it (*, ?, [d] and \\h unescaped)",
		stem + `a*b?c[d]eZZfQgh:{1}`:                      "a LIKE pattern of the prefix matches it (%, _ and \\h unescaped)",
		strings.ToLower(prefix) + "{1}":                   "it differs from the prefix in case",
		strings.ToUpper(prefix) + "{1}":                   "it differs from the prefix in case",
		strings.TrimSuffix(prefix, ":") + "{1}":           "it is the prefix without its last character, then a hash tag",
		stem + `a*b?c[d]e%f_g\\h:{1}`:                     "it has a backslash more than the prefix",
		stem + `a*b?c[d]e%f_g\h{:1}`:                      "it has the hash tag's brace in place of the prefix's last character",
		"storetest:{" + prefix[len("storetest:"):] + "1}": "it is the prefix with a brace more, its name inside a hash tag",
		"{" + prefix + "1}":                               "it is the prefix inside a hash tag",
		"x" + prefix[1:] + "{1}":                          "it differs from the prefix in its first character",
	}
	s.listsLiterally(st, prefix, prefix+"{1}", decoys)
}

// listsLiterally holds k, which begins with prefix, and the decoys, which
// do not (the reason of each), lists prefix, and fails the subtest unless
// k is listed and no decoy is.
func (s *suite) listsLiterally(st core.Store, prefix, k string, decoys map[string]string) {
	s.t.Helper()
	s.acquire(st, k, token(), s.long, false)
	for d := range decoys {
		s.acquire(st, d, token(), s.long, false)
	}
	seen := s.listAll(st, prefix, core.MaxListLimit)
	if seen[k] == 0 {
		s.t.Errorf("storetest: List(%q) did not list %s, which is held: a prefix's characters must match themselves (escape them in a SCAN MATCH or LIKE pattern)", prefix, k)
	}
	for _, d := range slices.Sorted(maps.Keys(decoys)) {
		if seen[d] > 0 {
			s.t.Errorf("storetest: List(%q) listed %s, which does not begin with the prefix: %s", prefix, d, decoys[d])
		}
	}
}

// listPagesCoverEveryKey: with 25 keys held under a prefix for the whole
// listing, following List's cursor from "" until it comes back "" lists
// every one of them at least once (more than once is allowed, as Redis's
// SCAN does), in pages no longer than the limit, for limits 1, 2, 7, 25
// and core.MaxListLimit.
func listPagesCoverEveryKey(s *suite) {
	sts := s.inspectors(2)
	prefix, key := s.prefixKey()
	const n = 25
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("%02d", i))
		s.acquire(sts[i%2], keys[i], token(), s.long, i%3 == 0)
	}
	for _, limit := range []int{1, 2, 7, n, core.MaxListLimit} {
		seen := s.listAll(sts[1], prefix, limit)
		var missing []string
		for _, k := range keys {
			if seen[k] == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			s.t.Errorf("storetest: List(%q) in pages of at most %d, its cursor followed from \"\" until it came back \"\", never listed %d of the %d keys held for the whole listing: %v: every such key must be on a page",
				prefix, limit, len(missing), n, missing)
		}
		for _, k := range slices.Sorted(maps.Keys(seen)) {
			if !slices.Contains(keys, k) {
				s.t.Errorf("storetest: List(%q) in pages of at most %d listed %q, which the property never held", prefix, limit, k)
			}
		}
	}
}

// listBadLimitOrCursorIsInvalidOption: List with a limit out of 1..
// core.MaxListLimit (0, -1, MaxListLimit+1), or with a cursor it did
// not hand out, returns an error wrapping core.ErrInvalidOption and
// changes nothing.
func listBadLimitOrCursorIsInvalidOption(s *suite) {
	st := s.inspectors(1)[0]
	in := inspector(st)
	prefix, key := s.prefixKey()
	k := key("held")
	s.acquire(st, k, token(), s.long, false)
	for _, limit := range []int{0, -1, core.MaxListLimit + 1} {
		ctx, cancel := call()
		keys, next, err := in.List(ctx, prefix, "", limit)
		cancel()
		if !errors.Is(err, core.ErrInvalidOption) {
			s.t.Errorf("storetest: List(%q, limit %d) returned %q, next %q, error %v: want an error wrapping core.ErrInvalidOption (the limit must be 1..%d)",
				prefix, limit, keys, next, err, core.MaxListLimit)
		}
	}
	for _, cursor := range []string{"!not a cursor " + random(), "\x00"} {
		ctx, cancel := call()
		keys, next, err := in.List(ctx, prefix, cursor, 10)
		cancel()
		if !errors.Is(err, core.ErrInvalidOption) {
			s.t.Errorf("storetest: List(%q, cursor %q, limit 10), a cursor List never handed out, returned %q, next %q, error %v: want an error wrapping core.ErrInvalidOption",
				prefix, cursor, keys, next, err)
		}
	}
	if seen := s.listAll(st, prefix, 10); seen[k] == 0 || !s.held(st, k) {
		s.t.Errorf("storetest: %s was no longer held, or no longer listed, after Lists with bad limits and cursors: bad input must change nothing", k)
	}
}

// inspectExclusiveHolder: Inspect of a key held exclusively reports one
// holder, exclusive, with its token, the TTL it has left (not the TTL it
// asked for) and the fence its fenced TryAcquire drew (also after other
// tokens' attempts failed), then the one its fenced Extend drew; the key's
// fence is at least the holder's. Inspect
// of a free key reports no holder, no waiter and no writer, and no error.
func inspectExclusiveHolder(s *suite) {
	sts := s.inspectors(2)
	a, b := sts[0], sts[1]
	free := s.key()
	if ks := s.inspect(b, free); ks.Held() || len(ks.Holders) > 0 || len(ks.Waiters) > 0 || ks.Writer != "" {
		s.t.Errorf("storetest: Inspect of %s, which nobody ever held or waited for, returned %+v: want no holder, no waiter and no writer", free, ks)
	}

	key, tok := s.key(), token()
	start := time.Now()
	fence := s.acquire(a, key, tok, s.long, true)
	set := time.Now()
	// Other tokens' attempts fail meanwhile, and leave the holder's fence
	// as it drew it.
	for _, fenced := range []bool{true, false, true} {
		if ok, _ := s.tryAcquire(b, key, token(), s.long, fenced); ok {
			s.t.Fatalf("storetest: TryAcquire of %s by another token reported true while its holder held it", key)
		}
	}
	sleepUntil(set.Add(s.lateEnough(a, s.long)))
	sent := time.Now()
	ks := s.inspect(b, key)
	returned := time.Now()
	h := s.exclusiveHolder(ks, key, tok, "taken by a fenced TryAcquire, then tried by other tokens")
	s.checkTTL(a, "the exclusive holder of "+key, h.TTL, s.long, start, set, sent, returned)
	s.checkFence(ks, h, key, "fenced TryAcquire", fence)

	start = time.Now()
	ok, fence := s.extend(a, key, tok, s.long, true)
	set = time.Now()
	if !ok {
		s.t.Fatalf("storetest: fenced Extend of %s by its holder reported false", key)
	}
	sent = time.Now()
	ks = s.inspect(b, key)
	returned = time.Now()
	h = s.exclusiveHolder(ks, key, tok, "after its holder's fenced Extend")
	s.checkTTL(a, "the exclusive holder of "+key+" after its Extend", h.TTL, s.long, start, set, sent, returned)
	s.checkFence(ks, h, key, "fenced Extend", fence)

	plain, ptok := s.key(), token()
	start = time.Now()
	s.acquire(b, plain, ptok, s.long, false)
	set = time.Now()
	sent = time.Now()
	ks = s.inspect(a, plain)
	returned = time.Now()
	h = s.exclusiveHolder(ks, plain, ptok, "taken by a TryAcquire without fencing")
	s.checkTTL(b, "the exclusive holder of "+plain, h.TTL, s.long, start, set, sent, returned)

	if !s.release(a, key, tok) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	if ks := s.inspect(b, key); ks.Held() {
		s.t.Errorf("storetest: Inspect of %s after its holder released it reported the holders %+v: want none", key, ks.Holders)
	}
}

// shareWant is what Inspect must report of one share.
type shareWant struct {
	hold  core.Hold
	slot  int
	fence int64         // 0: not fenced, not checked
	ttl   time.Duration // the TTL it was taken with
}

// checkShares fails the subtest unless ks reports the shares want (by
// token), in slot order, each with the TTL it has left of its own TTL
// (not the key's, which lasts as long as its longest share).
func (s *suite) checkShares(st core.Store, ks core.KeyState, key, what string, want map[string]shareWant, start, set, sent, returned time.Time) {
	s.t.Helper()
	var got []string
	for _, h := range ks.Holders {
		got = append(got, h.Token)
	}
	if len(ks.Holders) != len(want) || !ks.Held() {
		s.t.Fatalf("storetest: Inspect of %s, %s, reported %d holders %q: want the %d shares %q", key, what, len(ks.Holders), got, len(want), slices.Sorted(maps.Keys(want)))
	}
	for i, h := range ks.Holders {
		w, ok := want[h.Token]
		switch {
		case !ok:
			s.t.Errorf("storetest: Inspect of %s, %s, reported the holder %q, which holds no share of it (want %q)", key, what, h.Token, slices.Sorted(maps.Keys(want)))
			continue
		case h.Exclusive || h.Hold != w.hold || h.Slot != w.slot:
			s.t.Errorf("storetest: Inspect of %s, %s, reported the share of %q as %+v: want a share of %v in slot %d (the slot TryAcquireShare returned)",
				key, what, h.Token, h, w.hold, w.slot)
		case i > 0 && h.Slot < ks.Holders[i-1].Slot:
			s.t.Errorf("storetest: Inspect of %s, %s, reported the shares in slots %v: want them in slot order", key, what, slots(ks.Holders))
		}
		if w.fence != 0 && h.Fence != 0 && h.Fence != w.fence {
			s.t.Errorf("storetest: Inspect of %s reported the fence %d for the share of %q, whose fenced TryAcquireShare drew %d: want that fence (or 0 if the store cannot tell one holder's from the key's)",
				key, h.Fence, h.Token, w.fence)
		}
		if w.fence != 0 && ks.Fence != 0 && ks.Fence < w.fence {
			s.t.Errorf("storetest: Inspect of %s reported the key's last fence as %d, below the %d that a share drew", key, ks.Fence, w.fence)
		}
		s.checkTTL(st, fmt.Sprintf("the share of %s held by %q", key, h.Token), h.TTL, w.ttl, start, set, sent, returned)
	}
}

// slots returns the slots of hs, in order.
func slots(hs []core.HolderState) []int {
	ss := make([]int, len(hs))
	for i, h := range hs {
		ss[i] = h.Slot
	}
	return ss
}

// inspectShares: Inspect of a key held by shares (core.Sharer) reports
// each of them, with its token, its hold (shared, permits(n)), the slot
// TryAcquireShare returned, the TTL it has left of its own TTL (not the TTL
// it asked for, nor the key's: the shares are taken with different TTLs)
// and the fence it drew, in slot order; a share released is gone from it,
// and the others stay.
func inspectShares(s *suite) {
	shs := s.inspectSharers(3)
	key, r1, r2 := s.key(), token(), token()
	start := time.Now()
	_, f1 := s.share(shs[0], key, r1, s.long, shared, true, "of a free key")
	s.share(shs[1], key, r2, 2*s.long, shared, false, "beside a shared holder")
	set := time.Now()
	sleepUntil(set.Add(s.lateEnough(shs[0], 2*s.long)))
	sent := time.Now()
	ks := s.inspect(shs[2], key)
	returned := time.Now()
	s.checkShares(shs[0], ks, key, "held by two shared holders", map[string]shareWant{r1: {shared, 0, f1, s.long}, r2: {shared, 0, 0, 2 * s.long}}, start, set, sent, returned)
	s.releaseShare(shs[0], key, r1)
	sent = time.Now()
	ks = s.inspect(shs[2], key)
	returned = time.Now()
	s.checkShares(shs[0], ks, key, "after one of its two shared holders released its share", map[string]shareWant{r2: {shared, 0, 0, 2 * s.long}}, start, set, sent, returned)

	pkey := s.key()
	want := map[string]shareWant{}
	ptoks := []string{token(), token(), token()}
	pttls := []time.Duration{2 * s.long, s.long, 3 * s.long}
	start = time.Now()
	for i, p := range ptoks {
		slot, fence := s.share(shs[i], pkey, p, pttls[i], permits(3), true, fmt.Sprintf("with %d of 3 permits held", i))
		want[p] = shareWant{permits(3), slot, fence, pttls[i]}
	}
	set = time.Now()
	sent = time.Now()
	ks = s.inspect(shs[0], pkey)
	returned = time.Now()
	s.checkShares(shs[0], ks, pkey, "held by 3 holders of 3 permits", want, start, set, sent, returned)
	s.releaseShare(shs[1], pkey, ptoks[1])
	delete(want, ptoks[1])
	sent = time.Now()
	ks = s.inspect(shs[0], pkey)
	returned = time.Now()
	s.checkShares(shs[0], ks, pkey, "after the holder of its second permit released it", want, start, set, sent, returned)
}

// inspectWaitingWriter: Inspect of a key held by shares on which
// TryAcquireWaiting failed reports that token as its Writer, and the
// shares as its holders; once the shares are gone, the writer alone (no
// holder); once the writer, with a new token as the Locker draws one per
// attempt, took it, no writer and that holder.
func inspectWaitingWriter(s *suite) {
	shs := s.inspectSharers(3)
	a, w, c := shs[0], shs[1], shs[2]
	key, r := s.key(), token()
	s.share(a, key, r, s.long, shared, false, "of a free key")
	if ks := s.inspect(c, key); ks.Writer != "" {
		s.t.Errorf("storetest: Inspect of %s, held by a shared holder and with no writer waiting, reported the writer %q", key, ks.Writer)
	}
	wt := token()
	if ok, _ := s.tryWaiting(w, key, wt, s.long, s.long, false); ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported true while a shared holder held it", key)
	}
	ks := s.inspect(c, key)
	if ks.Writer != wt {
		s.t.Errorf("storetest: Inspect of %s reported the writer %q after TryAcquireWaiting by %q failed on its shared holder: want that token, the exclusive holder waiting for the shares to drain",
			key, ks.Writer, wt)
	}
	if len(ks.Holders) != 1 || ks.Holders[0].Token != r {
		s.t.Errorf("storetest: Inspect of %s, held by one shared holder %q with a writer waiting, reported the holders %+v: want that share alone", key, r, ks.Holders)
	}
	s.releaseShare(a, key, r)
	ks = s.inspect(c, key)
	if ks.Held() || ks.Writer != wt {
		s.t.Errorf("storetest: Inspect of %s, whose only share was released while a writer (%q) waited, reported the holders %+v and the writer %q: want no holder, and that writer",
			key, wt, ks.Holders, ks.Writer)
	}
	wt2 := token()
	if ok, _ := s.tryWaiting(w, key, wt2, s.long, s.long, false); !ok {
		s.t.Fatalf("storetest: TryAcquireWaiting of %s reported false once its shares were released", key)
	}
	ks = s.inspect(c, key)
	s.exclusiveHolder(ks, key, wt2, "taken by a waiting writer")
	if ks.Writer != "" {
		s.t.Errorf("storetest: Inspect of %s, which the waiting writer took, still reported the writer %q: want none", key, ks.Writer)
	}
}

// inspectFairQueue: Inspect of a held key with three waiters that queued
// in order (core.Queuer) reports their tokens, head first, none of them a
// holder, each with the TTL it asked for and the patience it has left (not
// the patience it asked for: it is inspected a while after it queued); a
// waiter that gave up (Dequeue) is gone and the others keep their order;
// once the holder released, the head holds the key and the next waits.
func inspectFairQueue(s *suite) {
	qs := s.inspectQueuers(4)
	key, holder := s.key(), token()
	s.takeFree(qs[0], key, holder)
	ws := []string{token(), token(), token()}
	ttls := []time.Duration{s.long, 2 * s.long, 3 * s.long}
	patience := s.long
	start := time.Now()
	for i, w := range ws {
		if s.enqueue(qs[i+1], key, w, ttls[i], patience, false).OK {
			s.t.Fatalf("storetest: Enqueue of %s, which another token holds, took it", key)
		}
	}
	set := time.Now()
	sleepUntil(set.Add(s.lateEnough(qs[0], patience)))
	sent := time.Now()
	ks := s.inspect(qs[0], key)
	returned := time.Now()
	s.exclusiveHolder(ks, key, holder, "with three waiters in its fair queue")
	if got := tokens(ks.Waiters); !slices.Equal(got, ws) {
		s.t.Fatalf("storetest: Inspect of %s listed the waiters %q: want the tokens that queued, head first: %q", key, got, ws)
	}
	for i, w := range ks.Waiters {
		if w.TTL != 0 && w.TTL != ttls[i] && w.TTL != storeTTL(qs[0], ttls[i]) {
			s.t.Errorf("storetest: Inspect of %s reported the TTL %v for the waiter %q, which asked for %v: want that TTL (or 0 if the store cannot tell)", key, w.TTL, w.Token, ttls[i])
		}
		s.checkLeft("patience", fmt.Sprintf("the waiter %q of %s", w.Token, key), w.Patience, patience, storeTTL(qs[0], patience), start, set, sent, returned)
	}
	s.dequeue(qs[2], key, ws[1])
	ks = s.inspect(qs[0], key)
	if got, want := tokens(ks.Waiters), []string{ws[0], ws[2]}; !slices.Equal(got, want) {
		s.t.Errorf("storetest: Inspect of %s listed the waiters %q after the second of three gave up (Dequeue): want %q", key, got, want)
	}
	if !s.release(qs[0], key, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false", key)
	}
	ks = s.inspect(qs[0], key)
	s.exclusiveHolder(ks, key, ws[0], "after its holder released it to the head of its queue")
	if got, want := tokens(ks.Waiters), []string{ws[2]}; !slices.Equal(got, want) {
		s.t.Errorf("storetest: Inspect of %s listed the waiters %q after a release granted the key to the head: want %q", key, got, want)
	}
	s.enqueue(qs[1], key, ws[0], ttls[0], patience, false) // the head learns its grant
}

// inspectLeavesOutExpiredAndDead: Inspect reports only what lives: not an
// exclusive holder whose TTL ran out, nor a share whose TTL ran out beside
// one that lives (shared, and of permits), nor a waiter of the fair queue
// whose patience ran out (it stopped calling) ahead of one that lives. No
// call touches those keys between their expiry and the Inspect, so that a
// store that drops such entries lazily must judge them by their expiry
// when it inspects.
func inspectLeavesOutExpiredAndDead(s *suite) {
	sts := s.inspectors(3)
	a, b, c := sts[0], sts[1], sts[2]
	type want struct {
		key, what        string
		holders, waiters []string
	}
	var wants []want
	k := s.key()
	s.acquire(a, k, token(), s.ttl, true)
	lastSet := time.Now() // when the last short hold or place was set
	wants = append(wants, want{k, fmt.Sprintf("whose only holder, exclusive, had a TTL of %v", s.ttl), nil, nil})

	if _, ok := a.(core.Sharer); ok {
		shs := []core.Sharer{a.(core.Sharer), b.(core.Sharer)}
		for _, h := range []core.Hold{shared, permits(2)} {
			k, live := s.key(), token()
			s.share(shs[0], k, live, s.long, h, false, "of a free key")
			s.share(shs[1], k, token(), s.ttl, h, true, "beside another share")
			lastSet = time.Now()
			wants = append(wants, want{k, fmt.Sprintf("held by a share of %v with TTL %v and one with TTL %v", h, s.long, s.ttl), []string{live}, nil})
		}
	}

	if _, ok := a.(core.Queuer); ok {
		qs := []core.Queuer{a.(core.Queuer), b.(core.Queuer), c.(core.Queuer)}
		k, holder, dead, live := s.key(), token(), token(), token()
		s.takeFree(qs[0], k, holder)
		s.queue(qs[1], k, dead, s.ttl, false)
		lastSet = time.Now()
		s.queue(qs[2], k, live, s.long, false)
		wants = append(wants, want{k, fmt.Sprintf("held (TTL %v), with a waiter of patience %v that stopped calling ahead of one of patience %v", s.long, s.ttl, s.long),
			[]string{holder}, []string{live}})
	}

	// The short holds and places have surely run out by then (the bound
	// of TTLFreesUnreleasedLock).
	sleepUntil(lastSet.Add(s.ttl + s.res + s.slack))
	for _, w := range wants {
		ks := s.inspect(c, w.key)
		var holders []string
		for _, h := range ks.Holders {
			holders = append(holders, h.Token)
		}
		if !slices.Equal(holders, w.holders) || !slices.Equal(tokens(ks.Waiters), w.waiters) {
			s.t.Errorf("storetest: Inspect of %s, %s, %v after the short ones were set, reported the holders %q and the waiters %q: want the holders %q and the waiters %q: a hold whose TTL ran out holds no more, and a waiter whose patience ran out waits no more",
				w.key, w.what, time.Since(lastSet).Round(time.Millisecond), holders, tokens(ks.Waiters), w.holders, w.waiters)
		}
	}
}

// inspectAndListAreReadOnly: Inspect and List change nothing: a holder
// (and a share) with a short TTL, inspected and listed again and again,
// is free at its TTL all the same (TTL resolution and slack allowed), and
// the TTL Inspect reports never rises; a free key inspected is not held
// nor listed; the waiters of a fair queue, inspected and listed again and
// again, keep their order, and a release grants the key to the head.
func inspectAndListAreReadOnly(s *suite) {
	sts := s.inspectors(2)
	a, b := sts[0], sts[1]
	prefix, key := s.prefixKey()
	free := key("free")
	held := map[string]time.Time{} // key -> when its hold was set
	start := time.Now()
	k := key("exclusive")
	s.acquire(a, k, token(), s.ttl, true)
	held[k] = time.Now()
	if sh, ok := a.(core.Sharer); ok {
		k = key("shared")
		s.share(sh, k, token(), s.ttl, shared, true, "of a free key")
		held[k] = time.Now()
	}
	last := map[string]time.Duration{}
	for len(held) > 0 {
		for _, k := range slices.Sorted(maps.Keys(held)) {
			sent := time.Now()
			for _, h := range s.inspect(b, k).Holders {
				// Allowed: the store's resolution, and clocks of several
				// nodes (a quorum) a little apart.
				if prev := last[k]; h.TTL != 0 && prev != 0 && h.TTL > prev+s.res+s.ttl/10 {
					s.t.Errorf("storetest: the TTL left that Inspect reported for %s rose from %v to %v between two Inspects: Inspect or List renewed it (they must change nothing)",
						k, prev, h.TTL)
				}
				last[k] = h.TTL
			}
			if s.inspect(b, free).Held() {
				s.t.Fatalf("storetest: Inspect of %s, which nobody ever held, reported a holder after it was inspected again and again", free)
			}
			if seen := s.listAll(b, prefix, 10); seen[free] > 0 {
				s.t.Fatalf("storetest: List(%q) listed %s, which nobody ever held, after it was inspected again and again", prefix, free)
			}
			if !s.held(a, k) {
				if elapsed := time.Since(start); elapsed < s.earliest(s.ttl) {
					s.t.Errorf("storetest: %s, taken with TTL %v, was free %v later: before its TTL ran out", k, s.ttl, elapsed.Round(time.Millisecond))
				}
				delete(held, k)
				continue
			}
			if late := sent.Sub(held[k]); late > s.ttl+s.res+s.slack {
				s.t.Fatalf("storetest: %s, taken with TTL %v and inspected and listed since, was still held %v later: Inspect or List renewed its TTL (they must change nothing; TTL resolution %v, slack %v)",
					k, s.ttl, late.Round(time.Millisecond), s.res, s.slack)
			}
		}
		time.Sleep(s.poll)
	}

	if _, ok := a.(core.Queuer); !ok {
		return
	}
	qs := s.inspectQueuers(4)
	qkey, holder := key("queue"), token()
	s.takeFree(qs[0], qkey, holder)
	ws := []string{token(), token(), token()}
	for i, w := range ws {
		s.queue(qs[i+1], qkey, w, s.long, false)
	}
	for range 20 {
		s.inspect(qs[0], qkey)
		s.listAll(qs[0], prefix, 2)
	}
	ks := s.inspect(qs[0], qkey)
	s.exclusiveHolder(ks, qkey, holder, "inspected and listed 20 times")
	if got := tokens(ks.Waiters); !slices.Equal(got, ws) {
		s.t.Errorf("storetest: Inspect of %s listed the waiters %q after it was inspected and listed 20 times: want them as they queued, %q", qkey, got, ws)
	}
	if !s.release(qs[0], qkey, holder) {
		s.t.Fatalf("storetest: Release of %s by its holder reported false after it was inspected and listed 20 times", qkey)
	}
	if !s.enqueue(qs[1], qkey, ws[0], s.long, s.long, false).OK {
		s.t.Errorf("storetest: a release of %s, inspected and listed 20 times, did not grant it to the head of its queue", qkey)
	}
}

// inspectAndListBesideHolds: List goes on, without an error, when the
// keys of the page before were released, and lists the keys held
// throughout; Inspect and List, running beside goroutines that take and
// release keys (exclusively, and with shares on a Sharer) on other
// clients, return no error and only well-formed states (every holder with
// a token; an exclusive holder alone) and keys.
func inspectAndListBesideHolds(s *suite) {
	sts := s.inspectors(3)
	a, b, c := sts[0], sts[1], sts[2]

	prefix, key := s.prefixKey()
	var stay, churn []string
	toks := map[string]string{}
	for i := range 6 {
		k := key(fmt.Sprintf("churn%d", i))
		churn = append(churn, k)
		toks[k] = token()
		s.acquire(a, k, toks[k], s.long, false)
	}
	for i := range 2 {
		k := key(fmt.Sprintf("stay%d", i))
		stay = append(stay, k)
		s.acquire(a, k, token(), s.long, false)
	}
	seen, err := listing(inspector(c), prefix, 2, func(page []string) {
		for _, k := range page {
			if tok, ok := toks[k]; ok {
				s.release(a, k, tok)
				delete(toks, k)
			}
		}
	})
	if err != nil {
		s.t.Fatalf("storetest: %v, while the keys of each page were released before the next: a cursor must outlive the keys listed beside it", err)
	}
	for _, k := range stay {
		if seen[k] == 0 {
			s.t.Errorf("storetest: List(%q) in pages of 2 did not list %s, held for the whole listing, while the keys of each page were released before the next", prefix, k)
		}
	}

	prefix, key = s.prefixKey()
	keys := []string{key("0"), key("1"), key("2"), key("3")}
	_, sharer := a.(core.Sharer)
	deadline := time.Now().Add(10 * time.Second)
	var errs errorList
	var wg sync.WaitGroup
	done := make(chan struct{})
	var holders sync.WaitGroup
	for i, st := range []core.Store{a, b} {
		for g := range 2 {
			holders.Add(1)
			go func() {
				defer holders.Done()
				for r := range 25 {
					if time.Now().After(deadline) {
						return
					}
					k, tok := keys[(i+g+r)%len(keys)], token()
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					share := sharer && r%2 == 1
					var ok bool
					var err error
					if share {
						ok, _, _, err = st.(core.Sharer).TryAcquireShare(ctx, k, tok, s.long, shared, r%3 == 0)
					} else {
						ok, _, err = st.TryAcquire(ctx, k, tok, s.long, r%3 == 0)
					}
					if err == nil && ok {
						time.Sleep(time.Millisecond)
						if share {
							_, err = st.(core.Sharer).ReleaseShare(ctx, k, tok)
						} else {
							_, err = st.Release(ctx, k, tok)
						}
					}
					cancel()
					if err != nil {
						errs.add("a hold of %s beside Inspect and List: %v", k, err)
						return
					}
				}
			}()
		}
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := inspector(c)
			for r := 0; ; r++ {
				select {
				case <-done:
					return
				default:
				}
				seen, err := listing(in, prefix, 1+(g+r)%3, nil)
				if err != nil {
					errs.add("%v, beside holds of its keys", err)
					return
				}
				for k := range seen {
					if !slices.Contains(keys, k) {
						errs.add("List(%q) listed %q beside holds, which the property never held", prefix, k)
					}
				}
				for _, k := range keys {
					ctx, cancel := call()
					ks, err := in.Inspect(ctx, k)
					cancel()
					if err != nil {
						errs.add("Inspect(%q) beside holds of it: %v", k, err)
						return
					}
					for _, p := range malformed(k, ks) {
						errs.add("Inspect(%q) beside holds of it returned %s", k, p)
					}
				}
			}
		}()
	}
	holders.Wait()
	close(done)
	wg.Wait()
	errs.report(s.t)
}
