package lockdebug

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Snapshot is what the page shows at one instant, as its JSON endpoint
// serves it. Durations are in whole milliseconds, times in UTC to the
// millisecond. Fields that identify a lock or its holder (names, keys,
// tokens, holders) are empty, and left out of the JSON, unless the Page was
// built WithNames.
type Snapshot struct {
	Now        time.Time `json:"now"`
	NamesShown bool      `json:"names_shown"` // WithNames
	Held       Held      `json:"held"`
	Waiting    Waiting   `json:"waiting"`
	Hot        *HotNames `json:"hot,omitempty"` // nil without WithGuard
	Waits      Waits     `json:"waits"`
}

// Held are the leases this process holds, oldest first.
type Held struct {
	Count     int     `json:"count"`      // every lease held
	NotListed int     `json:"not_listed"` // held beyond the cap (WithMaxLeases)
	Leases    []Lease `json:"leases"`
}

// Lease is one held lease.
type Lease struct {
	Name    string    `json:"name,omitempty"` // WithNames
	Key     string    `json:"key,omitempty"`  // WithNames
	Route   string    `json:"route,omitempty"`
	Mode    string    `json:"mode"`              // exclusive, shared or permits
	Permits int       `json:"permits,omitempty"` // the n of Permits(n)
	Slot    int       `json:"slot"`              // its slot of Permits(n), 0 in the other modes
	Since   time.Time `json:"since"`             // when it was acquired
	HeldMS  int64     `json:"held_ms"`
	// WaitedMS is how long its Acquire waited.
	WaitedMS int64 `json:"waited_ms"`
	// TTLMS is the TTL it was last given in the store, ValidMS the time
	// left until its validity (core.Lease.ValidUntil) passes: negative once
	// it has, for a lease not released in time.
	TTLMS   int64 `json:"ttl_ms"`
	ValidMS int64 `json:"valid_ms"`
	Fence   int64 `json:"fence,omitempty"` // with core.WithFencing
	// HandedOver is set for a lease handed over by the previous holder in
	// this process (the hotspot Guard's hand-off).
	HandedOver bool `json:"handed_over,omitempty"`
	// Holder is the holder identity its token carries (core.ParseHolder),
	// and Token the token itself when it carries none; WithNames.
	Holder *Holder `json:"holder,omitempty"`
	Token  string  `json:"token,omitempty"`
}

// Holder is the identity of a lease's holder, read from its token.
type Holder struct {
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Route     string    `json:"route,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Since     time.Time `json:"since"`
	Fields    []Field   `json:"fields,omitempty"`
	// Text is the holder on one line, as the page shows it: host, process,
	// request id and fields ("api-7 pid 4242 request 7f3a… tenant=acme");
	// the lease's route, mode and times have columns of their own.
	Text string `json:"text"`
}

// Field is a field a service adds to its holders (core.WithHolderField).
type Field struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Waiting are the acquires in progress in this process, the longest
// waiting first.
type Waiting struct {
	Count     int      `json:"count"`      // every acquire in progress
	NotListed int      `json:"not_listed"` // beyond the cap (WithMaxWaiters)
	Waiters   []Waiter `json:"waiters"`
}

// Waiter is one acquire in progress.
type Waiter struct {
	Name      string    `json:"name,omitempty"` // WithNames
	Key       string    `json:"key,omitempty"`  // WithNames
	Route     string    `json:"route,omitempty"`
	Mode      string    `json:"mode"`
	Permits   int       `json:"permits,omitempty"`
	Since     time.Time `json:"since"` // when its Acquire began
	WaitingMS int64     `json:"waiting_ms"`
}

// HotNames are the hot names of the Guard (WithGuard), and its counters.
type HotNames struct {
	Names []HotName `json:"names"` // at most WithMaxHot, as hotspot.Guard.Hot orders them
	// The Guard's counters since it was built (hotspot.Stats).
	Hits      int64 `json:"hits"`
	Bypasses  int64 `json:"bypasses"`
	Evictions int64 `json:"evictions"`
	Handoffs  int64 `json:"handoffs"`
	Size      int   `json:"size"`
}

// HotName is one hot name's local lock.
type HotName struct {
	Name    string `json:"name,omitempty"` // WithNames
	Key     string `json:"key,omitempty"`  // WithNames
	Pinned  bool   `json:"pinned"`         // given to hotspot.WithKeys
	Holders int    `json:"holders"`        // 1 while a goroutine holds the local lock
	Waiters int    `json:"waiters"`        // goroutines waiting in the local queue
	HotMS   int64  `json:"hot_ms"`         // how long it stays hot unless contended again; 0 if pinned and never contended
}

// Waits is the histogram of the lock waits that ended in the window (from
// the call of Acquire to its return), by outcome, and the ends of leases.
type Waits struct {
	WindowMS int64 `json:"window_ms"`
	// Outcomes are the columns of Buckets' and ByOutcome's counts:
	// acquired, busy, canceled, deadline_exceeded, unavailable, invalid,
	// bad_request, error (core.Outcome's names).
	Outcomes  []string `json:"outcomes"`
	Buckets   []Bucket `json:"buckets"`
	ByOutcome []int64  `json:"by_outcome"`
	Total     int64    `json:"total"`
	// HandedOver counts the acquires handed over by the previous holder in
	// this process.
	HandedOver int64 `json:"handed_over"`
	// Releases counts the ends of leases by outcome: released, handed_off,
	// expired, not_held, gave_up, unavailable, error.
	Releases map[string]int64 `json:"releases"`
}

// Bucket is one bar of the histogram: the waits up to UpperMS (above the
// previous bucket's), or above the last bound for the last bucket
// (UpperMS 0).
type Bucket struct {
	Label   string  `json:"label"`
	UpperMS float64 `json:"upper_ms,omitempty"`
	Counts  []int64 `json:"counts"` // by outcome, in the order of Waits.Outcomes
	Total   int64   `json:"total"`
}

// Snapshot returns what the page shows now.
func (p *Page) Snapshot() Snapshot {
	now := p.cfg.now()
	s := Snapshot{Now: utcMS(now), NamesShown: p.cfg.names,
		Held: Held{Leases: []Lease{}}, Waiting: Waiting{Waiters: []Waiter{}}}
	if p.err != nil {
		return s
	}
	p.mu.Lock()
	leases := make([]*lease, 0, len(p.held))
	for l := range p.held {
		leases = append(leases, l)
	}
	s.Held.Count = p.heldN
	type waiting struct {
		k waitKey
		n int
	}
	waits := make([]waiting, 0, len(p.waiting))
	for k, n := range p.waiting {
		waits = append(waits, waiting{k, n})
	}
	s.Waiting.Count = p.waitingN
	hist, handedOver, releases := p.win.sum(now)
	p.mu.Unlock()

	s.Held.NotListed = max(s.Held.Count-len(leases), 0)
	for _, l := range leases {
		s.Held.Leases = append(s.Held.Leases, p.leaseOf(l, now))
	}
	slices.SortFunc(s.Held.Leases, func(a, b Lease) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Route, b.Route), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Token, b.Token))
	})
	listed := 0
	for _, w := range waits {
		for range w.n {
			s.Waiting.Waiters = append(s.Waiting.Waiters, p.waiterOf(w.k, now))
			listed++
		}
	}
	s.Waiting.NotListed = max(s.Waiting.Count-listed, 0)
	slices.SortFunc(s.Waiting.Waiters, func(a, b Waiter) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Route, b.Route), cmp.Compare(a.Key, b.Key))
	})
	if g := p.cfg.guard; g != nil {
		s.Hot = p.hotOf(now)
	}
	s.Waits = p.waitsOf(hist, handedOver, releases)
	return s
}

func (p *Page) leaseOf(l *lease, now time.Time) Lease {
	out := Lease{Route: l.route, Mode: l.mode.String(), Permits: l.permits, Since: utcMS(l.acquired),
		HeldMS: ms(now.Sub(l.acquired)), WaitedMS: ms(l.waited), HandedOver: l.handedOver}
	ttl, until := l.ttl, l.acquired.Add(l.ttl)
	if ll := l.lease; ll != nil {
		ttl, until = ll.TTL(), ll.ValidUntil()
		out.Slot, out.Fence = ll.Slot(), ll.Fence()
		if p.cfg.names {
			token := ll.Token()
			if h, ok := holderOf(token); ok {
				out.Holder = h
			} else {
				out.Token = token
			}
		}
	}
	out.TTLMS, out.ValidMS = ms(ttl), ms(until.Sub(now))
	if p.cfg.names {
		out.Name, out.Key = l.name, l.key
	}
	return out
}

func (p *Page) waiterOf(k waitKey, now time.Time) Waiter {
	w := Waiter{Route: k.route, Mode: k.mode.String(), Permits: k.permits, Since: utcMS(k.start), WaitingMS: max(ms(now.Sub(k.start)), 0)}
	if p.cfg.names {
		w.Name, w.Key = k.name, k.key
	}
	return w
}

func (p *Page) hotOf(now time.Time) *HotNames {
	g := p.cfg.guard
	st := g.Stats()
	h := &HotNames{Names: []HotName{}, Hits: st.Hits, Bypasses: st.Bypasses, Evictions: st.Evictions, Handoffs: st.Handoffs, Size: st.Size}
	for _, x := range g.Hot(p.cfg.maxHot) {
		n := HotName{Pinned: x.Pinned, Holders: x.Holders, Waiters: x.Waiters}
		if !x.HotUntil.IsZero() {
			n.HotMS = max(ms(x.HotUntil.Sub(now)), 0)
		}
		if p.cfg.names {
			n.Key, n.Name = x.Key, nameOfKey(x.Key)
		}
		h.Names = append(h.Names, n)
	}
	return h
}

// nameOfKey returns the lock name inside a key's hash tag (see
// core.Locker.Key), or the key when it has none.
func nameOfKey(key string) string {
	i, j := strings.IndexByte(key, '{'), strings.LastIndexByte(key, '}')
	if i < 0 || j < i {
		return key
	}
	return key[i+1 : j]
}

func (p *Page) waitsOf(hist [nBuckets][nAcquire]int64, handedOver int64, releases [nRelease]int64) Waits {
	w := Waits{WindowMS: ms(p.cfg.window), HandedOver: handedOver, ByOutcome: make([]int64, nAcquire), Releases: map[string]int64{}}
	for _, o := range acquireOutcomes {
		w.Outcomes = append(w.Outcomes, o.String())
	}
	for b := range nBuckets {
		bucket := Bucket{Label: bucketLabel(b), Counts: make([]int64, nAcquire)}
		if b < len(bucketBounds) {
			bucket.UpperMS = float64(bucketBounds[b]) / float64(time.Millisecond)
		}
		for o, n := range hist[b] {
			bucket.Counts[o] = n
			bucket.Total += n
			w.ByOutcome[o] += n
		}
		w.Total += bucket.Total
		w.Buckets = append(w.Buckets, bucket)
	}
	for i, o := range releaseOutcomes {
		w.Releases[o.String()] = releases[i]
	}
	return w
}

func bucketLabel(b int) string {
	if b < len(bucketBounds) {
		return "≤ " + bucketBounds[b].String()
	}
	return "> " + bucketBounds[len(bucketBounds)-1].String()
}

// ms is d in whole milliseconds, rounded towards zero.
func ms(d time.Duration) int64 {
	return int64(d / time.Millisecond)
}

// utcMS is t in UTC to the millisecond, without its monotonic reading.
func utcMS(t time.Time) time.Time {
	return t.UTC().Truncate(time.Millisecond)
}

// formatMS writes a duration in milliseconds for people: "850ms", "2.5s",
// "3m05s", "2h07m" (live.js's fmtMS writes the same).
func formatMS(v int64) string {
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	switch {
	case v < 1000:
		return fmt.Sprintf("%s%dms", neg, v)
	case v < 60_000:
		return fmt.Sprintf("%s%.1fs", neg, float64(v/100)/10)
	case v < 3_600_000:
		return fmt.Sprintf("%s%dm%02ds", neg, v/60_000, v%60_000/1000)
	}
	return fmt.Sprintf("%s%dh%02dm", neg, v/3_600_000, v%3_600_000/60_000)
}

// modeText is a lease's or waiter's mode for people: "exclusive",
// "shared", "permits 2/5" (slot 2 of Permits(5)) or "permits (5)".
func modeText(mode string, permits, slot int, held bool) string {
	if mode != core.ModePermits.String() {
		return mode
	}
	if held {
		return fmt.Sprintf("permit %d of %d", slot, permits)
	}
	return fmt.Sprintf("permits (%d)", permits)
}
