package redistest

import "sync/atomic"

// Overlap detects a broken mutual exclusion directly: every holder calls
// Enter when its critical section begins and the returned function when it
// ends; any Enter that finds another holder inside counts as an overlap. A
// final counter alone could not tell a lost update from a lucky interleaving.
type Overlap struct {
	inside   atomic.Int64
	entries  atomic.Int64
	overlaps atomic.Int64
}

// Enter marks the start of a critical section and returns its end.
func (o *Overlap) Enter() (exit func()) {
	o.entries.Add(1)
	if o.inside.Add(1) > 1 {
		o.overlaps.Add(1)
	}
	return func() { o.inside.Add(-1) }
}

// Entries returns how many critical sections were entered.
func (o *Overlap) Entries() int64 { return o.entries.Load() }

// Overlaps returns how many critical sections began while another was running.
func (o *Overlap) Overlaps() int64 { return o.overlaps.Load() }
