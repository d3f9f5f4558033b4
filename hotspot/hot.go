package hotspot

import (
	"cmp"
	"slices"
	"time"
)

// Hot describes one local lock of a hot name, as Guard.Hot reports it.
type Hot struct {
	// Key is the lock's store key (prefix and name, see core.Locker.Key):
	// the Guard keys its local locks by it.
	Key string
	// Pinned is set for a name given to WithKeys, which is always hot.
	Pinned bool
	// Holders is 1 while a goroutine holds the local lock (and with it the
	// lock in the store, or is taking it there), 0 otherwise.
	Holders int
	// Waiters counts the goroutines waiting for the local lock.
	Waiters int
	// HotUntil is when the name stops being hot unless contended again
	// (automatic detection); zero for a pinned name never contended.
	HotUntil time.Time
}

// Hot returns a snapshot of at most n local locks of hot names, for a
// debug page or a log line: first those in use, the most waited on first
// (then by key), then idle ones still hot, the most recently used first.
// Tentative local locks on which no contention was seen (see the package
// documentation) are left out. It returns nil when n is not positive.
//
// Hot only reads: it changes neither the Guard's state nor its LRU order.
// It takes the Guard's table mutex, which every Enter and release takes
// too, for a time that grows with the local locks in use and idle (at most
// twice the capacity), so call it now and then (a debug page's refresh), not
// on a request's path.
func (g *Guard) Hot(n int) []Hot {
	if n <= 0 {
		return nil
	}
	t := g.table
	var busy, idle []Hot
	t.mu.Lock()
	for _, e := range t.busy {
		if e.tentative && !e.contended {
			continue
		}
		busy = append(busy, snapshot(e))
	}
	if len(busy) < n {
		values := t.idle.Values() // oldest first
		for i := len(values) - 1; i >= 0 && len(busy)+len(idle) < n; i-- {
			if e := values[i]; e.hot(t.now) {
				idle = append(idle, snapshot(e))
			}
		}
	}
	t.mu.Unlock()
	slices.SortFunc(busy, func(a, b Hot) int {
		if c := cmp.Compare(b.Waiters, a.Waiters); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(busy) > n {
		busy = busy[:n]
	}
	return append(busy, idle...)
}

// snapshot copies what Hot tells of e; the caller holds the table's mutex.
func snapshot(e *entry) Hot {
	h := Hot{Key: e.key, Pinned: e.pinned, HotUntil: e.hotUntil}
	if e.refs > 0 && len(e.lock) == 0 { // the token is out: someone holds the local lock
		h.Holders = 1
	}
	h.Waiters = max(e.refs-h.Holders, 0)
	return h
}
