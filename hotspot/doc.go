// Package hotspot is a local hot-spot lock for reqlock: a core.LocalQueue
// that makes the goroutines of one process queue on a local lock for a hot
// name, so that the process sends one contender to Redis instead of all of
// them.
//
//	guard := hotspot.New(hotspot.WithCapacity(1000), hotspot.WithKeys("product:1"))
//	locker := core.New(client, core.WithHandlers(guard))
//
// core.WithHandlers puts the Guard in the Locker's local-queue slot (so does
// core.WithLocalQueue), whatever its place among the other plugins: the
// Locker takes the local turn below every Handler, and tells its Observers
// (telemetry, logs) of every acquire and release, local ones included. A
// Locker has one local queue.
//
// # How it works
//
// An acquire takes the name's local lock first (Guard.Enter), waiting for it
// within the request's wait budget and context as the Redis loop does (a
// timeout is core.ErrTimeout, or the context's error); the Locker reports
// the time waited to its Observers (core.AcquireEvent.LocalWait). Only the
// local holder spins in Redis. A failed Redis acquire frees the local lock
// at once. A release frees the lock in Redis first, then the local lock, so
// that the waiter it wakes finds the name free rather than spinning in vain.
//
// # Which names are hot
//
// Names given to WithKeys always take a local lock. Other names are found
// automatically: the Guard counts the acquires in flight per hash bucket of
// the lock key, in a fixed array (32 buckets per entry of capacity, from 4096
// to 2^20), and an acquire that finds another acquire in flight in its
// bucket is suspected of contention: it takes a tentative local lock, so
// that a second goroutine on the same name finds it. Once two goroutines
// meet on a local lock, the name is hot: its local lock is kept in the Guard
// and stays for WithHotPeriod (default one minute) after the last
// contention. The count of an acquire ends with its lease's release: the
// turn of an acquire that takes no local lock is its bucket, so counting it
// allocates nothing.
//
// A name never contended in this process costs a hash, two atomic adds and
// a lookup in the Guard's table (under its mutex), and keeps no memory once
// its lease is released. When many names are in flight at once, some of them
// share a bucket with another name and take a tentative local lock for as
// long as their lease lives; tentative local locks are dropped with their
// last user, are not counted in Stats (neither as hits, nor as bypasses, nor
// in Size), and never take the place of a kept one: they have a budget of
// their own, of capacity entries. Past it (at about 8 × capacity acquires of
// distinct names in flight at once, for capacities up to 32768, whose 2^20
// buckets are the most), the names that collide go straight to Redis and new
// hot names are not detected until the load falls; names of WithKeys and
// names already hot are unaffected. WithHotPeriod(0) turns detection off:
// names not given to WithKeys then get no turn at all.
//
// # Bounded memory
//
// The Guard keeps at most WithCapacity local locks of hot names, and at most
// as many tentative ones in use. A local lock that is held or waited on is
// never evicted; one that goes idle stays, in an LRU list (golang-lru/v2),
// only while its name is hot, and the least recently used idle one makes
// room for a new one. When all of them are in use, a further name of
// WithKeys bypasses the Guard and contends in Redis directly: it is still
// correct, only not queued locally. A name newly contended then keeps its
// tentative local lock, which queues its goroutines while they use it and
// goes with the last of them. Stats reports hits, bypasses, evictions,
// hand-offs and the current size; Hot lists the hot names' local locks with
// their holder and waiters (the lockdebug package's page shows them).
//
// # Local hand-off
//
// With WithHandoff(k), a holder that releases while goroutines of this
// process are parked on the same local lock passes its Redis lock to one of
// them instead of releasing it: this is lock cohorting (Dice, Marathe and
// Shavit, "Lock Cohorting: A General Technique for Designing NUMA Locks",
// PPoPP 2012), with the process as the cohort and Redis as the global lock.
// The Locker offers the lease to the Guard at the release (LocalTurn.Pass),
// and the waiter's Locker takes it over, keeping the token and, while two
// thirds of its TTL remain, the expiry, so the pass costs no round trip;
// otherwise one compare-and-extend refreshes it (with fencing, always, and
// the new holder gets a higher fencing token). The pass is a rendezvous: it
// reaches a waiter that is parked at that moment, and that waiter then owns
// the lease even if its context ends, so a lock is never left in Redis
// without a holder. A lease that no longer holds its lock (core.Lease.Lost:
// it expired, an Extend found its key gone, or its watchdog gave up while
// Redis was unreachable) is never offered: the Locker releases it in Redis,
// whose compare-and-delete removes its key if it is still there, and the
// waiter takes the lock in Redis. A lease lost in the instant between the
// offer and the takeover is refused by the waiter's Locker, which deletes
// its key, and the waiter takes the lock in Redis as well.
//
// After k hand-offs in a row the next release goes to Redis, so that other
// processes get their turn. This is the fairness trade-off of hand-off (the
// cohort's bound on consecutive local passes): a process with queued waiters
// keeps the lock for up to k+1 critical sections in a row while waiters in
// other processes keep spinning, which raises their wait (and their chance
// of running out of wait budget) in exchange for fewer Redis round trips and
// a higher throughput. Keep k small (about the number of goroutines that
// contend for a name in one process) when other processes must not starve;
// leave hand-off off (the default) for strict alternation.
//
// Observers see a hand-off at both ends: the release that passed the lock
// ends with core.OutcomeHandedOff, and the acquire that took it over has
// core.AcquireEvent.HandedOver set and no store attempts. The otel package
// reports both, and the Guard's Stats, whatever the order of the plugins.
//
// # One Guard, several Lockers
//
// Local locks are keyed by the Redis key of the lock (prefix and name, see
// core.Locker.Key), so Lockers with different prefixes can share a Guard
// without serialising each other. Lockers that share a Guard and a prefix
// share its local locks, which is correct (one of their goroutines at a time
// contends in Redis) but couples them: a release may pass one Locker's lease
// to the other's waiter, which cannot take it over (the lease belongs to
// another Locker's Redis and settings), so its Locker releases it where it
// was taken and acquires on its own, at the cost of two round trips. Give
// such Lockers distinct prefixes or a Guard each. A Guard serves one
// process; each process of a service builds its own.
package hotspot
