package core_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
)

// This file is the simulated store's part of the lock family: shared holds
// and numbered permits (core.Sharer) and several keys in one step
// (core.MultiAcquirer), after the contract in package lockstore (holds.go)
// and the stores' common design: while shares of a key are live, the key
// is held for every exclusive command (TryAcquire, TryAcquireWaiting,
// Enqueue, Poll, TryAcquireAll fail; Release, Extend and Undo by a share's
// token do nothing), the shares live in a record of their own (token →
// expiry and slot, and the Hold.N they share), pruned at every command of
// the key; the exclusive waiter's record of TryAcquireWaiting is a third
// one, with its own expiry; fences come from the key's one counter.
//
// Each command runs on the scheduler like the others (simView.call), so
// the network's faults apply to it: delays, lost replies, refusals, a
// frozen store, a process cut off or killed.

// simMutant is a defect put into the simulated store on purpose, to show
// that the simulation's checker catches it (TestSimulationModesCatchesBrokenStores).
type simMutant string

// The defects.
const (
	// simMutPermitsOverflow lets n+1 holders of Permits(n) in.
	simMutPermitsOverflow simMutant = "n+1 permits"
	// simMutSlotsCollide gives a new permit the slot numbered after the
	// count of live permits, which another holder may have.
	simMutSlotsCollide simMutant = "slots collide"
	// simMutReleaseOther makes ReleaseShare remove another token's share
	// too.
	simMutReleaseOther simMutant = "release removes another share"
	// simMutPartialAll makes TryAcquireAll take the keys before the first
	// held one and answer false.
	simMutPartialAll simMutant = "TryAcquireAll takes some keys"
	// simMutShareIgnoresExclusive lets a share in beside an exclusive
	// holder.
	simMutShareIgnoresExclusive simMutant = "share ignores the exclusive holder"
	// simMutExclusiveIgnoresShares lets an exclusive holder in beside
	// shares.
	simMutExclusiveIgnoresShares simMutant = "exclusive ignores shares"
	// simMutModesMix lets shares of different modes in at once.
	simMutModesMix simMutant = "modes mix"
	// simMutShareIgnoresWaiter lets new shares in while a writer waits.
	simMutShareIgnoresWaiter simMutant = "share ignores the waiting writer"
	// simMutHeldIgnoresShares makes TryAcquireHeld take the key while
	// shares hold it.
	simMutHeldIgnoresShares simMutant = "TryAcquireHeld ignores shares"
	// simMutHeldHidesShares makes TryAcquireHeld answer a key that shares
	// hold as busy, not shared: the Locker never records the writer.
	simMutHeldHidesShares simMutant = "TryAcquireHeld hides shares"
	// simMutShareFenceStale answers a fenced share with the counter as it
	// is, drawing nothing: the fence of the holder before it.
	simMutShareFenceStale simMutant = "share fence not drawn"
)

// holdShare keeps sh until expiry, and schedules an event then, so that
// the checker runs at the instant the share expires; s.mu is held.
func (s *simStore) holdShare(sh *simShare, expiry time.Time) {
	sh.expiry = expiry
	s.pushLocked(expiry, func(time.Time) {})
}

// shareTruth returns until when token holds a share of key at now, and its
// slot; ok false if it holds none.
func (s *simStore) shareTruth(key, token string, now time.Time) (expiry time.Time, slot int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil {
		return time.Time{}, 0, false
	}
	sh := k.shares[token]
	if sh == nil || !now.Before(sh.expiry) {
		return time.Time{}, 0, false
	}
	return sh.expiry, sh.slot, true
}

// holds reports whether token holds key at now, exclusively or by a share.
func (s *simStore) holds(key, token string, now time.Time) bool {
	if holder, _ := s.truth(key, now); holder == token {
		return true
	}
	_, _, ok := s.shareTruth(key, token, now)
	return ok
}

func (s *simStore) tryAcquireShare(key, token string, ttl time.Duration, h core.Hold, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if sh := k.shares[token]; sh != nil { // a re-sent attempt: its slot, its TTL reset
		s.holdShare(sh, now.Add(s.span(ttl)))
		var fence int64
		if fenced {
			fence = k.drawn[token]
		}
		return simReply{ok: true, slot: sh.slot, fence: fence, note: fmt.Sprintf("ours already: reset (slot %d, fence %d)", sh.slot, fence)}
	}
	if k.holder != "" && s.mutant != simMutShareIgnoresExclusive {
		return simReply{note: "held by " + s.trace.tok(k.holder)}
	}
	if k.shared() && k.shareN != h.N && s.mutant != simMutModesMix {
		return simReply{
			err:  fmt.Errorf("simstore: %s of %q while it is held with %s: %w", h, key, core.Hold{N: k.shareN}, core.ErrModeMismatch),
			note: fmt.Sprintf("%s asked, %s held: mode mismatch", h, core.Hold{N: k.shareN}),
		}
	}
	if !k.waiter.IsZero() && s.mutant != simMutShareIgnoresWaiter {
		return simReply{note: "a writer waits until " + s.trace.since(k.waiter)}
	}
	slot := 0
	if h.N > 0 {
		limit := h.N
		if s.mutant == simMutPermitsOverflow {
			limit++
		}
		if len(k.shares) >= limit {
			return simReply{note: fmt.Sprintf("all %d permits taken", h.N)}
		}
		taken := make(map[int]bool, len(k.shares))
		for _, sh := range k.shares {
			taken[sh.slot] = true
		}
		for taken[slot] {
			slot++
		}
		if s.mutant == simMutSlotsCollide {
			slot = len(k.shares)
		}
	}
	if k.shares == nil {
		k.shares = make(map[string]*simShare)
	}
	sh := &simShare{slot: slot}
	k.shares[token] = sh
	k.shareN = h.N
	s.holdShare(sh, now.Add(s.span(ttl)))
	var fence int64
	switch {
	case fenced && s.mutant == simMutShareFenceStale && k.fence > 0:
		fence = k.fence // the counter as it is, drawn by the last holder
		k.drawn[token] = fence
	case fenced:
		fence = s.draw(k, token)
	}
	return simReply{ok: true, slot: slot, fence: fence, note: fmt.Sprintf("%s taken (slot %d, fence %d, %d shares)", h, slot, fence, len(k.shares))}
}

// freed is what a command that freed k does: the name goes to the first
// live waiter of its fair queue, or a release notice is published; s.mu is
// held.
func (s *simStore) freed(v *simView, key string, k *simKey, now time.Time) string {
	if e, ok := s.head(k, now); ok {
		return ", " + s.grant(key, k, e, now)
	}
	if v.announce.Load() {
		s.publishLocked(key, simMsg{notice: true})
		return ", announced"
	}
	return ""
}

func (s *simStore) releaseShare(v *simView, key, token string, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.shares[token] == nil {
		return simReply{note: "no share of ours"}
	}
	delete(k.shares, token)
	note := "released its share"
	if s.mutant == simMutReleaseOther && k.shared() {
		others := make([]string, 0, len(k.shares))
		for tok := range k.shares {
			others = append(others, tok)
		}
		slices.Sort(others)
		delete(k.shares, others[0])
		note += " and that of " + s.trace.tok(others[0])
	}
	if k.shared() {
		return simReply{ok: true, note: fmt.Sprintf("%s (%d left)", note, len(k.shares))}
	}
	if k.holder == "" {
		note += s.freed(v, key, k, now)
	}
	return simReply{ok: true, note: note}
}

func (s *simStore) extendShare(key, token string, ttl time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	sh := k.shares[token]
	if sh == nil {
		return simReply{note: "no share of ours"}
	}
	s.holdShare(sh, now.Add(s.span(ttl)))
	var fence int64
	if fenced {
		fence = s.draw(k, token)
	}
	return simReply{ok: true, fence: fence, note: fmt.Sprintf("share extended (fence %d)", fence)}
}

func (s *simStore) tryAcquireWaiting(key, token string, ttl, patience time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.shared() && k.holder != token && s.mutant != simMutExclusiveIgnoresShares {
		if until := now.Add(s.span(patience)); until.After(k.waiter) {
			k.waiter = until
		}
		return simReply{note: fmt.Sprintf("%d shares hold it: a writer waits until %s", len(k.shares), s.trace.since(k.waiter))}
	}
	r := s.tryAcquire(key, token, ttl, fenced, now)
	if r.ok {
		k.waiter = time.Time{}
	}
	return r
}

// tryAcquireHeld is TryAcquire that tells shares apart
// (core.HeldAcquirer): while shares hold the key it answers shared and
// writes nothing (no waiting writer's record); otherwise it is tryAcquire.
func (s *simStore) tryAcquireHeld(key, token string, ttl time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.holder == "" && k.shared() {
		switch s.mutant {
		case simMutHeldIgnoresShares:
			s.hold(k, token, now.Add(s.span(ttl)))
			var fence int64
			if fenced {
				fence = s.draw(k, token)
			}
			return simReply{ok: true, fence: fence, note: fmt.Sprintf("taken beside %d shares (fence %d)", len(k.shares), fence)}
		case simMutHeldHidesShares:
			return simReply{note: fmt.Sprintf("%d shares hold it (answered as busy)", len(k.shares))}
		}
		return simReply{shared: true, note: fmt.Sprintf("%d shares hold it: told so, nothing written", len(k.shares))}
	}
	return s.tryAcquire(key, token, ttl, fenced, now)
}

func (s *simStore) tryAcquireAll(keys []string, token string, ttl time.Duration, fenced bool, now time.Time) simReply {
	take := func(keys []string) []int64 {
		var fences []int64
		for _, key := range keys {
			k := s.keyOf(key)
			mine := k.holder == token
			s.hold(k, token, now.Add(s.span(ttl)))
			switch {
			case fenced && mine:
				fences = append(fences, s.current(k, token))
			case fenced:
				fences = append(fences, s.draw(k, token))
			}
		}
		return fences
	}
	for i, key := range keys {
		k := s.keyOf(key)
		s.settle(k, now)
		held := (k.holder != "" && k.holder != token) || (k.shared() && s.mutant != simMutExclusiveIgnoresShares)
		if !held {
			continue
		}
		note := key + " held"
		if s.mutant == simMutPartialAll && i > 0 {
			take(keys[:i])
			note += fmt.Sprintf(" (took %v)", keys[:i])
		}
		return simReply{note: note}
	}
	fences := take(keys)
	return simReply{ok: true, fences: fences, note: fmt.Sprintf("all taken (fences %v)", fences)}
}

// slotOf is the slot of key when the store has slots.
func (s *simStore) slotOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(s.slots))
}

var (
	_ core.HeldAcquirer  = (*simView)(nil)
	_ core.Sharer        = (*simView)(nil)
	_ core.MultiAcquirer = (*simView)(nil)
	_ core.ShareUndoer   = (*simView)(nil)
)

func (v *simView) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("simstore: TryAcquireShare of %q: %w", key, err)
	}
	sent := time.Now()
	r, err := v.call(ctx, simOpTryAcquireShare, key, []string{token}, func() string { return fmt.Sprintf("%s %s ttl=%v", v.s.trace.tok(token), h, ttl) }, func(now time.Time) simReply {
		return v.s.tryAcquireShare(key, token, ttl, h, fenced, now)
	})
	if err != nil {
		if simMayHaveApplied(err) { // it may run late: undo it, now and in the background, as the Redis stores do
			v.UndoShare(ctx, key, token, ttl, sent)
		}
		return false, 0, 0, err
	}
	if r.err != nil {
		return false, 0, 0, r.err
	}
	return r.ok, r.slot, r.fence, nil
}

// UndoShare removes token's share of key, at once and in the background,
// under the rules of Undo (core.ShareUndoer).
func (v *simView) UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	v.undo(ctx, key, token, ttl, sent, true)
}

func (v *simView) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	r, err := v.call(ctx, simOpReleaseShare, key, []string{token}, func() string { return v.s.trace.tok(token) }, func(now time.Time) simReply {
		return v.s.releaseShare(v, key, token, now)
	})
	return r.ok, err
}

func (v *simView) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	r, err := v.call(ctx, simOpExtendShare, key, []string{token}, func() string { return fmt.Sprintf("%s ttl=%v fenced=%v", v.s.trace.tok(token), ttl, fenced) }, func(now time.Time) simReply {
		return v.s.extendShare(key, token, ttl, fenced, now)
	})
	return r.ok, r.fence, err
}

func (v *simView) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	sent := time.Now()
	r, err := v.call(ctx, simOpTryAcquireWaiting, key, []string{token}, func() string {
		return fmt.Sprintf("%s ttl=%v patience=%v", v.s.trace.tok(token), ttl, patience)
	}, func(now time.Time) simReply {
		return v.s.tryAcquireWaiting(key, token, ttl, patience, fenced, now)
	})
	if err != nil {
		if simMayHaveApplied(err) { // as TryAcquire
			v.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, err
	}
	return r.ok, r.fence, nil
}

// TryAcquireHeld is TryAcquire that tells shares apart
// (core.HeldAcquirer), on the scheduler; a failed attempt is undone as
// TryAcquire's.
func (v *simView) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	sent := time.Now()
	r, err := v.call(ctx, simOpTryAcquireHeld, key, []string{token}, func() string { return fmt.Sprintf("%s ttl=%v", v.s.trace.tok(token), ttl) }, func(now time.Time) simReply {
		return v.s.tryAcquireHeld(key, token, ttl, fenced, now)
	})
	if err != nil {
		if simMayHaveApplied(err) {
			v.Undo(ctx, key, token, ttl, sent)
		}
		return false, false, 0, err
	}
	return r.ok, r.shared, r.fence, nil
}

// TryAcquireAll takes keys in one step on the scheduler; on a store with
// slots, keys of different slots are ErrNotAtomic, answered at once (a
// client that knows the slots). An answer false is checked (told): the
// token must hold none of the keys.
func (v *simView) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if len(keys) == 0 {
		return false, nil, fmt.Errorf("simstore: TryAcquireAll: no keys: %w", core.ErrInvalidName)
	}
	keys = slices.Clone(keys)
	if v.s.slots > 0 {
		for _, k := range keys[1:] {
			if v.s.slotOf(k) != v.s.slotOf(keys[0]) {
				return false, nil, fmt.Errorf("simstore: TryAcquireAll: %q and %q are in different slots: %w", keys[0], k, core.ErrNotAtomic)
			}
		}
	}
	r, err := v.call(ctx, simOpTryAcquireAll, strings.Join(keys, "+"), []string{token}, func() string { return fmt.Sprintf("%s ttl=%v", v.s.trace.tok(token), ttl) }, func(now time.Time) simReply {
		return v.s.tryAcquireAll(keys, token, ttl, fenced, now)
	})
	if err != nil {
		return false, nil, err
	}
	if !r.ok && v.s.told != nil {
		now := time.Now()
		for _, k := range keys {
			if v.s.holds(k, token, now) {
				v.s.told("%s: TryAcquireAll(%v) for %s answered false, but the store holds %s for it", v.name, keys, v.s.trace.tok(token), k)
			}
		}
	}
	return r.ok, r.fences, nil
}

// simCall records, for one Acquire or AcquireAll of a worker (carried by
// its context), the tokens its commands named, and whether the effect of
// one of them is unknown to the caller: a command that failed (lost reply,
// timeout, refusal) may or may not have run. A token whose every command
// was answered is known: the checker can tell what the store must hold
// for it.
type simCall struct {
	mu      sync.Mutex
	unknown map[string]bool // token → a command naming it failed
	passed  map[string]bool // tokens of leases released by a local hand-off: another lease's now
}

type simCallKey struct{}

// withSimCall returns ctx carrying c: the view records there the tokens of
// the commands made with it.
func withSimCall(ctx context.Context, c *simCall) context.Context {
	return context.WithValue(ctx, simCallKey{}, c)
}

// noteCall records in ctx's simCall, if any, a command naming tokens that
// ended with err.
func noteCall(ctx context.Context, tokens []string, err error) {
	c, ok := ctx.Value(simCallKey{}).(*simCall)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unknown == nil {
		c.unknown = make(map[string]bool)
	}
	for _, t := range tokens {
		c.unknown[t] = c.unknown[t] || err != nil
	}
}

// known returns the tokens of c whose every command was answered, but
// those handed off.
func (c *simCall) known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ts []string
	for t, unknown := range c.unknown {
		if !unknown && !c.passed[t] {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// simHandOffs is an Observer that records in the simCall of a Release's
// context the token of a lease its release handed off to a local waiter
// (WithLocalQueue): the store holds it for the next holder.
type simHandOffs struct{}

func (simHandOffs) ObserveAcquire(context.Context, core.AcquireEvent) core.LeaseObserver {
	return simHandOffs{}
}

func (simHandOffs) ObserveRelease(ctx context.Context, e core.ReleaseEvent) {
	c, ok := ctx.Value(simCallKey{}).(*simCall)
	if !ok || e.Outcome != core.OutcomeHandedOff {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.passed == nil {
		c.passed = make(map[string]bool)
	}
	c.passed[e.Lease.Token()] = true
}
