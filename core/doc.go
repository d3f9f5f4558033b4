// Package core is reqlock's lock engine: named, request-scoped locks in Redis
// with the pull-mode algorithm (spin on SET NX PX, random sleep,
// compare-and-delete release).
//
// # Using it
//
// Build one Locker per process on a go-redis client and share it:
//
//	locker := core.New(client, core.WithTTL(10*time.Second), core.WithWait(3*time.Second))
//	if err := locker.Err(); err != nil { // invalid options
//		log.Fatal(err)
//	}
//	lease, err := locker.Acquire(ctx, "order:42")
//	if err != nil {
//		return err // errors.Is(err, core.ErrTimeout): busy; core.ErrStorage: Redis down
//	}
//	defer lease.Release(ctx)
//
// A request that knows it will be slow takes a longer TTL for itself only with
// ContextWithTTL.
//
// # The algorithm
//
// Acquire draws a 128-bit random token and loops: if the context is done it
// returns the context's error; otherwise it sends SET key token NX PX ttl GET
// (one round trip; on servers before Redis 7.0, a script doing the same). On
// success it returns a Lease. If another holder has the key, it sleeps a
// random time in [min, min+random) (WithSpin), trimmed to what is left of the
// wait budget (WithWait, cut by the context's deadline) and cut short by the
// context, then tries again; once the budget is spent it returns ErrTimeout.
// A Redis failure ends the loop at once with ErrStorage: waiting would not
// help, and a storage outage must not look like a busy lock.
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
// # Handlers
//
// A Handler wraps acquire and release like HTTP middleware (the seed
// framework's LockHandler). Handlers are given with WithHandlers; the Redis
// backend is always the innermost link. Local hot-spot locks and telemetry
// are Handlers in their own packages. Lease.Handoff lets a local-lock
// handler pass a lock still held in Redis to the next local waiter, and
// ContextWithRoute gives telemetry handlers a low-cardinality label
// (Request.Route).
//
// # Limits
//
// A Redis lock is a lease: it ends when its TTL runs out, whether or not the
// holder is done. Choose a TTL above the longest critical section, raise it
// per request with ContextWithTTL, and watch Lease.Done, which closes when the
// TTL runs out without an Extend. With Redis replication, a failover can lose
// a lock that was not yet replicated.
package core
