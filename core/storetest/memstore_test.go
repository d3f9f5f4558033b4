package storetest_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reqlock/reqlock/core"
)

// memData is the data of an in-memory store that is a core.Sharer and a
// core.MultiAcquirer, kept by a mutex, maps and time.Now: the model the
// Holds properties are shown against. Each memStore on one memData is a
// client of one store, as another process would have.
type memData struct {
	mu     chan struct{} // a mutex of capacity 1, so that a call can hold it across helpers
	keys   map[string]*memKey
	fences map[string]int64
	own    map[string]int64 // bugShareFenceOwnCounter: the shares' own counter
}

// memKey is the state of one key.
type memKey struct {
	token   string    // the exclusive holder's, or ""
	exp     time.Time // the exclusive holder's expiry
	n       int       // the mode of the live shares (Hold.N)
	shares  map[string]*memShare
	waiting map[string]time.Time // the exclusive waiters' records: token -> expiry (one record of the key; one per token with bugWaitPerToken)
}

// memShare is one share of a key.
type memShare struct {
	exp  time.Time
	slot int
}

// memBug is a deliberate bug of a broken memStore.
type memBug int

const (
	bugNone                   memBug = iota
	bugSharesIgnoreExclusive         // TryAcquireShare does not look for an exclusive holder
	bugExclusiveIgnoresShares        // TryAcquire does not look at the shares
	bugPermitsOneMore                // permits(n) lets n+1 holders in
	bugSlotsCollide                  // the slot is the number of live shares, not the lowest free one
	bugResentNewSlot                 // a re-sent TryAcquireShare takes a new slot
	bugResentKeepsTTL                // a re-sent TryAcquireShare keeps the share's TTL
	bugExtendShareKeepsTTL           // ExtendShare reports true but keeps the share's TTL
	bugKeyExpiry                     // every share expires with the key (the latest share's expiry), not on its own
	bugNoMismatch                    // no mode check: any hold joins the shares
	bugWaitIgnored                   // TryAcquireShare ignores the waiting record
	bugWaitNotCleared                // a TryAcquireWaiting that succeeds leaves its record
	bugWaitPerToken                  // the waiting record is the token's: a success clears only its own token's
	bugWaitForever                   // the waiting record never expires
	bugReleaseShareAny               // ReleaseShare by a token with no share removes another share
	bugReleaseFreesShares            // Release (exclusive) with a share's token frees the shares
	bugExtendShareAny                // ExtendShare by a token with no share extends every share
	bugShareFenceOwnCounter          // shares draw fences from a counter of their own
	bugNoHoldCheck                   // no range check of Hold.N
	bugMultiPartial                  // TryAcquireAll sets keys in order until one is held
	bugMultiNotAtomic                // TryAcquireAll always answers ErrNotAtomic
	bugMultiOneTag                   // TryAcquireAll answers ErrNotAtomic for keys of different hash tags (a Redis Cluster); no bug
)

// newMemData returns the data of an empty store.
func newMemData() *memData {
	return &memData{mu: make(chan struct{}, 1), keys: map[string]*memKey{}, fences: map[string]int64{}, own: map[string]int64{}}
}

// memStore is a client of a memData, with an optional bug.
type memStore struct {
	d   *memData
	bug memBug
}

var (
	_ core.Sharer        = (*memStore)(nil)
	_ core.MultiAcquirer = (*memStore)(nil)
)

// lock takes the store's mutex, or fails with ctx.
func (m *memStore) lock(ctx context.Context) error {
	select {
	case m.d.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("memstore: %w", ctx.Err())
	}
}

func (m *memStore) unlock() { <-m.d.mu }

// get returns key's state with what has expired dropped, or nil if
// nothing of it is live.
func (m *memStore) get(key string, now time.Time) *memKey {
	k := m.d.keys[key]
	if k == nil {
		return nil
	}
	if k.token != "" && !now.Before(k.exp) {
		k.token = ""
	}
	if m.bug == bugKeyExpiry {
		// The shares live as long as the latest of them.
		var last time.Time
		for _, sh := range k.shares {
			if sh.exp.After(last) {
				last = sh.exp
			}
		}
		if !now.Before(last) {
			clear(k.shares)
		}
	} else {
		for tok, sh := range k.shares {
			if !now.Before(sh.exp) {
				delete(k.shares, tok)
			}
		}
	}
	for tok, exp := range k.waiting {
		if m.bug != bugWaitForever && !now.Before(exp) {
			delete(k.waiting, tok)
		}
	}
	if k.token == "" && len(k.shares) == 0 && len(k.waiting) == 0 {
		delete(m.d.keys, key)
		return nil
	}
	return k
}

// state returns key's state, made if need be.
func (m *memStore) state(key string, now time.Time) *memKey {
	if k := m.get(key, now); k != nil {
		return k
	}
	k := &memKey{shares: map[string]*memShare{}, waiting: map[string]time.Time{}}
	m.d.keys[key] = k
	return k
}

// fence draws the next fencing token of key if fenced.
func (m *memStore) fence(key string, fenced bool) int64 {
	if !fenced {
		return 0
	}
	m.d.fences[key]++
	return m.d.fences[key]
}

// shareFence draws a share's fencing token.
func (m *memStore) shareFence(key string, fenced bool) int64 {
	if fenced && m.bug == bugShareFenceOwnCounter {
		m.d.own[key]++
		return m.d.own[key]
	}
	return m.fence(key, fenced)
}

// free reports whether k (possibly nil) lets an exclusive holder take it.
func (m *memStore) free(k *memKey) bool {
	return k == nil || k.token == "" && (len(k.shares) == 0 || m.bug == bugExclusiveIgnoresShares)
}

func (m *memStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if !m.free(k) && k.token != token {
		return false, 0, nil
	}
	k = m.state(key, now)
	k.token, k.exp = token, now.Add(ttl)
	return true, m.fence(key, fenced), nil
}

func (m *memStore) Release(ctx context.Context, key, token string) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.unlock()
	k := m.get(key, time.Now())
	if k == nil {
		return false, nil
	}
	if m.bug == bugReleaseFreesShares && k.shares[token] != nil {
		clear(k.shares)
		return false, nil
	}
	if k.token != token {
		return false, nil
	}
	k.token = ""
	m.get(key, time.Now())
	return true, nil
}

func (m *memStore) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if k == nil || k.token != token {
		return false, 0, nil
	}
	k.exp = now.Add(ttl)
	return true, m.fence(key, fenced), nil
}

func (m *memStore) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if m.bug != bugNoHoldCheck {
		if err := h.Check(); err != nil {
			return false, 0, 0, fmt.Errorf("memstore: %w", err)
		}
	}
	if err := m.lock(ctx); err != nil {
		return false, 0, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.state(key, now)
	if sh := k.shares[token]; sh != nil && m.bug != bugResentNewSlot {
		if m.bug != bugResentKeepsTTL {
			sh.exp = now.Add(ttl)
		}
		return true, sh.slot, m.shareFence(key, fenced), nil
	}
	switch {
	case k.token != "" && m.bug != bugSharesIgnoreExclusive:
		return false, 0, 0, nil
	case len(k.shares) > 0 && k.n != h.N && m.bug != bugNoMismatch:
		return false, 0, 0, fmt.Errorf("memstore: %v while %v holders hold %q: %w", h, core.Hold{N: k.n}, key, core.ErrModeMismatch)
	case len(k.waiting) > 0 && m.bug != bugWaitIgnored:
		return false, 0, 0, nil
	}
	slot := 0
	if h.N != 0 {
		limit := h.N
		if m.bug == bugPermitsOneMore {
			limit++
		}
		if len(k.shares) >= limit {
			return false, 0, 0, nil
		}
		if m.bug == bugSlotsCollide {
			slot = len(k.shares)
		} else {
			used := map[int]bool{}
			for _, sh := range k.shares {
				used[sh.slot] = true
			}
			for used[slot] {
				slot++
			}
		}
	}
	if len(k.shares) == 0 {
		k.n = h.N
	}
	k.shares[token] = &memShare{exp: now.Add(ttl), slot: slot}
	return true, slot, m.shareFence(key, fenced), nil
}

func (m *memStore) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.unlock()
	k := m.get(key, time.Now())
	if k == nil {
		return false, nil
	}
	if k.shares[token] == nil {
		if m.bug == bugReleaseShareAny {
			for tok := range k.shares {
				delete(k.shares, tok)
				break
			}
		}
		return false, nil
	}
	delete(k.shares, token)
	m.get(key, time.Now())
	return true, nil
}

func (m *memStore) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if k == nil || k.shares[token] == nil {
		if k != nil && m.bug == bugExtendShareAny {
			for _, sh := range k.shares {
				sh.exp = now.Add(ttl)
			}
		}
		return false, 0, nil
	}
	if m.bug != bugExtendShareKeepsTTL {
		k.shares[token].exp = now.Add(ttl)
	}
	return true, m.shareFence(key, fenced), nil
}

func (m *memStore) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if m.free(k) || k.token == token {
		k = m.state(key, now)
		k.token, k.exp = token, now.Add(ttl)
		switch m.bug {
		case bugWaitNotCleared:
		case bugWaitPerToken:
			delete(k.waiting, token)
		default:
			clear(k.waiting)
		}
		return true, m.fence(key, fenced), nil
	}
	if len(k.shares) > 0 {
		if m.bug != bugWaitPerToken {
			clear(k.waiting) // one record per key, renewed by any waiter
		}
		k.waiting[token] = now.Add(patience)
	}
	return false, 0, nil
}

func (m *memStore) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if m.bug == bugMultiNotAtomic || m.bug == bugMultiOneTag && !oneTag(keys) {
		return false, nil, fmt.Errorf("memstore: %w", core.ErrNotAtomic)
	}
	if err := m.lock(ctx); err != nil {
		return false, nil, err
	}
	defer m.unlock()
	now := time.Now()
	if m.bug != bugMultiPartial {
		for _, key := range keys {
			if k := m.get(key, now); !m.free(k) && k.token != token {
				return false, nil, nil
			}
		}
	}
	fences := make([]int64, len(keys))
	for i, key := range keys {
		if k := m.get(key, now); !m.free(k) && k.token != token {
			return false, nil, nil
		}
		k := m.state(key, now)
		k.token, k.exp = token, now.Add(ttl)
		fences[i] = m.fence(key, fenced)
	}
	return true, fences, nil
}

// oneTag reports whether keys have one hash tag, the text between the first
// "{" and the next "}", as a Redis Cluster slots them.
func oneTag(keys []string) bool {
	tag := func(k string) string {
		_, after, ok := strings.Cut(k, "{")
		if !ok {
			return k
		}
		t, _, ok := strings.Cut(after, "}")
		if !ok || t == "" {
			return k
		}
		return t
	}
	for _, k := range keys {
		if tag(k) != tag(keys[0]) {
			return false
		}
	}
	return true
}
