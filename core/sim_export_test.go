package core

// SimParts returns the leases of the names of an AcquireAll lease, in
// canonical order, and nil for the lease of one name: the simulation
// (sim_test.go) checks each part against the store on its own.
func SimParts(l *Lease) []*Lease { return l.parts }
