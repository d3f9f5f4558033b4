// Package redisstore keeps reqlock's locks in Redis through go-redis: New for
// one deployment (a standalone server, a Sentinel-managed master or a
// Cluster), NewRedlock for a majority of independent masters (Redlock). Both
// are lockstore.Stores; core.New(client) is core.NewWithStore on New(client),
// and core.NewRedlock on NewRedlock(clients), whose Close also closes the
// store.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store := redisstore.New(client)
//	defer store.Close()
//	locker := core.NewWithStore(store, core.WithFencing(), core.WithNotify())
//
// # Commands
//
// Each call is one round trip: an uncontended acquire and release take two.
//
//   - Acquire is Redis's documented single-instance lock: SET key token NX PX
//     ttl GET, one native command. GET returns the value the key had: none
//     means the key is now ours, and the caller's own token means a re-sent
//     attempt whose first reply was lost, ours too once its TTL is reset.
//     Servers before Redis 7.0 reject NX with GET and run the same logic as
//     acquire.lua. The first attempt of an Acquire with a wait budget, which
//     expects a free name (FreeAcquirer), sends SET key token NX PX ttl
//     without GET, whose OK costs nothing to read (go-redis reports a nil
//     reply as an error, at the cost of some twenty allocations); its nil
//     reply to a held name may be its own re-sent transmission, which the
//     Locker's next attempt, with the same token, recognises. A Locker's
//     later attempts, which expect a held name, are the native command with
//     GET again (HeldAcquirer), which also tells a key that shares hold (its
//     value is their marker, and the SET wrote nothing); a fenced one runs
//     acquire_held.lua. Once shares held the name, the rest of that
//     Acquire runs acquire_waiting.lua, which records the waiting writer.
//   - Release is compare-and-delete (release_unqueued.lua, then
//     release.lua for a name with a fair queue): the key is deleted only
//     if it holds the token. The same script grants the lock to the first
//     live waiter of the key's fair queue, if any, or else publishes on the
//     key's release channel once the store was announced.
//   - Extend is compare-and-extend (extend.lua, extend_fenced.lua).
//   - With core.WithFair, Enqueue (enqueue.lua) takes a free key or queues
//     the waiter (a sorted set and a hash next to the lock) in the same
//     round trip; Poll (poll.lua) renews a Locker's waiters of a key at
//     once; Dequeue (dequeue.lua) takes a waiter that gives up out of line,
//     passing on a grant that reached it.
//
// The scripts are those of internal/redisscript, shared with the rueidis
// store (stores/rueidis), so that Lockers on either client share one lock,
// one fence counter, one release channel and one queue. Each is sent by EVAL
// the first time on a deployment and by EVALSHA afterwards (EVAL again after
// a NOSCRIPT, from a restarted or failed-over server). TTLs count
// milliseconds on the server's clock.
//
// # Keys
//
// A lock's companion keys are its key plus a suffix: the fence counter
// (key+":fence"), the fair queue and the release channel
// (key+":released"). The Locker's keys carry a Redis Cluster hash tag
// ("prefix{name}"), so that all of them live in one slot and every script
// touches a single slot. Release messages use plain pub/sub, which Redis
// Cluster broadcasts to every node.
//
// # Shared holds, permits and several names at once
//
// Store is a lockstore.Sharer (core.Shared, core.Permits) and a
// lockstore.MultiAcquirer (core.Locker.AcquireAll); Redlock is neither, and
// a Locker on it refuses those modes with core.ErrInvalidOption
// (AcquireAll then takes its names one by one). The references are
// Redisson's RReadWriteLock and RSemaphore (or RPermitExpirableSemaphore)
// and RedissonMultiLock; the scripts are internal/redisscript's share.lua
// family and acquire_all.lua, each one round trip.
//
// While shares are live, the lock key holds a marker, "reqlock:shares:N"
// (N the permits, 0 for shared holds), never a token, so that the
// exclusive commands (SET NX, compare-and-delete, compare-and-extend, the
// fair queue) see a held name and need no change; a Locker WithFair is
// refused shares (core.Shared). The shares live beside it:
//
//   - key+":shares", a sorted set of the shares' tokens scored by their
//     expiry on the server's clock (ms): each share has its own TTL and
//     expires on its own, whatever the others do;
//   - key+":slots", a hash from token to "slot fence": its permit slot (the
//     lowest free one when it was taken) and the fence it drew;
//   - key+":writer", the record of an exclusive waiter (TryAcquireWaiting,
//     which the Locker uses for an exclusive Acquire's retries), its token
//     for its patience: while it lives no new share is taken, so that
//     writers do not starve; once the shares end, the name stays free for
//     it until it takes it (which deletes the record) or the record expires.
//
// Every share call prunes the expired shares first (by TIME) and makes the
// marker and the two share keys expire at one instant, the latest share's
// expiry; the last share out deletes them (and, with core.WithNotify,
// publishes a release notice). A share in another mode than the live ones
// is an error wrapping lockstore.ErrModeMismatch. With fencing, a share
// draws its fence from the name's counter, as an exclusive holder does.
// A share attempt that fails after it may have reached Redis is undone by
// a ReleaseShare of its token, at once and in the background (UndoShare),
// as an exclusive attempt is by a compare-and-delete.
//
// This differs from Redisson's RReadWriteLock, which keeps its readers in
// one hash whose TTL every reader's lock and renewal resets, each reader's
// own timeout in a key beside it: its watchdog renewed the hash but not
// the readers' timeouts (redisson issue #1604), and one client's renewal
// could keep another client's dead reader alive (redisson pull request
// #7098). Here each share's expiry is its own score in one sorted set,
// renewed only by its holder (ExtendShare), pruned on the server's clock,
// and the marker's expiry is recomputed from the scores at every call.
// Permits are numbered slots (Lease.Slot) with their own TTL, like
// RPermitExpirableSemaphore's permits rather than RSemaphore's counter.
//
// TryAcquireAll (acquire_all.lua) sets every key to the token for the TTL
// if none is held, and draws a fence per key, in one script: all or none,
// never some of them. Unlike RedissonMultiLock, which takes its locks one
// after another and unlocks them on failure, no other client ever sees a
// part of the set held. A script runs on one node: on a Cluster the keys
// must share a hash slot (give the names one hash tag, such as
// "order{42}:a" and "order{42}:b"); keys of several slots are refused with
// lockstore.ErrNotAtomic before anything is sent, and the Locker takes them
// one by one in its canonical order. On a standalone server or a
// Sentinel-managed master (a *redis.Client) any keys go in one script.
//
// # Fencing
//
// With core.WithFencing the acquire script draws the fencing token in the
// same atomic step: the larger of the key's counter + 1 and the server's
// clock in microseconds (TIME), written back to the counter. Tokens are
// strictly increasing per name, across processes and client restarts, and,
// as the clock carries on where the counter is lost, across a FLUSHALL, a
// restart without persistence, an evicted counter or a failover that lost
// its latest value. The counter expires 5 s after the lock it was last drawn
// for (at every fenced acquire and local hand-off; watchdog renewals do not
// extend it), so that an idle name leaves nothing behind.
//
// The limit is the server's clock: a clock stepped back, or a failover to a
// replica whose clock is behind by more than the time since the last token,
// can repeat tokens. Keep the servers' clocks synchronised (NTP slewing, not
// stepping). Memory pressure never repeats a token, but an evicted lock is a
// lost lock: run the locks' Redis with maxmemory-policy noeviction. Fencing
// needs Redis 5.0 or later, and replaces the native SET of the attempts
// after the first by a script (a little more of Redis's CPU, the same round
// trips). Tokens are about 1.7e15: store them in 64-bit columns.
//
// # Wake-ups
//
// With core.WithNotify the release script publishes on the key's channel,
// at no extra round trip. Watch and Grants share one pub/sub connection per
// store, subscribed to the channels of the keys that have waiters in this
// process, or had one within the linger (core.WithNotifyLinger), so that a
// hot name costs no SUBSCRIBE per wait. A fair waiter granted the lock by
// the release script hears it there, and confirms it with a poll at once: a
// hand-off between processes costs the releaser's one round trip and the
// new holder's one. Messages may be lost; the waiters' random sleep and
// polls are the fallback. Close the store (or the
// Locker that owns it) to end the subscription.
//
// # Failures
//
// Give the client ContextTimeoutEnabled (redis.Options,
// redis.ClusterOptions, redis.FailoverOptions): without it go-redis does not
// cut a blocked socket read at the context's deadline, and the Locker's I/O
// timeout no longer bounds a call to a stalled server (the client's own read
// timeout does). core.New logs a warning for such a client.
//
// An attempt (acquire or enqueue) that fails after its command may have
// reached Redis (a lost reply, a deadline, a stalled server) is undone by a
// compare-and-delete of its token, at once and again every 250 ms in the
// background until it deletes the key or Redis has answered for the
// attempt's TTL (internal/undo), so that a late SET does not lock the name
// without a holder. A failure to connect is not undone: nothing was sent.
//
// On a *redis.Client, New adds a hook that watches the client's dials:
// go-redis retries a refused connection until the context's deadline and
// then returns the context's error alone, and the hook lets the store report
// the refusal instead (core.ErrStorage wrapping the dial error, so that
// errors.Is(err, syscall.ECONNREFUSED) holds). After a storage error a
// cluster client is asked to reload its slot map, so that a promoted replica
// is found within a round of retries rather than at go-redis's periodic
// reload.
//
// # Redlock
//
// NewRedlock keeps each lock on a majority of independent masters (no
// replication between them, no cluster). An attempt sends the acquire to
// every node in parallel and succeeds when N/2+1 of them set the key while
// the lock is still valid: validity = TTL − time spent acquiring − drift (1%
// of the TTL plus 2 ms). A failed attempt releases the key on every node.
// Release, extensions, fencing and wake-ups work as on one deployment;
// extensions also need the quorum, and the fencing token is the quorum's
// highest, written back to the quorum before Acquire returns (one more round
// trip), so that tokens stay strictly increasing across holders.
//
// Nodes that are down or cut off slow nothing down: an operation returns as
// soon as its outcome is known (a quorum answered, after a grace as long
// again as the quorum took; a quorum is out of reach; or the deadline
// passed), and the calls of the other nodes go on in the background until
// their deadline (go-redis does not abort a read in flight). A node that had
// not answered counts as possibly holding the key, and a failed attempt
// releases it there once its call has ended. With 5 nodes the lock keeps
// working with 2 of them down or partitioned. With no quorum in reach, or a
// quorum that comes only after the lock's validity, an attempt fails with a
// storage error, not a busy lock. Close waits for the calls left in the
// background.
//
// Redlock does not protect against a holder that pauses past its validity
// (use fencing), and a node restarted without persistence forgets its locks:
// restart nodes only after the longest TTL has passed, or run them with
// appendfsync always. Give the clients a dial and read timeout well below
// the TTL. A quorum keeps no queue: core.WithFair is refused (see
// Redlock.Check).
//
// # Inspection
//
// Store and Redlock are lockstore.Inspectors, for operators (core's
// Locker.List and Locker.Inspect, the reqlock command): they read, and
// change nothing.
//
// List walks the keyspace with SCAN cursor MATCH <prefix>* COUNT <room
// left in the page>, never KEYS (which blocks the server for the whole
// keyspace): the prefix's glob characters (* ? [ ] \) are escaped, so
// that it matches only itself. A Cluster is walked master after master
// (every shard of a Ring likewise), in the order of their addresses; the
// cursor names the master and its SCAN cursor, and a cursor whose master
// is no longer one (a failover) starts the walk over (keys may come
// again; SCAN promises no more). The keys a SCAN returns are checked with
// TYPE in one pipeline, as SCAN may return a key that expired since: a
// lock key holds a string (a token, or the marker of shares) while held,
// and is gone once free, so that a key only waiters queue for is not
// listed. Companion keys are left out by the suffixes the store appends
// (":fence", ":queue", ":waiters", ":shares", ":slots", ":writer"): a lock
// key of one's own that ends with one of them is not listed either (a
// core.Locker's keys end with "}"). A page holds at most limit keys: what
// a SCAN returns beyond it is kept in the cursor. A key whose slot
// migrates to a master already walked while a listing runs (a
// resharding) may be missed by that listing.
//
// Inspect runs inspect.lua, a read-only script (EVAL_RO and EVALSHA_RO,
// which the server refuses for a script that writes; EVAL on servers
// before Redis 7.0), over the lock key and its companion keys, which share
// its hash tag: one round trip, one instant of the server's clock (TIME).
// It reports the exclusive holder's token and PTTL, or the live shares in
// slot order with the TTL each has left, its slot and fence; the token of
// the exclusive waiter that keeps new shares out; the live entries of the
// fair queue, head first, with the TTL each asked for and the patience it
// has left; and the fence counter (KeyState.Fence). An exclusive holder's
// own Fence is 0: the counter holds the last fence drawn for the key,
// which a holder without fencing did not draw.
//
// Redlock's List is the union of its nodes' listings, node after node: a
// key that a node before holds too is left out, as it was listed with that
// node; a key only a minority of nodes holds is listed too. A node that
// cannot be listed is skipped while the others can still make a quorum.
// Redlock's Inspect asks every node and reports the holders whose token a
// quorum of nodes hold, each with the smallest TTL among them (the lock
// lasts, as far as a quorum goes, until the first of them expires), and
// the highest fence of the nodes; a holder whose quorum counts a node that
// did not answer is not reported. Fewer answers than a quorum is a storage
// error.
//
// # Limits
//
// Replication in Redis is asynchronous: a failover (Sentinel, Cluster) may
// promote a replica that never saw a lock, and a restart without persistence
// frees every lock (fencing tokens carry on from the server's clock). Use
// NewRedlock over independent nodes, and fencing, where that matters.
package redisstore
