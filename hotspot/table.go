package hotspot

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/reqlock/reqlock/core"
)

// entry is the local lock of one Redis key.
type entry struct {
	key string
	// lock holds one token while the local lock is free: taking the lock
	// is receiving the token, releasing it is sending it back. Unlike a
	// sync.Mutex, it can be waited on with a deadline and a context.
	lock chan struct{}
	// pass hands a Redis lease from the releasing holder to a waiter (see
	// handoff.go); nil when hand-off is off.
	pass chan *core.Lease
	// streak counts the hand-offs since the lock was last taken in Redis.
	// Only the holder of the local lock touches it.
	streak int

	// Under table.mu:
	refs     int       // goroutines that hold the local lock or wait for it
	hotUntil time.Time // automatic detection: hot until then
	pinned   bool      // a name given to WithKeys: always hot
	// tentative: made for an acquire suspected of contention (its bucket
	// of the in-flight sketch was shared) and not kept yet; see table.
	tentative bool
	// contended: two goroutines met on the entry at least once.
	contended bool
}

// hot reports whether e is worth keeping while nobody uses it. It reads the
// clock only for an entry that was ever contended.
func (e *entry) hot(now func() time.Time) bool {
	return e.pinned || (!e.hotUntil.IsZero() && now().Before(e.hotUntil))
}

// table is the bounded map from Redis key to local lock.
//
// Kept entries are those of hot names: given to WithKeys, or seen contended
// in this process. Those in use (refs > 0) live in busy and are never
// evicted; idle ones live in an LRU list while they are hot, and the least
// recently used of them makes room for a new kept entry when the table is
// full. In all, kept + idle.Len() <= capacity.
//
// Tentative entries are made for acquires that the in-flight sketch suspects
// of contention, which are mostly acquires of cold names whose hash bucket is
// shared with another name in flight. They exist so that a second goroutine
// on the same name finds the first one's local lock, and cost nothing else:
// they live in busy only while in use, apart from the capacity (at most
// capacity of them, tentative <= capacity), never evict an entry, never
// count as a bypass when there is no room for them (the acquire then goes
// straight to Redis, as for a cold name), and are dropped when their users
// leave. Contention seen on one makes it a kept entry, given room; one that
// finds no room stays tentative, a working local lock for its users, until
// they leave.
type table struct {
	capacity int
	hotFor   time.Duration
	handoff  bool
	now      func() time.Time // the clock; tests set their own

	mu        sync.Mutex
	busy      map[string]*entry // kept and tentative entries in use
	idle      *simplelru.LRU[string, *entry]
	kept      int // kept entries in busy
	tentative int // tentative entries in busy
	evictions int64
}

func newTable(capacity int, hotFor time.Duration, handoff bool) *table {
	idle, err := simplelru.NewLRU[string, *entry](capacity, nil)
	if err != nil { // capacity was validated by New
		panic(err)
	}
	return &table{capacity: capacity, hotFor: hotFor, handoff: handoff, now: time.Now, busy: make(map[string]*entry), idle: idle}
}

// join registers a holder or waiter for key and returns its entry, pinned
// until leave, or nil when the acquire is to go straight to Redis.
//
// An entry in use or an idle hot one is joined. Without one, join makes a
// kept entry for a name of WithKeys (pinned), evicting the least recently
// used idle entry when the table is full, or reports bypassed when every
// kept entry is in use; it makes a tentative entry for a suspect acquire,
// if fewer than capacity are in use; otherwise it returns nil.
//
// A second goroutine joining an entry makes it hot for the hot period, and
// makes a tentative entry a kept one if there is room. hits is the number of
// acquires that this join makes go through the local lock of a hot name: 1,
// 0 for the first user of a tentative entry (nothing was seen on the name
// yet), or 2 when a second user is the first contention seen on a tentative
// entry, which counts its first user as well.
func (t *table) join(key string, pinned, suspect bool) (e *entry, hits int, bypassed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.busy[key]
	if e == nil {
		if idle, ok := t.idle.Peek(key); ok {
			t.idle.Remove(key)
			if idle.hot(t.now) {
				e = idle
				t.busy[key] = e
				t.kept++
			} // else its hot period is over: it goes, and the name is cold again
		}
	}
	if e == nil {
		switch {
		case pinned:
			if !t.makeRoom() {
				return nil, 0, true // every kept entry is in use: do not grow
			}
			e = t.newEntry(key)
			t.kept++
		case suspect && t.tentative < t.capacity:
			e = t.newEntry(key)
			e.tentative = true
			t.tentative++
		default:
			return nil, 0, false
		}
		t.busy[key] = e
	}
	e.pinned = e.pinned || pinned
	e.refs++
	hits = 1
	if e.refs > 1 {
		if t.hotFor > 0 {
			e.hotUntil = t.now().Add(t.hotFor)
		}
		if !e.contended && e.tentative {
			hits = 2
		}
		e.contended = true
		if e.tentative {
			t.keep(e)
		}
	} else if e.tentative {
		hits = 0
	}
	return e, hits, false
}

// makeRoom reports whether the table can take one more kept entry, evicting
// the least recently used idle entry if it must.
func (t *table) makeRoom() bool {
	if t.kept+t.idle.Len() < t.capacity {
		return true
	}
	if _, _, ok := t.idle.RemoveOldest(); !ok {
		return false
	}
	t.evictions++
	return true
}

// keep makes tentative e, in use, a kept entry if there is room; otherwise
// it stays tentative.
func (t *table) keep(e *entry) {
	if t.makeRoom() {
		e.tentative = false
		t.tentative--
		t.kept++
	}
}

func (t *table) newEntry(key string) *entry {
	e := &entry{key: key, lock: make(chan struct{}, 1)}
	e.lock <- struct{}{}
	if t.handoff {
		e.pass = make(chan *core.Lease)
	}
	return e
}

// leave ends what join began. The last one out moves e to the idle list if
// it is hot (a tentative e only if there is room for it), and drops it
// otherwise.
func (t *table) leave(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	delete(t.busy, e.key)
	if e.tentative {
		t.tentative--
	} else {
		t.kept--
	}
	// A kept e finds the room it took; a tentative one may evict an idle
	// entry less recently used.
	if e.hot(t.now) && t.makeRoom() {
		e.tentative = false
		t.idle.Add(e.key, e) // never evicts: makeRoom made room
	}
}

// size returns the number of kept entries, and the evictions so far.
func (t *table) size() (int, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kept + t.idle.Len(), t.evictions
}
