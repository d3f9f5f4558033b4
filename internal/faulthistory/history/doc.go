// Package history is the fault-history test of reqlock, shared by the
// test of Redis through go-redis (internal/faulthistory, in the root
// module) and that of every other store (internal/faulthistory/stores, a
// module of its own so that the root module does not depend on the
// stores' clients): several processes lock one name while the test
// injects the faults a hostile operator would, every critical section is
// recorded, and an analyser tells the overlaps and stale writes that the
// fault model explains from those it does not.
//
// A test binary that runs it has two tests: TestFaultHistory, which calls
// Suite with its Cases (a store, a Variant of the Lockers, and how to
// start the store's servers as a Target with its faults), and
// TestWorkerProcess, which calls WorkerMain with an Opener that builds a
// Locker on the store of a URL. Suite skips unless REQLOCK_FAULTHISTORY is
// 1 or long (Enabled, Long).
//
// The history. Suite re-executes its own test binary as 3 worker processes
// (TestWorkerProcess, started with an environment variable that carries
// the Job; closing its standard input stops it). Each runs 4 goroutines
// that acquire the name (TTL 2 s), write twice to a resource, and release;
// each records, on a pipe to the parent, one line per event: the acquire
// (when Acquire was called and returned, the fence, the lease's validity
// and TTL), a failed acquire (when, and its kind), each write (when Done
// was checked, whether it was closed, the validity at that check, when the
// write was sent and whether Done was closed then), and the release.
// Between a check and its write a worker waits a little, the window in
// which a real process can be frozen. The resource is a redis-server,
// reached without a proxy, whose Lua check-and-set refuses a write with a
// lower fence than the highest it has accepted and logs every write,
// accepted or refused, in the order it ran.
//
// The faults (Step), one after the other, each past the longest the store
// holds a lock (Target.Hold: the TTL, or more where the store rounds it
// up): the process of a holder frozen right after it acquired (SIGSTOP,
// then SIGCONT), the store's servers frozen, the links of a holder's
// process to the store black-holed or cut (a redistest.Proxy per worker
// and server), the store killed (SIGKILL) and restarted, on its data or
// empty, FLUSHALL, the leader of a cluster killed. Each is recorded with
// its start and when it healed; the next waits until the name was taken
// again after it (30 s at most: a name still free then fails the run).
//
// The analysis. Two critical sections of different goroutines overlap when
// the later one acquired before the earlier one released. The overlap is
// explained when the earlier holder's process was frozen while its validity
// ran out and the later one acquired after that validity (no lock can stop a
// frozen process; fencing must then refuse its writes), when a fault that
// makes the store forget its locks (a restart without its data, FLUSHALL)
// came between the sending of the earlier acquire and the later acquire,
// or when the earlier lease ran out and its holder let go without writing
// after it; otherwise it is unexplained. A write is stale when the
// resource had already accepted a write of a later holder; it must be
// refused with fencing. A write after Done is one whose check found Done
// open although the lease's validity had passed (or found it closed and
// wrote anyway). Every event is also counted under the fault during or
// after which it happened (the Summary's rows).
//
// Two measures of a name locked by nobody. Held by nobody: after each
// fault healed, the longest stretch in which no critical section held the
// name while some Acquire was waiting for it (every store). Orphan: where
// the run samples the lock's key (Target.Sample, Redis), after each stall
// healed, how long the key held a token that no acquire returned: an
// attempt that failed, whose command the store ran anyway, late.
//
// REQLOCK_FAULTHISTORY_DUMP=dir leaves each run's history in dir, one file
// per case: the workers' records as JSON lines (times in Unix
// nanoseconds), then the faults, the samples of the key and the
// resource's log.
package history
