package hotspot

// Stats are a Guard's counters. All but Size are cumulative since New.
type Stats struct {
	// Hits counts acquires that went through a local lock.
	Hits int64
	// Bypasses counts acquires of hot names that went straight to Redis
	// because every local lock of the full Guard was in use.
	Bypasses int64
	// Evictions counts idle local locks dropped to make room for others.
	Evictions int64
	// Handoffs counts leases passed from a releasing holder to a local
	// waiter without a release and a re-acquire in Redis.
	Handoffs int64
	// Size is the number of local locks the Guard keeps now, at most its
	// capacity.
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

// Counters returns the Guard's counters by name, for exporters: "hits",
// "bypasses", "evictions" and "handoffs" (cumulative) and "size" (current),
// as in Stats.
func (g *Guard) Counters() map[string]int64 {
	s := g.Stats()
	return map[string]int64{
		"hits":      s.Hits,
		"bypasses":  s.Bypasses,
		"evictions": s.Evictions,
		"handoffs":  s.Handoffs,
		"size":      int64(s.Size),
	}
}
