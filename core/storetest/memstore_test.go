package storetest_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/reqlock/reqlock/core"
)

// memData is the data of an in-memory store that is a core.Sharer, a
// core.MultiAcquirer, a core.Queuer and a core.Inspector, kept by a
// mutex, maps and time.Now: the model the Holds and Inspect properties are
// shown against. Each memStore on one memData is a
// client of one store, as another process would have.
type memData struct {
	mu     chan struct{} // a mutex of capacity 1, so that a call can hold it across helpers
	keys   map[string]*memKey
	fences map[string]int64
	own    map[string]int64 // bugShareFenceOwnCounter: the shares' own counter
	queues map[string]*memQueue
	subs   map[string]map[*memSub]bool // Grants' subscriptions, by key
}

// memQueue is the fair queue of a key (core.Queuer), as the Redis store
// keeps it: tokens in arrival order, and each one's entry.
type memQueue struct {
	order   []string
	entries map[string]memEntry
}

// memEntry is a waiter's entry: dead past its deadline.
type memEntry struct {
	deadline time.Time
	ttl      time.Duration
	patience time.Duration
	fenced   bool
}

// memSub is a subscription of Grants.
type memSub struct {
	token string
	c     chan core.Grant
}

// memKey is the state of one key.
type memKey struct {
	token   string        // the exclusive holder's, or ""
	exp     time.Time     // the exclusive holder's expiry
	ttl     time.Duration // the TTL the exclusive holder asked for last
	fence   int64         // the fence the exclusive holder drew last, 0 if none
	n       int           // the mode of the live shares (Hold.N)
	shares  map[string]*memShare
	waiting map[string]time.Time // the exclusive waiters' records: token -> expiry (one record of the key; one per token with bugWaitPerToken)
}

// memShare is one share of a key.
type memShare struct {
	exp   time.Time
	ttl   time.Duration // the TTL asked for last
	slot  int
	fence int64 // the fence drawn last, 0 if none
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

	// The bugs of the Inspector.
	bugListCompanions       // List also lists each key's companion keys (fence counter, queue, share records)
	bugListExpired          // List lists keys whose holders' TTLs ran out
	bugListWaitersHold      // List lists a key that only waiters wait for
	bugListGlob             // List matches the prefix as a glob pattern (an unescaped SCAN MATCH)
	bugListSkips            // a cursor resumes one key past where the page ended
	bugListCursorNeedsKey   // a cursor is refused once the key it resumes after is gone
	bugListBadLimit         // a limit out of range is taken (clamped)
	bugListAnyCursor        // a cursor it did not hand out starts the listing over
	bugInspectTTLAsked      // Inspect reports the TTL asked for, not the TTL left
	bugInspectOldFence      // Extend does not record the holder's new fence
	bugInspectKeyFence      // failed fenced attempts draw fences, and Inspect reports the key's last fence as the holder's
	bugInspectShareMissing  // Inspect leaves out the last share
	bugInspectNoWriter      // Inspect does not report the waiting writer
	bugInspectWaitersLIFO   // Inspect lists the waiters tail first
	bugInspectWaiterHolds   // Inspect lists the head waiter as a holder too
	bugInspectExtends       // Inspect resets the holders' TTLs to the TTLs they asked for
	bugInspectEmptyHolder   // Inspect of a key that has only its waiting record reports a holder without a token
	bugInspectExpiredHolder // Inspect reports an exclusive holder whose TTL ran out, until a call drops it
	bugInspectExpiredShares // Inspect reports the shares whose TTLs ran out, until a call drops them
	bugInspectDeadWaiters   // Inspect lists the waiters whose patience ran out, until a call drops them
	bugInspectPatienceAsked // Inspect reports the patience a waiter asked for, not the patience left
	bugInspectShareKeyTTL   // Inspect reports the key's TTL left (its longest share's) for every share
	bugListTagOnlyEscaped   // List escapes the prefix's pattern characters only inside its hash tag (after its "{")
	bugInspectDropsRecord   // Inspect reports an exclusive holder's token without its holder record (cut at its ".")
)

// newMemData returns the data of an empty store.
func newMemData() *memData {
	return &memData{
		mu: make(chan struct{}, 1), keys: map[string]*memKey{}, fences: map[string]int64{}, own: map[string]int64{},
		queues: map[string]*memQueue{}, subs: map[string]map[*memSub]bool{},
	}
}

// memStore is a client of a memData, with an optional bug.
type memStore struct {
	d   *memData
	bug memBug
}

var (
	_ core.Sharer        = (*memStore)(nil)
	_ core.HeldAcquirer  = (*memStore)(nil)
	_ core.MultiAcquirer = (*memStore)(nil)
	_ core.Queuer        = (*memStore)(nil)
	_ core.Inspector     = (*memStore)(nil)
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
	return m.getFor(key, now, false)
}

// getFor is get, for Inspect if inspecting: the bugs of Inspect that see
// expired holds keep them.
func (m *memStore) getFor(key string, now time.Time, inspecting bool) *memKey {
	k := m.d.keys[key]
	if k == nil {
		return nil
	}
	if k.token != "" && !now.Before(k.exp) && !(inspecting && m.bug == bugInspectExpiredHolder) {
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
	} else if !inspecting || m.bug != bugInspectExpiredShares {
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

// take sets key to token for ttl, and draws its fence if fenced.
func (m *memStore) take(key, token string, ttl time.Duration, fenced bool, now time.Time) int64 {
	k := m.state(key, now)
	if k.token != token {
		k.fence = 0
	}
	k.token, k.exp, k.ttl = token, now.Add(ttl), ttl
	f := m.fence(key, fenced)
	if f > 0 {
		k.fence = f
	}
	return f
}

func (m *memStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if !m.free(k) && k.token != token {
		if m.bug == bugInspectKeyFence {
			m.fence(key, fenced) // a failed attempt draws too, as ZooKeeper's zxids rise
		}
		return false, 0, nil
	}
	return true, m.take(key, token, ttl, fenced, now), nil
}

// TryAcquireHeld is TryAcquire that tells shares apart
// (core.HeldAcquirer): a key that shares hold is answered shared, with
// nothing written.
func (m *memStore) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if !m.free(k) && k.token != token {
		return false, len(k.shares) > 0, 0, nil
	}
	return true, false, m.take(key, token, ttl, fenced, now), nil
}

func (m *memStore) Release(ctx context.Context, key, token string) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if k != nil && m.bug == bugReleaseFreesShares && k.shares[token] != nil {
		clear(k.shares)
		return false, nil
	}
	if k == nil || k.token != token {
		// A token that does not hold key loses its place in key's queue,
		// as the Redis store's release does.
		m.drop(key, token)
		return false, nil
	}
	k.token = ""
	if m.free(m.get(key, now)) {
		m.grant(key, now)
	}
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
	k.exp, k.ttl = now.Add(ttl), ttl
	f := m.fence(key, fenced)
	if f > 0 && m.bug != bugInspectOldFence {
		k.fence = f
	}
	return true, f, nil
}

// draw records f as the share's fence if one was drawn, and returns it.
func (sh *memShare) draw(f int64) int64 {
	if f > 0 {
		sh.fence = f
	}
	return f
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
			sh.exp, sh.ttl = now.Add(ttl), ttl
		}
		return true, sh.slot, sh.draw(m.shareFence(key, fenced)), nil
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
	sh := &memShare{exp: now.Add(ttl), ttl: ttl, slot: slot}
	k.shares[token] = sh
	return true, slot, sh.draw(m.shareFence(key, fenced)), nil
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
	sh := k.shares[token]
	if m.bug != bugExtendShareKeepsTTL {
		sh.exp, sh.ttl = now.Add(ttl), ttl
	}
	return true, sh.draw(m.shareFence(key, fenced)), nil
}

func (m *memStore) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	if err := m.lock(ctx); err != nil {
		return false, 0, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if m.free(k) || k.token == token {
		f := m.take(key, token, ttl, fenced, now)
		k = m.state(key, now)
		switch m.bug {
		case bugWaitNotCleared:
		case bugWaitPerToken:
			delete(k.waiting, token)
		default:
			clear(k.waiting)
		}
		return true, f, nil
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
		fences[i] = m.take(key, token, ttl, fenced, now)
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

// The fair queue (core.Queuer), as the Redis store's scripts keep it
// (internal/redisscript/queue.lua): a lock freed by a release goes to the
// first live waiter at once; one freed by its TTL to the first live waiter
// at the next Enqueue or Poll.

// queue returns key's queue, made if need be.
func (m *memStore) queue(key string) *memQueue {
	q := m.d.queues[key]
	if q == nil {
		q = &memQueue{entries: map[string]memEntry{}}
		m.d.queues[key] = q
	}
	return q
}

// drop takes token out of key's queue.
func (m *memStore) drop(key, token string) {
	q := m.d.queues[key]
	if q == nil {
		return
	}
	q.order = slices.DeleteFunc(q.order, func(t string) bool { return t == token })
	delete(q.entries, token)
	if len(q.order) == 0 {
		delete(m.d.queues, key)
	}
}

// head returns the first live waiter of key, dropping the dead ones before
// it; "" when nobody lives in the queue.
func (m *memStore) head(key string, now time.Time) string {
	for {
		q := m.d.queues[key]
		if q == nil {
			return ""
		}
		first := q.order[0]
		if e, ok := q.entries[first]; ok && now.Before(e.deadline) {
			return first
		}
		m.drop(key, first)
	}
}

// grant gives free key to its first live waiter, for the smaller of its
// TTL and its patience, tells it on Grants and returns its token; "" when
// nobody lives in the queue.
func (m *memStore) grant(key string, now time.Time) string {
	tok := m.head(key, now)
	if tok == "" {
		return ""
	}
	e := m.d.queues[key].entries[tok]
	ttl := min(e.ttl, e.patience)
	fence := m.take(key, tok, ttl, e.fenced, now)
	m.drop(key, tok)
	for sub := range m.d.subs[key] {
		if sub.token == tok {
			select {
			case sub.c <- core.Grant{OK: true, Fence: fence, TTL: ttl}:
			default:
			}
		}
	}
	return tok
}

// holding answers a waiter that holds key: its entry goes, and it gets
// its fence and the TTL left.
func (m *memStore) holding(key, token string, fenced bool, now time.Time) core.Grant {
	m.drop(key, token)
	k := m.get(key, now)
	var fence int64
	if fenced {
		if fence = m.d.fences[key]; fence == 0 {
			fence = m.fence(key, true)
			k.fence = fence
		}
	}
	return core.Grant{OK: true, Fence: fence, TTL: k.exp.Sub(now)}
}

// renew keeps token's place in key's queue for patience, taking it back
// at the tail if it lost it.
func (m *memStore) renew(key, token string, ttl, patience time.Duration, fenced bool, now time.Time) {
	q := m.queue(key)
	if _, ok := q.entries[token]; !ok || !slices.Contains(q.order, token) {
		q.order = append(slices.DeleteFunc(q.order, func(t string) bool { return t == token }), token)
	}
	q.entries[token] = memEntry{deadline: now.Add(patience), ttl: ttl, patience: patience, fenced: fenced}
}

func (m *memStore) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	if err := m.lock(ctx); err != nil {
		return core.Grant{}, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	if k != nil && k.token == token {
		return m.holding(key, token, fenced, now), nil
	}
	if m.free(k) {
		if first := m.head(key, now); first == "" || first == token {
			fence := m.take(key, token, ttl, fenced, now)
			m.drop(key, token)
			return core.Grant{OK: true, Fence: fence, TTL: ttl}, nil
		}
		m.grant(key, now)
	}
	m.renew(key, token, ttl, patience, fenced, now)
	return core.Grant{}, nil
}

func (m *memStore) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	if err := m.lock(ctx); err != nil {
		return -1, core.Grant{}, err
	}
	defer m.unlock()
	now := time.Now()
	k := m.get(key, now)
	holder := ""
	if k != nil {
		holder = k.token
	}
	for _, w := range waiters {
		if w.Token != holder {
			m.renew(key, w.Token, w.TTL, patience, fenced, now)
		}
	}
	if m.free(k) {
		holder = m.grant(key, now)
	}
	for i, w := range waiters {
		if holder != "" && w.Token == holder {
			return i, m.holding(key, holder, fenced, now), nil
		}
	}
	return -1, core.Grant{}, nil
}

func (m *memStore) Dequeue(ctx context.Context, key, token string) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.unlock()
	now := time.Now()
	m.drop(key, token)
	if k := m.get(key, now); k != nil && k.token == token {
		k.token = ""
		if m.free(m.get(key, now)) {
			m.grant(key, now)
		}
	}
	return nil
}

func (m *memStore) Grants(key, token string) (<-chan core.Grant, func()) {
	sub := &memSub{token: token, c: make(chan core.Grant, 1)}
	m.d.mu <- struct{}{}
	if m.d.subs[key] == nil {
		m.d.subs[key] = map[*memSub]bool{}
	}
	m.d.subs[key][sub] = true
	m.unlock()
	return sub.c, func() {
		m.d.mu <- struct{}{}
		defer m.unlock()
		delete(m.d.subs[key], sub)
		if len(m.d.subs[key]) == 0 {
			delete(m.d.subs, key)
		}
	}
}

// The Inspector.

// held reports whether k (possibly nil, expired parts dropped) has a
// holder.
func held(k *memKey) bool {
	return k != nil && (k.token != "" || len(k.shares) > 0)
}

// cursor is the cursor of a page that ended after key: "m" and key in
// base64.
func cursor(key string) string {
	return "m" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func (m *memStore) List(ctx context.Context, prefix, cur string, limit int) ([]string, string, error) {
	if limit < 1 || limit > core.MaxListLimit {
		if m.bug != bugListBadLimit {
			return nil, "", fmt.Errorf("memstore: %w: list limit %d: want 1..%d", core.ErrInvalidOption, limit, core.MaxListLimit)
		}
		limit = min(max(limit, 1), core.MaxListLimit)
	}
	after, started := "", false
	if cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cur, "m"))
		switch {
		case (err != nil || !strings.HasPrefix(cur, "m")) && m.bug == bugListAnyCursor:
		case err != nil || !strings.HasPrefix(cur, "m"):
			return nil, "", fmt.Errorf("memstore: %w: list cursor %q was not handed out by List", core.ErrInvalidOption, cur)
		default:
			after, started = string(b), true
		}
	}
	if err := m.lock(ctx); err != nil {
		return nil, "", err
	}
	defer m.unlock()
	now := time.Now()
	if started && m.bug == bugListCursorNeedsKey && !held(m.get(after, now)) {
		return nil, "", fmt.Errorf("memstore: %w: list cursor %q: its key is gone", core.ErrInvalidOption, cur)
	}
	match := func(key string) bool { return strings.HasPrefix(key, prefix) }
	switch m.bug {
	case bugListGlob:
		match = func(key string) bool { ok, _ := path.Match(prefix+"*", key); return ok }
	case bugListTagOnlyEscaped:
		before, tag, ok := strings.Cut(prefix, "{")
		pattern := before
		if ok {
			pattern += "{" + globEscape(tag)
		}
		match = func(key string) bool { ok, _ := path.Match(pattern+"*", key); return ok }
	}
	var all []string
	for key, k := range m.d.keys {
		if !match(key) {
			continue
		}
		if m.bug == bugListExpired {
			if k.token != "" || len(k.shares) > 0 {
				all = append(all, key)
			}
		} else if held(m.get(key, now)) {
			all = append(all, key)
		}
		if m.bug == bugListCompanions {
			if _, ok := m.d.fences[key]; ok {
				all = append(all, key+":fence")
			}
			if len(k.shares) > 0 {
				all = append(all, key+":shares")
			}
			if len(k.waiting) > 0 {
				all = append(all, key+":waiting")
			}
		}
	}
	for key := range m.d.queues {
		if match(key) {
			if m.bug == bugListCompanions {
				all = append(all, key+":queue")
			}
			if m.bug == bugListWaitersHold && !held(m.get(key, now)) {
				all = append(all, key)
			}
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if started {
		i, _ := slices.BinarySearch(all, after)
		if i < len(all) && all[i] == after {
			i++
		}
		if m.bug == bugListSkips {
			i++
		}
		all = all[min(i, len(all)):]
	}
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit]
	return page, cursor(page[limit-1]), nil
}

func (m *memStore) Inspect(ctx context.Context, key string) (core.KeyState, error) {
	if err := m.lock(ctx); err != nil {
		return core.KeyState{}, err
	}
	defer m.unlock()
	now := time.Now()
	st := core.KeyState{Key: key, Fence: m.d.fences[key]}
	if k := m.getFor(key, now, true); k != nil {
		if m.bug == bugInspectExtends {
			if k.token != "" {
				k.exp = now.Add(k.ttl)
			}
			for _, sh := range k.shares {
				sh.exp = now.Add(sh.ttl)
			}
		}
		left := func(exp time.Time, ttl time.Duration) time.Duration {
			if m.bug == bugInspectTTLAsked {
				return ttl
			}
			return max(exp.Sub(now), 0) // 0 for what a bug kept past its expiry
		}
		var keyExp time.Time // the key's expiry: its longest share's
		for _, sh := range k.shares {
			if sh.exp.After(keyExp) {
				keyExp = sh.exp
			}
		}
		if k.token != "" || m.bug == bugInspectEmptyHolder && len(k.shares) == 0 {
			h := core.HolderState{Token: k.token, Exclusive: true, TTL: left(k.exp, k.ttl), Fence: k.fence}
			if m.bug == bugInspectKeyFence {
				h.Fence = m.d.fences[key]
			}
			if m.bug == bugInspectDropsRecord {
				h.Token, _, _ = strings.Cut(h.Token, ".")
			}
			st.Holders = append(st.Holders, h)
		}
		for tok, sh := range k.shares {
			ttl := left(sh.exp, sh.ttl)
			if m.bug == bugInspectShareKeyTTL {
				ttl = keyExp.Sub(now)
			}
			st.Holders = append(st.Holders, core.HolderState{Token: tok, Hold: core.Hold{N: k.n}, Slot: sh.slot, TTL: ttl, Fence: sh.fence})
		}
		if len(k.shares) > 0 {
			slices.SortFunc(st.Holders, func(a, b core.HolderState) int {
				if a.Slot != b.Slot {
					return a.Slot - b.Slot
				}
				return strings.Compare(a.Token, b.Token)
			})
			if m.bug == bugInspectShareMissing {
				st.Holders = st.Holders[:len(st.Holders)-1]
			}
		}
		for tok := range k.waiting {
			if m.bug != bugInspectNoWriter {
				st.Writer = tok
			}
		}
	}
	if q := m.d.queues[key]; q != nil {
		for _, tok := range q.order {
			if e, ok := q.entries[tok]; ok && (now.Before(e.deadline) || m.bug == bugInspectDeadWaiters) {
				patience := e.deadline.Sub(now)
				if m.bug == bugInspectPatienceAsked {
					patience = e.patience
				}
				st.Waiters = append(st.Waiters, core.WaiterState{Token: tok, TTL: e.ttl, Patience: max(patience, 0)})
			}
		}
		if m.bug == bugInspectWaitersLIFO {
			slices.Reverse(st.Waiters)
		}
		if m.bug == bugInspectWaiterHolds && len(st.Waiters) > 0 {
			st.Holders = append(st.Holders, core.HolderState{Token: st.Waiters[0].Token, Exclusive: true, TTL: st.Waiters[0].TTL})
		}
	}
	return st, nil
}

// globEscape escapes the characters of a glob pattern (path.Match) in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
