package hotspot

import "time"

// Waiters returns how many goroutines hold or wait for the local lock of the
// Redis key, 0 when the key has no local lock in use.
func (g *Guard) Waiters(key string) int {
	g.table.mu.Lock()
	defer g.table.mu.Unlock()
	if e := g.table.busy[key]; e != nil {
		return e.refs
	}
	return 0
}

// InFlight returns the acquires counted by the hot-name detector: those in
// progress and the leases not yet released.
func (g *Guard) InFlight() int {
	return g.inflight.total()
}

// Tentative returns the number of tentative local locks in use: those made
// for acquires suspected of contention, outside the capacity.
func (g *Guard) Tentative() int {
	g.table.mu.Lock()
	defer g.table.mu.Unlock()
	return g.table.tentative
}

// Refused returns how many leases the Guard passed to a waiter that did not
// take them over (a lease lost meanwhile, or another Locker's), as seen when
// the waiter's turn ended.
func (g *Guard) Refused() int64 {
	return g.refused.Load()
}

// SetClock makes the Guard read the time from now, for the hot period of
// the names it detects: a test that moves the clock itself ends a hot period
// when it says so, not when the machine's scheduling does. Call it before
// the Guard is used.
func (g *Guard) SetClock(now func() time.Time) {
	g.table.now = now
}
