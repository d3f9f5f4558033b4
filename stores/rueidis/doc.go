// Package rueidisstore keeps reqlock's locks in Redis through the
// github.com/redis/rueidis client: a core.Store for core.NewWithStore,
// with push wake-ups (core.Notifier), Redlock fencing (core.FenceRaiser),
// the fair queue of core.WithFair (core.Queuer), shared holds and permits
// (core.Sharer) and several names at once (core.MultiAcquirer).
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	store, err := rueidisstore.New(client)
//	locker := core.NewWithStore(store, core.WithFencing(), core.WithNotify())
//
// It speaks the same protocol as the go-redis store of stores/redis
// (redisstore.New, core.NewRedisStore): the same keys, the same Lua scripts
// (internal/redisscript) and the same release channel, so that Lockers on
// go-redis and on rueidis share one lock, one fence counter, one wake-up
// channel and one fair queue, and can be mixed during a migration from one
// client to the other.
//
//   - Acquire is Redis's documented single-instance lock: SET key token NX PX
//     ttl GET, one native command (acquire.lua on servers before Redis 7.0,
//     which reject NX with GET); a reply with the caller's own token (an
//     attempt sent again) counts as acquired and resets the TTL. With
//     fencing, acquire_fenced.lua also draws the next fencing token
//     (Kleppmann's fencing tokens): the larger of the name's counter + 1 and
//     the server's clock in microseconds, so that fences keep increasing
//     across a FLUSHALL or a restart without persistence. A Locker's later
//     attempts go through TryAcquireHeld (core.HeldAcquirer): the same
//     native command, which also tells a key that shares hold (its value is
//     their marker, and nothing was written); fenced, acquire_held.lua.
//
//   - Release is compare-and-delete (release.lua), which then grants the
//     lock to the first live waiter of the key's fair queue, if any, or
//     else publishes on the key's release channel once the Store was
//     announced (a Locker with core.WithNotify announces it).
//
//   - Extend is compare-and-extend (extend.lua, extend_fenced.lua).
//
//   - With core.WithFair, Enqueue (enqueue.lua) is the acquire of a waiter
//     that keeps its place in line: it takes the key when it is free and
//     nobody lives ahead of it, or else queues it (a sorted set and a hash
//     next to the lock, in its hash slot) in the same round trip; Dequeue
//     (dequeue.lua) takes a waiter that gives up out of line, passing on a
//     grant that reached it.
//
//   - Shares (core.Shared, core.Permits: the Store is a core.Sharer)
//     run acquire_share.lua, release_share.lua, extend_share.lua and, for
//     an exclusive waiter that shares must let in, acquire_waiting.lua:
//     while shares are live the lock key holds the marker
//     "reqlock:shares:N" (never a token), key+":shares" (a sorted set of
//     the shares' tokens scored by their expiry) and key+":slots" (token
//     to "slot fence") hold the shares, and key+":writer" records a
//     waiting writer, which keeps new shares out for its patience (writers
//     do not starve). Each share has its own TTL, renewed by its holder
//     only and pruned on the server's clock, unlike the readers of
//     Redisson's RReadWriteLock, whose shared hash every reader's renewal
//     kept alive while their own timeouts were left behind (redisson
//     issue #1604); permits are numbered
//     slots with their own TTL, like RPermitExpirableSemaphore's. The
//     marker and the share keys expire together with the latest share.
//
//   - Several keys at once (core.Locker.AcquireAll: the Store is a
//     core.MultiAcquirer) run acquire_all.lua, all or none in one step,
//     unlike RedissonMultiLock's locks taken one after another. On a
//     Cluster the keys must share a hash slot (one hash tag); keys of
//     several slots are refused with core.ErrNotAtomic before anything is
//     sent, and the Locker takes them one by one.
//
//   - Inspection (the Store is a lockstore.Inspector, for core's
//     Locker.List and Locker.Inspect and the reqlock command), as the
//     go-redis store's and with its code (internal/redisscript): List
//     walks the keyspace with SCAN MATCH <escaped prefix>* COUNT, never
//     KEYS, on the server or on every master of a Cluster (CLUSTER SLOTS
//     names them, walked in the order of their addresses), keeps the keys
//     that hold a string now (a pipelined TYPE) and leaves out the
//     companion keys by their suffixes; Inspect runs the read-only
//     inspect.lua (EVAL_RO, EVAL on servers before Redis 7.0) in one
//     round trip.
//
// The package documentation of stores/redis (redisstore) describes the
// keys of shares, the multi-key acquire and inspection in full.
//
// A script's keys must share a Cluster slot: a lock key without a hash
// tag, whose companion keys then hash apart, is refused with an error
// on a Cluster (rueidis would panic building the command).
//
// Each is one round trip: an uncontended acquire and release take two,
// with core.WithFair too. Scripts are sent by EVAL the first time and by
// EVALSHA afterwards (with rueidis's EVAL fallback after a NOSCRIPT). TTLs
// count milliseconds on the server's clock. A lock's key, fence counter,
// queue and release channel share a cluster hash tag (core's keys are
// "prefix{name}"), so a Redis Cluster keeps them in one slot; rueidis
// follows the cluster's slots and redirections by itself.
//
// Watch and Grants share one dedicated connection per Store (rueidis's
// Dedicate with pub/sub hooks), subscribed to the channels of the keys that
// have waiters in this process, or had one within the linger
// (WithNotifyLinger); when the connection fails it takes another and
// subscribes again. A release that grants the lock to a fair waiter
// publishes "token fence ttl" on the key's channel; Grants passes it to the
// waiter of that token, which then holds the lock without a round trip of
// its own, whichever client released it. Messages may be lost meanwhile:
// each confirmation of a channel's subscription (the first, and that of a
// new connection) asks its fair waiters to poll at once, waiters of Watch
// still retry at the end of their random sleep, and fair waiters find a
// grant they missed at their next poll.
//
// An attempt (acquire or enqueue) that fails after its command may have
// reached Redis (a lost reply, a deadline, a stalled server) is undone by a compare-and-delete of
// its token, at once and again in the background until it deletes the key
// or Redis has answered for the attempt's TTL (internal/undo, shared with
// the go-redis store), so that a late SET does not lock the name without a
// holder; a share attempt is undone the same way by a release of its
// share.
//
// Limits are those of Redis: replication is asynchronous, so that a
// failover (Sentinel, Cluster) may promote a replica that never saw a lock,
// and a restart without persistence frees every lock; use core.NewRedlock
// over independent nodes where that matters. rueidis honours context
// deadlines on its own: a Locker's I/O timeout bounds every call.
package rueidisstore
