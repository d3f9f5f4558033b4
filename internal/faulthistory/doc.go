// Package faulthistory holds the fault-history test of reqlock on Redis
// through go-redis (core.New): 3 processes × 4 goroutines lock one name,
// without the watchdog and fencing, with both, and with the fair queue
// (core.WithFair) as well, while the test freezes a holder past its TTL,
// freezes Redis, black-holes a holder's link (and cuts one, in the long
// run), kills Redis and restarts it without persistence, and runs
// FLUSHALL; every critical section is recorded, and an analyser tells the
// overlaps and stale writes that the fault model explains from those it
// does not. The history, the workers, the faults and the analysis live in
// internal/faulthistory/history (see its documentation), which the test
// of the other stores (the module internal/faulthistory/stores) shares.
//
// The package has no code outside its tests. The test is heavy for a small
// machine and its figures are timings, so it runs only when
// REQLOCK_FAULTHISTORY=1 (or long); ./scripts/test.sh runs it on its own,
// after the modules' tests. Run it alone with
//
//	REQLOCK_FAULTHISTORY=1 go test -race -count=1 -v -run '^TestFaultHistory$' ./internal/faulthistory
package faulthistory
