// Package etcdstore keeps reqlock's locks in etcd (v3 API, through
// go.etcd.io/etcd/client/v3): a core.Store, with push wake-ups for waiters
// (core.Notifier), failed releases finished in the background
// (core.Undoer), the TTL etcd really holds (core.TTLRounder), shared holds
// and numbered permits (core.Sharer) and several names in one transaction
// (core.MultiAcquirer), and lists and inspects its locks for operators
// (lockstore.Inspector), for a Locker built with core.NewWithStore.
//
//	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
//	...
//	store, err := etcdstore.New(client) // does not close client
//	...
//	defer store.Close()
//	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithNotify())
//
// # How a lock is kept
//
// A lock is one etcd key, the prefix (WithPrefix, "/reqlock/" by default)
// and the Locker's key, whose value is the holder's token and which is
// bound to an etcd lease of the lock's TTL: when the lease expires, etcd
// deletes the key. It is the primitive of etcd's own concurrency.Mutex,
// without its queue of waiters' keys: one key per lock, and waiters that
// retry, woken by watches.
//
//   - Acquire is one transaction: if the key's create revision is 0 (no
//     such key), put it with the token and the lease, else read it. A key
//     that holds the caller's token already (an attempt sent again) counts
//     as acquired and is bound to a lease of the new TTL.
//   - Release is one transaction: delete the key if its value is the token
//     (compare-and-delete).
//   - Extend is a keep-alive of the lock's lease, sent in parallel with a
//     transaction that checks the key's value; a different TTL binds the key
//     to a lease of that TTL in a transaction guarded by the value. With
//     core.WithWatchdog, a lease whose keep-alive fails is lost: the
//     watchdog's Extend reports it and the Locker closes Lease.Done.
//   - Fencing (core.WithFencing): the fence is the key's create revision,
//     which etcd draws from its one revision counter for the whole cluster:
//     every later holder's fence is higher, whatever happened to the key in
//     between (Kleppmann's fencing tokens). A fenced Extend puts the value
//     again and returns the key's new mod revision, higher still.
//   - Push wake-ups (core.WithNotify): the waiters of a key share one etcd
//     watch of its deletions, which sees releases by any client and lease
//     expiries alike. The watch starts at the revision at which the waiter's
//     attempt found the key held, so that a release in between is not
//     missed.
//
// # Shares and permits
//
// The store is a core.Sharer: core.Shared (the read side of a read-write
// lock) and core.Permits(n) (n numbered slots). Each share is an etcd key of
// its own, bound to a lease of its own of the share's TTL, so that a share
// whose holder died expires at its own TTL whatever the others do. The keys
// of the shares of a lock key k are in its holders' range, k followed by a
// NUL byte and "h/":
//
//	k\x00h/s/<token>      a shared hold (its value is the token)
//	k\x00h/p/<n>/<slot>   slot 0..n-1 of Permits(n) (its value is the token)
//	k\x00w                 the record of a waiting exclusive holder (its value is its token)
//
// (A lock key made of another's, a NUL byte and "h/..." would count as a
// share of that lock: it could keep it busy, never let two holders in.)
//
// etcd compares whole ranges of keys in a transaction ("no key in [a, b)"
// is a create revision of 0 over the range), so every rule is checked in the
// transaction that takes a hold, with no marker in k to keep up to date:
//
//   - an exclusive acquire puts k only if k does not exist and the holders'
//     range is empty; the exclusive Release, Extend and Undo compare k's
//     value with their token, so a share's token never touches k;
//   - a share is put only if k does not exist (no exclusive holder), the
//     waiter record does not exist, no key of another mode is in the
//     holders' range (the mode, shared or n, is part of the key: a hold in
//     another mode is core.ErrModeMismatch), and, for permits, its slot's key
//     does not exist. There are n slot keys, so never more than n holders,
//     never two in one slot. The first attempt tries slot 0; when it is
//     taken, the transaction's failure branch reads the live shares, and the
//     next attempt tries the lowest free slot;
//   - TryAcquireWaiting, when live shares make it fail, puts the waiter
//     record on a lease of its patience: no share is taken while it exists,
//     even once the shares drained, until the waiter takes k (the
//     transaction that puts k deletes the record) or gives up (the record
//     expires). Writers do not starve.
//
// Fences of shares are the create revisions of their keys, drawn from
// etcd's one revision counter like the fences of exclusive holds. Watches
// (core.WithNotify) cover k and its holders' range: a waiter wakes when the
// exclusive holder or a share goes.
//
// This is the layout of Curator's InterProcessReadWriteLock and
// InterProcessSemaphoreV2 (a node per holder under the lock's path, which
// dies with its session) and of etcd's own client/v3/concurrency (a key per
// holder bound to its session's lease), with range compares in place of
// their queues of waiters: a share attempt that fails is retried by the
// Locker, as an exclusive one is.
//
// Round trips: an acquire of a share is one transaction (with a kept lease
// renewed in parallel; two round trips with a new grant), one more when the
// slot it tried was taken meanwhile; a release and an extend of the same
// TTL are one (a release or extend through another Store than the one that
// took the share reads the holders' range first: one more); a waiting
// exclusive attempt that shares make fail is two.
//
// # Several names at once
//
// The store is a core.MultiAcquirer: TryAcquireAll compares, for each key,
// that it does not exist and that its holders' range is empty, and puts
// them all in the same transaction, bound to one lease (which is then never
// reused for another lock: WithLeasePool): all or none, in one round trip
// (two with a new grant). Up to 64 keys (etcd refuses transactions of more
// than 128 operations by default); more are core.ErrNotAtomic, and the
// Locker takes them one by one.
//
// # Inspection
//
// The store is a lockstore.Inspector, for operators (core's Locker.List and
// Inspect, the reqlock command): it only reads.
//
//   - List is one range read of at most limit etcd keys under the prefix,
//     keys only, in key order (etcd returns ranges sorted by key, and a
//     lock's companion keys sort right after it): a lock key is listed when
//     it exists or a share key of it does, once; a waiter record alone is not
//     held. The cursor is the last etcd key the page read (base64url): the
//     next page reads on from it, so every page makes progress, and a page
//     may list fewer keys than limit (a lock with many shares fills a page).
//   - Inspect is one range read of the lock's key and its companion keys (k
//     to k followed by 0x01), then a LeaseTimeToLive per distinct lease of
//     its holders, up to 8 at a time and 256 in all (beyond that a holder's
//     TTL is reported as 0, unknown). TTLs are etcd's whole seconds, counted
//     by the leader. A holder's fence is its key's mod revision (the fence of
//     its acquisition or of its last fenced Extend); etcd keeps no counter
//     per key, so a free key's fence is 0. The waiting writer's token is the
//     value of the waiter record. The store has no fair queue: no waiters.
//
// # Leases and round trips
//
// A lease serves one lock at a time. A new one costs a grant (a round trip,
// and a write through etcd's consensus), so the store keeps the leases that
// became unused (a release, an attempt that found the key held) in a pool
// (WithLeasePool) and renews the one it reuses with a keep-alive sent in
// parallel with the acquisition's transaction. An uncontended acquire and
// release is then two round trips (three calls), and three (a grant first)
// when no lease of that TTL was released within the last half TTL. An
// Extend of the same TTL is one round trip. A kept lease that is not reused
// expires on the server by itself: a release spends no round trip on
// revoking it.
//
// # TTLs
//
// etcd leases count whole seconds: a TTL is rounded up to the next second.
// And etcd raises every lease to a minimum of 1.5 election timeouts,
// rounded up to whole seconds: 2 s with etcd's default election timeout of
// 1 s (--election-timeout 1000), 1 s with 100 ms. A lock is held for that
// TTL, and the Locker says so: the Store is a core.TTLRounder (StoreTTL),
// so Lease.TTL reports the TTL etcd holds, not the one asked for (TTL(300ms)
// and TTL(1.2s) are held, and reported, as 2 s by default), and the lease's
// validity, Done and the watchdog's renewals count from it. That is also how
// long the name stays taken when its holder dies without releasing it. The
// store learns etcd's minimum from the first grant that etcd raises, within
// the acquisition that made it, and then asks every grant for at least that
// minimum: keep one election timeout for every member of a cluster, as
// etcd's tuning guide recommends. Use TTLs of a few seconds or more.
// Expiry is judged by the etcd leader's
// clock, which checks for expired leases twice a second: a lock may outlive
// its TTL by up to half a second. After a leader change the new leader
// gives every lease its full TTL again: a lock may then outlive its TTL by
// up to its TTL and an election, never expire before it.
//
// # Failures
//
// A write is acknowledged once a majority of etcd's members have it, and a
// read is linearizable: a lock survives the loss of a minority of members,
// a leader change, and (etcd persists its data) a restart of every member.
// While the store cannot be reached, calls fail with an error, or with the
// context's error when the Locker's I/O timeout cuts them (etcd's client
// waits for a connection until then); the Locker reports both as
// core.ErrStorage. New does no I/O. A call that runs out of time while the
// client cannot connect (its connection attempts failed: a refused
// connection, an unknown host, a TLS handshake etcd rejects) fails, when its
// context ends (the Locker's I/O timeout), with an error that names the
// endpoints and the connection's last error instead of the bare context
// error, for example
//
//	etcdstore: acquire "reqlock:{order:42}": no connection to etcd at 127.0.0.1:2379: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused"
//
// (the store asks the connection for its last error with a call that does
// not wait for a connection, at once). A link that swallows everything (the
// connection open, no reply) still ends with the context's error.
// Configure the client with DialKeepAliveTime and DialKeepAliveTimeout, so
// that a dead connection is noticed, and, for quick reconnection, a short
// gRPC backoff (grpc.WithConnectParams in Config.DialOptions).
//
// An attempt that fails after its transaction may have reached etcd (a
// reply lost or too late) revokes its lease, which deletes the key if the
// transaction set it and makes the transaction fail if it arrives later: at
// once, then in the background until etcd confirms it. Its lease's TTL
// bounds such a key in any case.
//
// A Release that fails with a storage error (its transaction may not have
// reached etcd) is finished in the background (core.Undoer): the Locker
// hands it to Undo, which sends the release's compare-and-delete of the
// lease's token again every 250 ms until etcd answers one, so that the name
// is free as soon as etcd is reachable again instead of at the end of its
// TTL. It stops at the first answer (the key is deleted, or no longer holds
// the token), when the lock has expired by itself, or at Close, and it
// never deletes a key that another token holds.
package etcdstore
