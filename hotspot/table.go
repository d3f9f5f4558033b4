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
	// handoff.go); nil when handoff is off.
	pass chan *core.Lease
	// streak counts the handoffs since the lock was last taken in Redis.
	// Only the holder of the local lock touches it.
	streak int

	// Under table.mu:
	refs     int       // goroutines that hold the local lock or wait for it
	hotUntil time.Time // automatic detection: hot until then
	pinned   bool      // a name given to WithKeys: always hot
}

// hot reports whether e is worth keeping while nobody uses it. It reads the
// clock only for an entry that was ever contended.
func (e *entry) hot(now func() time.Time) bool {
	return e.pinned || (!e.hotUntil.IsZero() && now().Before(e.hotUntil))
}

// table is the bounded map from Redis key to local lock. Entries in use
// (refs > 0) live in busy and are never evicted; idle hot entries live in an
// LRU list, and the least recently used of them makes room for a new entry
// when the table is full. An entry that goes idle while not hot is dropped at
// once, so names that are never contended do not stay. In all,
// len(busy) + idle.Len() <= capacity.
type table struct {
	capacity int
	hotFor   time.Duration
	handoff  bool
	now      func() time.Time // the clock; tests set their own

	mu        sync.Mutex
	busy      map[string]*entry
	idle      *simplelru.LRU[string, *entry]
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
// until leave. Without an entry for key, join makes one only when create is
// set; it returns nil then, and bypassed true when the table is full of
// entries in use. A second goroutine joining an entry makes it hot for the
// hot period.
func (t *table) join(key string, create, pinned bool) (e *entry, bypassed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.busy[key]
	if e == nil {
		if idle, ok := t.idle.Peek(key); ok {
			t.idle.Remove(key)
			if create || idle.hot(t.now) {
				e = idle
				t.busy[key] = e
			} // else its hot period is over: it goes, and the name is cold again
		}
	}
	if e == nil {
		if !create {
			return nil, false
		}
		if len(t.busy)+t.idle.Len() >= t.capacity {
			if _, _, ok := t.idle.RemoveOldest(); !ok {
				return nil, true // every entry is in use: do not grow
			}
			t.evictions++
		}
		e = t.newEntry(key)
		t.busy[key] = e
	}
	e.pinned = e.pinned || pinned
	e.refs++
	if e.refs > 1 && t.hotFor > 0 {
		e.hotUntil = t.now().Add(t.hotFor)
	}
	return e, false
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
// it is hot, and drops it otherwise.
func (t *table) leave(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	delete(t.busy, e.key)
	if e.hot(t.now) {
		t.idle.Add(e.key, e) // never evicts: e was counted in busy
	}
}

// size returns the number of entries, and the evictions so far.
func (t *table) size() (int, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.busy) + t.idle.Len(), t.evictions
}
