// Package core is reqlock's lock engine: named, request-scoped locks in a
// Store (Redis by default), taken with the pull-mode algorithm of Redis's
// documented single-instance lock: try SET key token NX PX ttl, sleep a random
// time while another holder has the key, release with a compare-and-delete.
//
// # Using it
//
// Build one Locker per process on a go-redis client and share it:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	locker := core.New(client, core.WithTTL(10*time.Second), core.WithWait(3*time.Second))
//	if err := locker.Err(); err != nil { // invalid options
//		log.Fatal(err)
//	}
//	defer locker.Close()
//	lease, err := locker.Acquire(ctx, "order:42", core.TTL(30*time.Second))
//	if err != nil {
//		return err // errors.Is(err, core.ErrTimeout): busy; core.ErrStorage: the store is down
//	}
//	defer lease.Release(ctx)
//
// The lock's TTL and wait budget come from call options (TTL, Wait), the
// context (ContextWithTTL, for code deep in a request that knows it will be
// slow), a route's defaults (RouteTTL, RouteWait, set by the adapters) and
// the Locker's options, in that order; Locker.Acquire states the rule.
//
// # Where things live
//
// One request goes through three files: locker.go (Acquire: checks, the
// Handlers, the local queue, the spin loop against the Store, the
// Observers; and the release path), lease.go (the Lease and its states) and
// store.go (the Store interface). redis.go is the Redis store, redlock.go the
// quorum store, plugin.go the plugin slots, call.go the call options and the
// precedence rule, outcome.go the outcome vocabulary shared by adapters and
// telemetry.
//
// # The algorithm
//
// Acquire draws a 128-bit random token and loops: if the context is done it
// returns the context's error; otherwise it sends SET key token NX PX ttl GET
// (one round trip; a script doing the same for the first attempt, which
// expects a free name, and on servers before Redis 7.0). On
// success it returns a Lease. If another holder has the key, it sleeps a
// random time in [min, min+random) (WithSpin), trimmed to what is left of the
// wait budget (WithWait, cut by the context's deadline) and cut short by the
// context, then tries again; once the budget is spent it returns ErrTimeout.
// A Redis failure ends the loop at once with ErrStorage, within the I/O
// timeout: waiting would not help, and a storage outage must not look like a
// busy lock. The failed attempt may still be applied later (a frozen server
// runs what it had received when it resumes, a healed link delivers it), so
// the store undoes it with a compare-and-delete of its token, retried in the
// background until it has deleted the key or the server has answered for a
// TTL (see Store.TryAcquire): a name that nobody holds is free again within
// a fraction of a second of the server's recovery, not after a whole TTL.
//
// Release runs a compare-and-delete script: the key is deleted only if it
// still holds the lease's token, so a lease whose TTL ran out never deletes
// the key of the holder that came next; it gets ErrNotHeld instead. An
// uncontended acquire and release take two round trips in all.
//
// Every Redis call is bounded by the I/O timeout (WithIOTimeout). For the
// bound to cut a blocked socket read, create the client with
// ContextTimeoutEnabled: true; otherwise go-redis applies its own ReadTimeout.
//
// # The invariant
//
// What every store and timing path keeps: at every instant, a lease that
// reports itself valid (!Lease.Lost() and before Lease.ValidUntil()) holds
// its name in the store; the fences of a name only increase; within its
// wait budget, a waiter takes a name that nobody holds. A lease's validity
// is counted from when the command that set or extended the lock was sent,
// less a margin for clock drift, never from a reply or a message that may
// come late (an Extend whose reply is lost keeps the shorter validity; a
// fair grant heard by pub/sub is confirmed by a poll). What the engine
// sends on a caller's behalf and may land late (a failed attempt, release
// or dequeue, an enqueue or a poll sent into a stalled store) is undone in
// the background (Undoer). Outside the fault model (a holder frozen past its
// TTL, a store that loses its data) two requests can hold one name; each
// store's documentation says which of its faults are which.
//
// # Keys
//
// The lock for name lives in the key prefix + "{" + name + "}" (default prefix
// "reqlock:"): the braces are a Redis Cluster hash tag, so that companion keys
// of a lock share its slot. Names longer than MaxNameLen bytes, containing
// braces or beginning with "sha256:" are replaced by "sha256:" and their
// SHA-256 in hex. See Locker.Key.
//
// # Reentrancy
//
// A context that carries a lease (ContextWithLease; the adapters add the
// lease they take) makes Acquire of the same name with the same Locker
// reentrant: it returns a nested lease without a Redis call, and the name is
// released when the outermost lease is.
//
// # Stores
//
// A Store is three atomic calls: try-acquire, release and extend, each acting
// only for the token's holder (see Store). New(client) is
// NewWithStore(NewRedisStore(client)); NewRedlock is NewWithStore over a
// quorum of Redis stores (NewRedlockStore). Optional capabilities (push
// wake-ups with Notifier, Redlock fencing with FenceRaiser) are discovered by
// interface assertion. The package core/storetest is the conformance suite
// every Store passes.
//
// # Plugins
//
// A Locker has three plugin slots, so that what a plugin sees never depends
// on the order of the options (see Handler): one LocalQueue (the hotspot
// package's Guard: the goroutines of a process queue locally, and one of
// them contends in the store); Observers (the otel package: typed events for
// every acquire and every end of a lease, local hand-offs included); and
// Handlers, users' own middleware around acquire and release, whose contract
// the types hold.
//
// # Under failure
//
// Each of these is off by default and turned on by an option:
//
//   - WithWatchdog renews a held lease every third of its TTL with a
//     compare-and-extend script, so that a handler may outlive the TTL. If a
//     renewal finds the lock gone, or Redis stays unreachable until only one
//     renewal interval of validity is left, the lease is lost and Done closes
//     while the lock is still the lease's in Redis: the adapters cancel the
//     request before anyone else can take the name. Give the client
//     ContextTimeoutEnabled, so that the I/O timeout bounds every call.
//   - WithFencing gives each lease a fencing token (Lease.Fence), drawn by
//     the acquire script: the larger of a counter kept next to the lock
//     (Key(name)+":fence", expiring 5 s after the lock) + 1 and the server's
//     clock in microseconds. Tokens are strictly increasing per name, across
//     processes and client restarts, and across a FLUSHALL or a Redis
//     restart that lost the counter, as long as the server's clock does not
//     go back. A store that rejects writes carrying a lower token than it
//     has seen is safe from a holder that paused past its TTL, which no lock
//     can prevent. It needs Redis 5.0 or later.
//   - WithNotify makes Release publish on the name's channel
//     (Key(name)+":released") and waiters wake on that message or at the end
//     of their random sleep, whichever comes first. Each Locker has one
//     subscription, started at the first wait; Close ends it.
//
// NewRedlock keeps locks on a majority of independent masters (Redlock), with
// the same API and options. Its calls return once a quorum has answered; the
// calls of slower nodes finish in the background, and Close waits for them.
//
// # Topologies
//
// New takes any go-redis client: a *redis.Client, a Sentinel failover client
// (redis.NewFailoverClient) or a *redis.ClusterClient. A lock's key, its fence
// counter and its release channel share one hash tag, hence one cluster slot,
// so that every script touches a single slot. Release messages use plain
// pub/sub, which Redis Cluster broadcasts to every node. After a storage
// error a cluster client is asked to reload its slot map, so that the Locker
// finds a promoted replica within a round of retries rather than at go-redis's
// periodic reload.
//
// # Limits
//
// A lock in a store is a lease: it ends when its TTL runs out, whether or not the
// holder is done. Choose a TTL above the longest critical section, raise it
// per request with ContextWithTTL, or turn the watchdog on; and watch
// Lease.Done, which closes when the lease is released or lost. With Redis
// replication, a failover can lose a lock that was not yet replicated, and a
// restart without persistence loses them all (fencing tokens carry on from
// the server's clock, see WithFencing).
// A holder that pauses (a GC pause, a stopped VM) past its validity can still
// act on a lease it no longer holds: Lease.Lost, Lease.Done and the
// adapters' request contexts read the clock, so that its first look after
// the pause sees the loss, but a write already under way when it paused
// goes out: use fencing where that matters.
package core
