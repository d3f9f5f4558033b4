package memcachedstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// This file is the store's core.Sharer: shared holds and numbered permits
// (see "Shares" in the package documentation).
//
// While shares of a key are live, the key's item (the lock's item) holds a
// marker, which no token equals (it begins with a NUL byte), listing the
// shares: mode, and for each share its token, slot and the expiration its
// share item was given. Each share also has an item of its own, the share
// item, whose value is its token and whose expiration is the share's TTL:
// memcached expires it on its own, by the server's clock. A share is live
// while it is listed and its share item holds its token; memcached's cas on
// the lock's item orders every change of the list. The lock's item is given
// the longest expiration in the list, plus a margin, at every change, so
// that it outlives every live share; and an item that lists no live share
// is free for an exclusive holder (TryAcquire takes it by cas).

// markerPrefix begins the value of a lock's item that lists shares.
const markerPrefix = "\x00reqlock-shares "

// markerMargin is what the lock's item is given beyond the longest
// expiration of its shares: the share items may live on another server,
// whose clock ticks at other times.
const markerMargin = 2

// shareEntry is a share in the list of a lock's item.
type shareEntry struct {
	token string
	slot  int
	exp   int32 // the longest expiration its share item was given
}

// shareList is the value of a lock's item while shares are live.
type shareList struct {
	n       int // 0: shared holds; n >= 1: Permits(n)
	entries []shareEntry
}

// hold returns the list's mode.
func (l shareList) hold() core.Hold { return core.Hold{N: l.n} }

// find returns the index of token's entry, -1 if none.
func (l shareList) find(token string) int {
	for i, e := range l.entries {
		if e.token == token {
			return i
		}
	}
	return -1
}

// encode returns the value of the lock's item that lists l.
func (l shareList) encode() []byte {
	b := strconv.AppendInt([]byte(markerPrefix), int64(l.n), 10)
	b = append(b, '\n')
	for _, e := range l.entries {
		b = strconv.AppendInt(b, int64(e.slot), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.exp), 10)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, e.token)
		b = append(b, '\n')
	}
	return b
}

// expiration returns the expiration of the lock's item that lists l.
func (l shareList) expiration() int32 {
	var exp int32
	for _, e := range l.entries {
		exp = max(exp, e.exp)
	}
	return exp + markerMargin
}

// decodeShares reads the value of a lock's item: ok is false when it is a
// token (an exclusive holder's), not a list of shares.
func decodeShares(v []byte) (l shareList, ok bool, err error) {
	rest, ok := bytes.CutPrefix(v, []byte(markerPrefix))
	if !ok {
		return shareList{}, false, nil
	}
	bad := func() (shareList, bool, error) {
		return shareList{}, true, fmt.Errorf("memcachedstore: the list of shares %q is malformed", v)
	}
	lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	if l.n, err = strconv.Atoi(lines[0]); err != nil || l.n < 0 {
		return bad()
	}
	for _, line := range lines[1:] {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			return bad()
		}
		var e shareEntry
		exp, err1 := strconv.ParseInt(f[1], 10, 32)
		slot, err2 := strconv.Atoi(f[0])
		token, err3 := strconv.Unquote(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			return bad()
		}
		e.slot, e.exp, e.token = slot, int32(exp), token
		l.entries = append(l.entries, e)
	}
	return l, true, nil
}

// shareKey returns the item key of token's share item of key.
func shareKey(key, token string) string { return itemKey(key + ":share:" + token) }

// waiterKey returns the item key of the record of a waiting exclusive
// holder of key (TryAcquireWaiting).
func waiterKey(key string) string { return itemKey(key + ":waiter") }

// getMulti reads keys in one round trip (gets, with their CAS uniques).
func (s *Store) getMulti(ctx context.Context, keys []string) (map[string]*memcache.Item, error) {
	return call(ctx, s, func() (map[string]*memcache.Item, error) { return s.client.GetMulti(keys) })
}

// live returns l without its shares whose share item has expired: one
// round trip, none for an empty list.
func (s *Store) live(ctx context.Context, key string, l shareList) (shareList, error) {
	out := shareList{n: l.n}
	if len(l.entries) == 0 {
		return out, nil
	}
	keys := make([]string, len(l.entries))
	for i, e := range l.entries {
		keys[i] = shareKey(key, e.token)
	}
	items, err := s.getMulti(ctx, keys)
	if err != nil {
		return out, err
	}
	for i, e := range l.entries {
		if it := items[keys[i]]; it != nil && string(it.Value) == e.token {
			out.entries = append(out.entries, e)
		}
	}
	return out, nil
}

// shareExpiration returns the expiration of a share of ttl, and checks
// that the lock's item can be given more.
func shareExpiration(ttl time.Duration) (int32, error) {
	exp, err := expiration(ttl)
	if err == nil && exp+markerMargin > maxExpiration {
		err = fmt.Errorf("memcachedstore: TTL %v: memcached takes shares of up to 30 days less %d seconds", ttl, markerMargin+2)
	}
	return exp, err
}

// cas stores it (with its CasID) and reports whether it did: false when
// the item changed or went since its gets.
func (s *Store) cas(ctx context.Context, it memcache.Item) (bool, error) {
	err := s.do(ctx, func() error { return s.client.CompareAndSwap(&it) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, memcache.ErrCASConflict), errors.Is(err, memcache.ErrCacheMiss), errors.Is(err, memcache.ErrNotStored):
		return false, nil
	}
	return false, err
}

// TryAcquireShare is part of core.Sharer. It reads the lock's item, the
// waiter record and token's share item (one round trip), then the share
// items of the listed shares (one more, to drop the expired ones), sets
// token's share item, and stores the new list by cas (add when the lock's
// item is missing): four round trips, three on a free key, one more
// (incr) with fenced. A cas that finds the item changed starts again, up to
// five times, after which the attempt fails (no error). It fails when the
// key holds a token (an exclusive holder), a waiting exclusive holder is
// recorded, or (permits) all h.N slots are live; live shares of another
// mode are an error wrapping core.ErrModeMismatch. A token that holds a
// share already (an attempt sent again) keeps its slot and has its TTL
// reset, as ExtendShare does. The fence is drawn from the key's counter, as
// for exclusive holds.
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("memcachedstore: acquire %s: %w", key, err)
	}
	exp, err := shareExpiration(ttl)
	if err != nil {
		return false, 0, 0, err
	}
	k, sk, wk := itemKey(key), shareKey(key, token), waiterKey(key)
	sent := time.Now()
	fail := func(err error) (bool, int, int64, error) {
		if mayHaveApplied(err) {
			s.undoShare(ctx, key, token, ttl, sent)
		}
		return false, 0, 0, fmt.Errorf("memcachedstore: acquire %s: %w", key, err)
	}
	for try := range casTries {
		if err := pause(ctx, try); err != nil {
			return fail(err)
		}
		items, err := s.getMulti(ctx, []string{k, wk, sk})
		if err != nil {
			return fail(err)
		}
		m := items[k]
		list := shareList{n: h.N}
		if m != nil {
			l, ok, err := decodeShares(m.Value)
			if err != nil || !ok {
				return false, 0, 0, err // held exclusively, or unreadable
			}
			list = l
		}
		if i := list.find(token); i >= 0 && items[sk] != nil && string(items[sk].Value) == token {
			// An attempt sent again: reset its TTL.
			ok, again, err := s.refreshShare(ctx, m, items[sk], list, i, exp)
			switch {
			case err != nil:
				return fail(err)
			case again:
				continue
			case !ok:
				return false, 0, 0, nil
			}
			return s.fenceShare(ctx, key, token, ttl, sent, fenced, list.entries[i].slot)
		}
		if list, err = s.live(ctx, key, list); err != nil {
			return fail(err)
		}
		switch {
		case len(list.entries) == 0:
			list.n = h.N
		case list.n != h.N:
			return false, 0, 0, fmt.Errorf("memcachedstore: acquire %s as %s: %w: it is held as %s", key, h, core.ErrModeMismatch, list.hold())
		}
		if items[wk] != nil {
			return false, 0, 0, nil
		}
		slot, free := 0, true
		if !h.Shared() {
			slot, free = lowestFree(list, h.N)
		}
		if !free {
			return false, 0, 0, nil
		}
		if err := s.do(ctx, func() error {
			return s.client.Set(&memcache.Item{Key: sk, Value: []byte(token), Flags: companionFlags, Expiration: exp})
		}); err != nil {
			return fail(err)
		}
		list.entries = append(list.entries, shareEntry{token: token, slot: slot, exp: exp})
		next := memcache.Item{Key: k, Value: list.encode(), Expiration: list.expiration()}
		var stored bool
		if m == nil {
			err = s.do(ctx, func() error { return s.client.Add(&next) })
			stored = err == nil
			if errors.Is(err, memcache.ErrNotStored) {
				err = nil
			}
		} else {
			next.CasID = m.CasID
			stored, err = s.cas(ctx, next)
		}
		if err != nil {
			return fail(err)
		}
		if stored {
			return s.fenceShare(ctx, key, token, ttl, sent, fenced, slot)
		}
		// The list changed since the gets: look again.
	}
	return false, 0, 0, nil
}

// lowestFree returns the lowest slot below n that no share of l holds.
func lowestFree(l shareList, n int) (int, bool) {
	used := make(map[int]bool, len(l.entries))
	for _, e := range l.entries {
		used[e.slot] = true
	}
	for i := range n {
		if !used[i] {
			return i, true
		}
	}
	return 0, false
}

// refreshShare gives entry i of list, the share whose item is own, the
// expiration exp: first the lock's item m by cas (its entry keeps the
// longer of its expirations, so that the lock's item outlives the share
// item whether or not the second step lands), then the share item by cas.
// again reports that m changed since its gets; ok false that the share
// item expired meanwhile.
func (s *Store) refreshShare(ctx context.Context, m, own *memcache.Item, list shareList, i int, exp int32) (ok, again bool, err error) {
	list.entries = append([]shareEntry(nil), list.entries...)
	list.entries[i].exp = max(list.entries[i].exp, exp)
	stored, err := s.cas(ctx, memcache.Item{Key: m.Key, Value: list.encode(), Expiration: list.expiration(), CasID: m.CasID})
	if err != nil || !stored {
		return false, err == nil, err
	}
	ok, err = s.cas(ctx, memcache.Item{Key: own.Key, Value: own.Value, Flags: own.Flags, Expiration: exp, CasID: own.CasID})
	return ok, false, err
}

// fenceShare ends a TryAcquireShare that took a share in slot: with
// fenced, it draws the fence as drawHeld does, checking that the share is
// still live when the draw ended late.
func (s *Store) fenceShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time, fenced bool, slot int) (bool, int, int64, error) {
	if !fenced {
		return true, slot, 0, nil
	}
	fence, err := s.drawShare(ctx, key, token, ttl, sent)
	if err != nil || fence == 0 {
		s.undoShare(ctx, key, token, ttl, sent)
		return false, 0, 0, err
	}
	return true, slot, fence, nil
}

// drawShare is drawHeld for token's share of key.
func (s *Store) drawShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) (int64, error) {
	fence, err := s.draw(ctx, key, ttl)
	if err != nil {
		return 0, fmt.Errorf("memcachedstore: fence of %s: %w", key, err)
	}
	if time.Since(sent) < ttl-ttl/100 {
		return fence, nil
	}
	live, err := s.holdsShare(ctx, key, token)
	if err != nil {
		return 0, fmt.Errorf("memcachedstore: fence of %s: %w", key, err)
	}
	if !live {
		return 0, nil
	}
	return fence, nil
}

// holdsShare reports whether token's share of key is live.
func (s *Store) holdsShare(ctx context.Context, key, token string) (bool, error) {
	k, sk := itemKey(key), shareKey(key, token)
	items, err := s.getMulti(ctx, []string{k, sk})
	if err != nil || items[k] == nil || items[sk] == nil || string(items[sk].Value) != token {
		return false, err
	}
	list, ok, err := decodeShares(items[k].Value)
	return ok && err == nil && list.find(token) >= 0, err
}

// ReleaseShare is part of core.Sharer: it reads the lock's item and
// token's share item (one round trip), stores the list without token's
// share by cas (or, when none is left, frees the item, as Release does),
// and deletes the share item: three round trips. It reports whether the
// share was live.
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	_, ok, err := s.releaseShare(ctx, key, token)
	if err != nil {
		return false, fmt.Errorf("memcachedstore: release %s: %w", key, err)
	}
	return ok, nil
}

// releaseShare is ReleaseShare; listed reports whether the list held
// token's share, live or not, and held whether it was live.
func (s *Store) releaseShare(ctx context.Context, key, token string) (listed, held bool, err error) {
	k, sk := itemKey(key), shareKey(key, token)
	for try := 0; try < maxShareRounds; try++ {
		if err := pause(ctx, try); err != nil {
			return false, false, err
		}
		items, err := s.getMulti(ctx, []string{k, sk})
		if err != nil {
			return false, false, err
		}
		m, own := items[k], items[sk]
		held = own != nil && string(own.Value) == token
		var list shareList
		i := -1
		if m != nil {
			var ok bool
			if list, ok, err = decodeShares(m.Value); ok && err == nil {
				i = list.find(token)
			}
		}
		if i < 0 {
			if own != nil {
				// A share item that was never listed (an attempt that
				// failed): it holds nothing; delete it.
				_ = s.do(ctx, func() error { return s.client.Delete(sk) })
			}
			return false, false, nil
		}
		list.entries = append(list.entries[:i:i], list.entries[i+1:]...)
		next := memcache.Item{Key: k, Value: list.encode(), Expiration: list.expiration(), CasID: m.CasID}
		if len(list.entries) == 0 {
			next = memcache.Item{Key: k, Expiration: -1, CasID: m.CasID} // free at once (see compareAndDelete)
		}
		stored, err := s.cas(ctx, next)
		if err != nil {
			return false, false, err
		}
		if !stored {
			continue // changed since the gets: look again
		}
		if own != nil {
			err := s.do(ctx, func() error { return s.client.Delete(sk) })
			if err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
				return true, held, err
			}
		}
		return true, held, nil
	}
	return false, false, errContention
}

// ExtendShare is part of core.Sharer: it reads the lock's item and token's
// share item (one round trip) and, if the share is live, gives it the
// expiration of ttl: the lock's item by cas, then the share item by cas
// (see refreshShare): three round trips, one more with fenced.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	exp, err := shareExpiration(ttl)
	if err != nil {
		return false, 0, err
	}
	k, sk := itemKey(key), shareKey(key, token)
	sent := time.Now()
	for try := 0; try < maxShareRounds; try++ {
		if err := pause(ctx, try); err != nil {
			return false, 0, fmt.Errorf("memcachedstore: extend %s: %w", key, err)
		}
		items, err := s.getMulti(ctx, []string{k, sk})
		if err != nil {
			return false, 0, fmt.Errorf("memcachedstore: extend %s: %w", key, err)
		}
		m, own := items[k], items[sk]
		if m == nil || own == nil || string(own.Value) != token {
			return false, 0, nil
		}
		list, ok, err := decodeShares(m.Value)
		if err != nil || !ok {
			return false, 0, err
		}
		i := list.find(token)
		if i < 0 {
			return false, 0, nil
		}
		ok, again, err := s.refreshShare(ctx, m, own, list, i, exp)
		switch {
		case err != nil:
			return false, 0, fmt.Errorf("memcachedstore: extend %s: %w", key, err)
		case again:
			continue
		case !ok || !fenced:
			return ok, 0, nil
		}
		fence, err := s.drawShare(ctx, key, token, ttl, sent)
		return fence > 0, fence, err
	}
	return false, 0, fmt.Errorf("memcachedstore: extend %s: %w", key, errContention)
}

// TryAcquireWaiting is part of core.Sharer: TryAcquire, which, when live
// shares hold key, also sets the waiter record (an item of its own, with
// the expiration of patience) and then stores the lock's item again by cas,
// so that a share whose gets came before the record cannot be stored after
// it. When it takes key it deletes the record.
func (s *Store) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	return s.acquire(ctx, key, token, ttl, fenced, patience)
}

// undoShare removes what a failed share attempt may have left (a listed
// share), at once within ctx and then in the background, as undo does for
// a lock.
func (s *Store) undoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.undos.Undo(ctx, shareUndo+key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		listed, _, err := s.releaseShare(ctx, key, token)
		return undoOutcome(listed, err)
	})
}

// maxShareRounds bounds the gets-and-cas rounds of a release or an extend
// of a share, which other shares' changes of the list may make start again
// (each round one of the contenders stores its change): far more than
// casTries, since these calls do not fail by contention lightly.
const maxShareRounds = 50

// pause waits before round try (from 0) of a gets-and-cas loop: nothing
// before the first, then a random time of up to a millisecond per round
// already made, at most 10 ms, so that contenders that keep colliding
// spread out. It returns ctx's error when ctx ends first.
func pause(ctx context.Context, try int) error {
	if try == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(rand.N(time.Duration(min(try, 10)) * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// shareUndo begins the key of a clean-up of a share (see sweep): no item
// key begins with a NUL byte.
const shareUndo = "\x00share:"
