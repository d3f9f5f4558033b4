package hotspot

// Stats are a Guard's counters. All but Size are cumulative since New.
type Stats struct {
	// Hits counts acquires that went through the local lock of a hot name:
	// a name given to WithKeys, or one seen contended in this process (the
	// acquire that first found contention on a local lock counts the one
	// it found there too). An acquire that took a tentative local lock on
	// which no contention was seen is not a hit.
	Hits int64
	// Bypasses counts acquires of names given to WithKeys that went
	// straight to Redis because every local lock of the full Guard was in
	// use. Names that are not hot never count as bypasses.
	Bypasses int64
	// Evictions counts idle local locks dropped to make room for others.
	Evictions int64
	// Handoffs counts the locks that a local waiter took over from the
	// releasing holder before it (WithHandoff), without a release and a
	// re-acquire in Redis. A hand-off is counted when the lease that took the
	// lock over is released holding it; a lease given to a waiter that could
	// not take it over (it was lost meanwhile, or belongs to another Locker
	// sharing the Guard) is not counted.
	Handoffs int64
	// Size is the number of local locks of hot names the Guard keeps now,
	// in use or idle, at most its capacity. Tentative local locks (see the
	// package documentation) are not counted.
	Size int
}

// Stats returns the Guard's counters.
func (g *Guard) Stats() Stats {
	size, evictions := g.table.size()
	return Stats{
		Hits:      g.hits.Load(),
		Bypasses:  g.bypasses.Load(),
		Evictions: evictions,
		Handoffs:  g.handoffs.Load(),
		Size:      size,
	}
}
