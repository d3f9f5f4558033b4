// Package core is reqlock's lock engine: named, request-scoped locks kept in
// a store, taken with the pull-mode algorithm of Redis's documented
// single-instance lock: try to set the name's key to a random token if it is
// free, sleep a random time while another holder has it, release with a
// compare-and-delete.
//
// # Using it
//
// Build one Locker per process and share it:
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
// The framework adapters (ginlock, grpclock, httplock and others) do this
// around each request, with a name derived from it (package keyfunc).
//
// # Locks and leases
//
// A Locker locks names. A name lives in the store under a key, the Locker's
// prefix and the name inside a Redis Cluster hash tag ("reqlock:{order:42}",
// see Locker.Key), so that a lock's companion keys share its slot. Each
// attempt draws a token, 128 random bits, and sets the key to it for the
// lock's TTL; only the holder of the token may release or extend the lock.
// The Lease that Acquire returns is that hold: its Name, Key, Token, TTL and
// Fence, and Done, which closes when it is released or lost. A lock is a
// lease in the other sense too: it ends when its TTL runs out, whether or
// not its holder is done.
//
// The TTL and the wait budget (how long Acquire keeps trying while another
// holder has the name) come from the call (TTL, Wait), the context
// (ContextWithTTL, ContextWithWait), the route (RouteTTL, RouteWait, set by
// the adapters) and the Locker (WithTTL, WithWait), strongest first; the
// context's deadline cuts the budget further.
//
// # Acquire and release
//
// Acquire tries the store; while another holder has the name it sleeps a
// random time in [min, min+random) (WithSpin), trimmed to what is left of
// the budget and cut short by the context, then tries again. A spent budget
// is ErrTimeout; an ended context is the context's own error; a store that
// fails or does not answer within the I/O timeout (WithIOTimeout) ends the
// loop at once with ErrStorage, never reported as a busy lock. Release is a
// compare-and-delete: a lease whose TTL ran out never deletes the lock of
// the holder that came next, and gets ErrNotHeld. An uncontended acquire and
// release take two round trips in all.
//
// A context that carries a lease (ContextWithLease; the adapters add the
// lease they take) makes Acquire of the same name with the same Locker
// reentrant: it returns a nested lease without a store call, and the name is
// released when the outermost lease is.
//
// # Lock modes
//
// By default a name has one holder at a time. Shared (a call option) takes
// it in shared mode, the read side of a read-write lock: many shared
// holders at once, none beside an exclusive holder, and a waiting writer
// keeps new readers out. Permits(n) lets up to n holders in at once, each
// in its own slot (Lease.Slot). AcquireAll takes several names all or none,
// in one canonical order so that crossing orders cannot deadlock, as one
// Lease. Shared holds and permits need a store that is a Sharer (modes.go,
// all.go).
//
// # Options for the hard cases
//
// Each is off by default:
//
//   - WithWatchdog renews a held lease every third of its TTL, so that a
//     handler may outlive the TTL; if a renewal finds the lock gone, or the
//     store stays unreachable too long, the lease is lost and Done closes
//     while the lock is still the lease's, and the adapters cancel the
//     request before anyone else can take the name.
//   - WithFencing gives each lease a fencing token (Lease.Fence), strictly
//     increasing per name (Kleppmann's fencing tokens): a resource that
//     rejects writes with a lower token than it has seen is safe from a
//     holder that paused past its TTL, which no lock can prevent.
//   - WithNotify wakes waiters when the lock is released, in about one round
//     trip instead of half a sleep.
//   - WithFair queues waiters in the store in arrival order, and a release
//     grants the lock to the first of them directly, instead of a race that
//     any waiter, or the releasing process again, may win.
//
// # Plugins and hot names
//
// A Locker has three plugin slots, so that what a plugin sees never depends
// on the order of the options: Handlers, users' own middleware around
// acquire and release, whose contract the types hold (see Handler and
// AcquireCall); Observers, told of every acquire and every end of a lease in
// typed events (the otel package); and one LocalQueue, in which the
// goroutines of a process queue for a name before one of them contends in
// the store (the hotspot package's Guard, which also finds hot names by
// itself and may hand a lock off to the next local waiter).
//
// # Stores
//
// A store keeps the locks in three atomic calls, try-acquire, release and
// extend, each acting only for the token's holder, and offers optional
// capabilities (push wake-ups, queues, fence raising, background clean-ups)
// that the Locker finds by interface assertion. The seam is package
// lockstore, whose names core keeps as aliases (Store, Notifier, Queuer...).
// New and NewRedlock build a Locker on the Redis stores of package
// stores/redis; NewWithStore takes any store, such as those of stores/etcd,
// stores/zookeeper, stores/sql, stores/memcached and stores/rueidis. Package
// core/storetest is the conformance suite every store passes.
//
// # The invariant
//
// At every instant, a lease that reports itself valid (!Lease.Lost() and
// before Lease.ValidUntil()) holds its name in the store; the fences of a
// name only increase; within its wait budget, a waiter takes a name that
// nobody holds. A lease's validity counts from when the command that set or
// extended the lock was sent, less a margin for clock drift, never from a
// reply or a message that may come late (an Extend whose reply is lost
// keeps the shorter validity; a fair grant heard by pub/sub is confirmed by
// a poll). What the engine sends on a caller's behalf and may land late (a
// failed attempt, release or dequeue, an enqueue or a poll sent into a
// stalled store) is undone in the background (Undoer).
// Outside the fault model (a holder frozen past its TTL, a store that loses
// its data) two requests can hold one name; each store's documentation says
// which of its faults are which.
//
// # Limits
//
// Choose a TTL above the longest critical section, raise it per request
// with ContextWithTTL, or turn the watchdog on; and watch Lease.Done. A
// holder that pauses (a GC pause, a stopped VM) past its validity can still
// act on a lease it no longer holds: Lease.Lost, Lease.Done and the
// adapters' request contexts read the clock, so that its first look after
// the pause sees the loss, but a write already under way when it paused
// goes out: use fencing where that matters.
package core
