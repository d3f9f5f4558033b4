// Package memcachedstore keeps reqlock's locks in memcached, through the
// github.com/bradfitz/gomemcache client: a core.Store, with shared holds and
// numbered permits (core.Sharer), that lists and inspects its locks for
// operators (lockstore.Inspector), for core.NewWithStore.
//
//	client := memcache.New("127.0.0.1:11211")
//	store, err := memcachedstore.New(client,
//		memcachedstore.WithServerClock("127.0.0.1:11211"),
//		memcachedstore.WithServers("127.0.0.1:11211")) // for List and Inspect
//	locker := core.NewWithStore(store, core.WithFencing())
//
// # How a lock works
//
// A lock is an item whose key is the lock's key and whose value is the
// holder's token (a fresh random string per attempt).
//
//   - Acquire is memcached's add with an expiration: it stores the item only
//     if the key holds none, in one round trip. When the key is taken, a
//     gets tells whether it holds the caller's own token (an attempt sent
//     again): then the attempt counts as acquired and its TTL is reset by a
//     cas, as for Extend. A busy key costs two round trips per attempt.
//   - Release is a compare-and-delete in two round trips: gets (the value
//     and its CAS unique), a comparison with the token, then a cas of the
//     same key with a negative expiration, which memcached stores as an item
//     that has already expired: the key is free at once, but only if nobody
//     changed the item since the gets. The text protocol's delete has no
//     CAS check, and would delete another holder's lock after an expiry: it
//     is never used. (memcached 1.6's meta protocol has a CAS-checked delete,
//     md key C<cas>, but gomemcache does not speak the meta protocol; the cas
//     with a negative expiration is checked against memcached 1.6 by this
//     package's tests.)
//   - Extend is gets, comparison, then cas with the new expiration.
//
// So an uncontended acquire and release take three round trips. Each call
// is atomic on the server where it needs to be: add and cas are checked by
// memcached itself, and a cas fails when the item changed after its gets
// (another holder's add after an expiry gives the item a new CAS unique).
//
// # Shares and permits
//
// The store is a core.Sharer: core.Shared (the read side of a read-write
// lock, Curator's InterProcessReadWriteLock, Redisson's RReadWriteLock) and
// core.Permits(n) (n numbered slots, Curator's InterProcessSemaphoreV2).
// memcached has one atomic primitive on one item, gets and cas, and expires
// items by its own clock; so:
//
//   - While shares are live, the lock's item holds, instead of a token, a
//     list of the shares, which no token equals (it begins with a NUL byte):
//     the mode (shared, or n), and for each share its token, its slot and the
//     expiration its share item was given. Every change of the list is a gets
//     and a cas of the lock's item, started again when the item changed in
//     between.
//   - Each share also has a share item of its own (the key, ":share:" and
//     the token), whose value is the token, set with the share's TTL (rounded
//     as TTLs are): memcached expires it by itself, at its own TTL, whatever
//     the others do. A share is live while it is listed and its share item
//     holds its token; each share operation reads the listed share items (one
//     gets of them all) and drops the expired ones from the list. So the
//     expiry of a share is judged by memcached's clock alone, never by the
//     clocks of the processes that share the lock.
//   - The lock's item is given the longest expiration in its list, plus two
//     seconds, at each change: it outlives every live share (a new share's
//     item is set before it is listed; an extend raises the list's entry
//     before the share item). An exclusive TryAcquire fails while the item
//     lists a live share (its add fails, and so does the comparison of
//     Release and Extend with its token); when the list holds none any more,
//     the item is free: TryAcquire takes it by cas. While a token holds the
//     item, every share attempt fails.
//   - Permits(n) gives a new share the lowest slot that no live share of the
//     list holds, and fails when the n slots are live: the cas makes two
//     attempts that read the same list store one of them only, so never more
//     than n holders, never two in one slot. A share in another mode than the
//     live ones' is core.ErrModeMismatch.
//   - TryAcquireWaiting, when live shares make it fail, sets the waiter
//     record (an item of its own, the key and ":waiter", with the expiration
//     of its patience) and then stores the lock's item again by cas, which
//     changes its CAS unique: a share attempt that read the item before the
//     record fails its cas, and sees the record when it reads again. No share
//     is taken while the record lives, even once the shares drained, until
//     the waiter takes the key (and deletes the record) or the record
//     expires. Writers do not starve.
//   - Fences (core.WithFencing) of shares are drawn from the key's counter,
//     like those of exclusive holds.
//
// Round trips: the first share of a free key is three (gets of the lock's
// item, the waiter record and the share item together; set of the share
// item; add of the list); a share of a key with live shares four (the gets
// of the listed share items, then a cas instead of the add); a release three
// (gets; cas, or the cas that frees the item when the list is empty; delete
// of the share item); an extend three (gets, cas of the list, cas of the
// share item); one more (incr) with fencing. An exclusive attempt on a key
// that shares hold is three (add, gets, the gets of the share items), and
// five when it records a waiting writer (TryAcquireWaiting: the set of the
// record and the cas of the lock's item besides); a waiting writer that takes the key
// deletes the record (one more). A share attempt on a key held exclusively
// is one.
// Under contention a cas may fail and the operation starts again (up to five
// times, after which a share attempt fails and the Locker tries again).
//
// The store is no core.MultiAcquirer: memcached changes one item at a
// time, so core.Locker.AcquireAll takes the names one by one, in its
// canonical order.
//
// # TTL resolution
//
// memcached counts expirations in whole seconds on a clock that a timer
// updates about once a second, so that an item given N seconds may expire
// after N-2 seconds and a bit, when the timer runs late. The store rounds a
// TTL up to whole seconds and adds two: a lock never expires before its TTL,
// and may live up to three seconds longer (a TTL of 300 ms holds the key for
// 1 to 3 s). Expiry is judged by the server's
// clock only. TTLs above 30 days are refused (memcached reads larger
// expirations as absolute times).
//
// # Fencing
//
// With fencing (core.WithFencing), each lock draws a fencing token
// (Kleppmann's fencing tokens) from a per-key counter item, after its
// holder holds the lock: an incr, one more round trip. A missing counter
// (never created, expired, evicted, or lost with a restart of memcached) is
// created by add with the current time in microseconds as its value, which
// is the fence of that draw; later draws increment it. The counter expires
// a minute after the lock's TTL from its creation (incr does not refresh
// it), so that idle names leave nothing behind, and is then created again
// from the clock. What is guaranteed:
//
//   - while a counter lives, its fences strictly increase, and each is drawn
//     while its holder holds the lock (a draw that ends later than the
//     lock's TTL after the acquire was sent is checked with one more gets,
//     and reported as not acquired when the lock was lost meanwhile);
//   - across a counter's loss, fences keep increasing as long as the clock
//     that times the new counter is ahead of the lost counter's value: with
//     WithServerClock, the server's clock in whole seconds (the time field of
//     memcached's stats), this holds unless the counter is lost within the
//     second of the server's clock in which it was created (a restart or a
//     flush_all within a second of a name's first fenced lock), or the
//     server's clock goes back; without it, this process's clock in
//     microseconds, which holds as long as the clocks of the processes that
//     share the lock agree to within the time between the lost counter's
//     last draw and the new counter's first. Under a million draws per
//     second of a counter's life are assumed (memcached serves far fewer per
//     key).
//
// # Keys
//
// memcached keys are at most 250 bytes, without spaces or control
// characters. A key that breaks these rules (a long prefix, a name with a
// space), or that begins with "reqlock-sha256:", is replaced by
// "reqlock-sha256:" and the hex SHA-256 of the key; so is the fence
// counter's key (the lock's key and ":fence"). Every client of a lock
// derives the same key.
//
// # Inspection
//
// The store is a lockstore.Inspector (core's Locker.List and Inspect, the
// reqlock command); it only reads. The items that are not locks (share
// items, waiter records, fence counters) carry client flags of their own
// (0x72716331), by which List tells them from locks, also when their keys
// are hashed. The waiter record's value is the waiting writer's token.
//
//   - List: gomemcache cannot enumerate keys, so List sends each server of
//     WithServers `lru_crawler metadump hash` on a connection of its own
//     (memcached 1.6.9 or later walks its hash table in its LRU crawler's
//     thread, without holding up requests; an older one, from 1.4.31, is
//     asked for `lru_crawler metadump all`, a walk of its LRUs, which can
//     miss an item that moves between LRUs during the walk). It keeps the
//     keys under the prefix (memcached sends them URL-encoded), the limit
//     smallest after the cursor (the last key the previous page
//     considered), and checks with gets that each is a held lock (one gets
//     of them, one of the share items of those that list shares). Every
//     page dumps every item again: O(items in memcached) per page, fine for
//     an operator's tool, not for a request path. A key hashed because
//     memcached could not take it is listed by its item key
//     ("reqlock-sha256:<hex>"), under a prefix of that.
//   - Inspect: one gets of the lock's item, its waiter record and its fence
//     counter, one of the share items of a list of shares (to keep the live
//     ones), and, with WithServers, a meta get (`mg <key> t v`, memcached
//     1.6) on a connection of its own for each holder item's TTL left: the
//     item's TTL on memcached's clock less the two seconds the store adds
//     to every TTL (0 in those two seconds, or without WithServers). The
//     key's fence is its counter's value; a
//     holder's own fence is unknown (0). There is no fair queue: no waiters.
//
// # Limits
//
//   - Eviction: memcached evicts items under memory pressure, locks included:
//     an evicted lock is free for another holder while its first holder
//     still works; an evicted share item frees its share, and an evicted
//     list frees the key of all its shares. Give memcached enough memory for its locks, or run it
//     with -M (errors instead of evictions: a full server then fails
//     acquires with an error, reported as core.ErrStorage, instead of
//     breaking mutual exclusion), preferably an instance of its own.
//   - No replication: memcached keeps items in one process's memory. A
//     restart or a failover to another server loses every lock (held names
//     are free at once) and every fence counter (see Fencing). A client
//     that spreads keys over several servers (memcache.New with several
//     addresses) keeps each lock on one of them, and loses the locks of a
//     server that goes away.
//   - No push wake-ups: memcached has no pub/sub, so the store is no
//     core.Notifier; waiters retry after their random sleep (core.WithSpin).
//   - No fairness: whichever attempt comes first after a release wins.
//   - After a restart of memcached, each idle connection of the client fails
//     its next call once (gomemcache does not retry): the Locker reports such
//     a call as core.ErrStorage, and its next attempt dials anew.
//   - gomemcache takes no context: a call whose context ends first returns
//     the context's error at once and goes on in the background, bounded by
//     the client's Timeout (memcache.DefaultTimeout, 500 ms, when zero);
//     Close waits for such calls.
//
// An attempt that fails after its add may have reached memcached (a lost
// reply, a deadline, a stalled server) is undone by a compare-and-delete of
// its token, at once and again in the background until it deletes the key
// or memcached has answered for the attempt's TTL (internal/undo, shared
// with reqlock's Redis stores), so that a late add does not lock the name
// without a holder.
package memcachedstore
