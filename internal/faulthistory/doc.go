// Package faulthistory holds the fault-history test of reqlock: several
// processes lock one name while the test injects the faults a hostile
// operator would (a holder frozen past its TTL, Redis frozen, a link
// black-holed, Redis killed and restarted without persistence, FLUSHALL),
// every critical section is recorded, and an analyser tells the overlaps and
// stale writes that the fault model explains from those it does not.
//
// The package has no code outside its tests. The test is heavy for a small
// machine and its figures are timings, so it runs only when
// REQLOCK_FAULTHISTORY=1; ./scripts/test.sh runs it on its own, after the
// modules' tests. Run it alone with
//
//	REQLOCK_FAULTHISTORY=1 go test -race -count=1 -v -run '^TestFaultHistory$' ./internal/faulthistory
//
// The history. The test re-executes its own binary as worker processes
// (TestWorkerProcess, started with an environment variable that carries the
// job; closing its standard input stops it). Each worker runs goroutines that acquire the name, write twice to a
// resource, and release; each records, on a pipe to the parent, one line per
// event: the acquire (when Acquire was called and returned, the fence, the
// lease's validity), each write (when Done was checked, whether it was
// closed, the validity at that check, when the write was sent and whether Done
// was closed then), and the release. Between a check and its write a worker
// waits a little, the window in which a real process can be frozen. The
// resource is a second redis-server, reached without a proxy, whose Lua
// check-and-set refuses a write with a lower fence than the highest it has
// accepted and logs every write, accepted or refused, in the order it ran.
//
// The faults. The parent freezes the process of a holder right after it
// acquired (SIGSTOP past the TTL, then SIGCONT), freezes Redis
// (redistest.Server.Freeze) for longer than the TTL, black-holes the link of a
// holder's process (redistest.Proxy, one per worker), kills Redis with
// SIGKILL and restarts it empty, and runs FLUSHALL; each fault is recorded
// with its start and end.
//
// The analysis. Two critical sections of different goroutines overlap when
// the later one acquired before the earlier one released. The overlap is
// explained when the earlier holder's process was frozen while its validity
// ran out and the later one acquired after that validity (no lock can stop a
// frozen process; fencing must then refuse its writes), or when a restart
// without persistence or a FLUSHALL came between the two acquires (the
// store lost the lock, by design); otherwise it is unexplained. A write is
// stale when the resource had already accepted a write of a later holder; it
// must be refused with fencing. A write after Done is one whose check found
// Done open although the lease's validity had passed (or found it closed and
// wrote anyway). The orphan after a stall is how long, after the stall
// healed, the lock's key (which the parent reads every 10 ms then) still held
// a token that no acquire returned: an attempt that failed, whose SET Redis
// ran anyway, late; while it lasts the name is locked by nobody.
package faulthistory
