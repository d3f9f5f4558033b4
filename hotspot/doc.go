// Package hotspot is a local hot-spot lock for reqlock: a core.Handler that
// makes the goroutines of one process queue on a local lock for a hot name,
// so that the process sends one contender to Redis instead of all of them.
//
//	guard := hotspot.New(hotspot.WithCapacity(1000), hotspot.WithKeys("product:1"))
//	locker := core.New(client, core.WithHandlers(guard))
//
// # How it works
//
// Acquire takes the name's local lock first, waiting for it within the
// request's wait budget and context like the Redis loop does (a timeout is
// core.ErrTimeout, or the context's error), and records the time waited in
// core.Request.LocalWait; only the local holder spins in Redis. A failed
// Redis acquire frees the local lock at once. Release frees the lock in Redis
// first, then the local lock, so that the waiter it wakes finds the name free
// rather than spinning in vain.
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
// contention.
//
// A name never contended in this process costs a hash, two atomic adds and
// a lookup in the Guard's table (under its mutex), and keeps no memory once
// its lease is released. When many names are in flight at once, some of them share a
// bucket with another name and take a tentative local lock for as long as
// their lease lives; tentative local locks are dropped with their last user,
// are not counted in Stats (neither as hits, nor as bypasses, nor in Size),
// and never take the place of a kept one: they have a budget of their own,
// of capacity entries. Past it (at about 8 × capacity acquires of distinct
// names in flight at once, for capacities up to 32768, whose 2^20 buckets are
// the most), the names that collide go straight to Redis and
// new hot names are not detected until the load falls; names of WithKeys
// and names already hot are unaffected.
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
// goes with the last of them. Stats and Counters report hits, bypasses,
// evictions, handoffs and the current size.
//
// # Local handoff
//
// With WithHandoff(k), a holder that releases while goroutines of this
// process are parked on the same local lock passes its Redis lock to one of
// them instead of releasing it (lock cohorting): the waiter takes it over
// with core.Lease.Handoff, keeping the token and, while two thirds of its TTL
// remain, the expiry, so the pass costs no round trip; otherwise one
// compare-and-extend refreshes it. The pass is a rendezvous: it reaches a
// waiter that is parked at that moment, and that waiter then owns the lease
// even if its context ends, so a lock is never left in Redis without a
// holder. A lease that no longer holds its lock (core.Lease.Lost: it
// expired, an Extend found its key gone, or its watchdog gave up while Redis
// was unreachable) is not passed on: it is released through the rest of the
// chain, whose compare-and-delete removes its key if the key is still there,
// and the waiter takes the lock in Redis. A lease lost in the instant
// between that check and the takeover is refused by core.Lease.Handoff,
// which deletes its key, and the waiter takes the lock in Redis as well.
//
// After k handoffs in a row the next release goes to Redis, so that other
// processes get their turn. This is the fairness trade-off of handoff: a
// process with queued waiters keeps the lock for up to k+1 critical sections
// in a row while waiters in other processes keep spinning, which raises their
// wait (and their chance of running out of wait budget) in exchange for fewer
// Redis round trips and a higher throughput. Keep k small (about the number
// of goroutines that contend for a name in one process) when other processes
// must not starve; leave handoff off (the default) for strict alternation.
//
// # One Guard, several Lockers
//
// Local locks are keyed by the Redis key of the lock (prefix and name, see
// core.Locker.Key), so Lockers with different prefixes can share a Guard
// without serialising each other. A handler cannot tell Lockers apart
// otherwise: Lockers that share a Guard and a prefix share its local locks,
// and a handoff may pass one Locker's lease to the other's waiter, which then
// holds a lease of the first Locker (its Redis deployment, its handlers).
// Give such Lockers distinct prefixes or a Guard each. A Guard serves one
// process; each process of a service builds its own. Put at most one Guard
// in a Locker's chain: a Guard that hands a lease off skips the handlers
// inside it, so a second Guard there would never see that lease released.
//
// Put the Guard after handlers that should see every acquire and release,
// such as telemetry: core.WithHandlers(telemetry, guard). They then see the
// local wait in Request.LocalWait and the time spent in Redis apart. Handlers
// after the Guard see only what reaches Redis: not an acquire served by a
// handoff, nor the release that handed the lease off.
package hotspot
