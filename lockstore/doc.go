// Package lockstore is the seam between reqlock's lock engine (package core)
// and the stores that keep its locks: what a store author implements, and
// nothing else. The Redis and Redlock stores (package stores/redis) and the
// stores of stores/etcd, stores/zookeeper, stores/sql, stores/memcached and
// stores/rueidis are written against it; package core/storetest is the
// conformance suite every store passes.
//
// # Keys, tokens and TTLs
//
// A lock is a key holding a token. The Locker names the key (its prefix and
// the lock's name, with a Redis Cluster hash tag around the name: see
// core.Locker.Key) and draws a fresh token for every attempt: 128 bits or
// more from crypto/rand, so that a token stands for one attempt of one
// holder. A lock lives for its TTL unless released or extended first; TTLs
// come in whole milliseconds, from 1 ms to ten years. A store must make each
// call atomic, and must act on a key only for the token that holds it:
// Release and Extend never touch a key that another token holds or that
// has expired.
//
// # Validity
//
// The Locker counts a lock's validity from when the command that set or
// extended it was sent, less a margin for clock drift (1% of the TTL plus
// 2 ms), never from a reply that may come late. A store therefore must hold
// a lock for at least the TTL it was asked for, from the moment it received
// the command (a store that rounds TTLs up says so: TTLRounder).
//
// # Fences
//
// With fencing on (core.WithFencing), every acquire and extend draws a
// fencing token in the same atomic step: an int64, strictly increasing per
// key across holders, processes and restarts, that the holder passes to the
// resources it writes so that they can refuse a holder that lost its lock
// (Kleppmann's fencing tokens).
//
// # Failures
//
// Every call is bounded by its context (the Locker's I/O timeout). A store
// returns the context's error, or an error of its own, when it cannot
// answer; the Locker reports it as core.ErrStorage, never as a busy lock. A
// command that failed may still have reached the store and may still be
// applied late (a frozen server runs what it had received when it resumes),
// so a store undoes what a failed acquire may have set: see
// Store.TryAcquire and Undoer. A configuration a store cannot serve is an
// error wrapping ErrInvalidOption.
//
// # Capabilities
//
// Beyond the three calls of Store, a store offers what it can, and the
// Locker finds it by interface assertion:
//
//   - Notifier: push wake-ups of waiters at a release (core.WithNotify);
//   - Queuer: waiters queued in arrival order, a release granting the lock
//     to the first one (core.WithFair);
//   - FenceRaiser: a fence counter raised to a floor (fencing on a Redlock
//     quorum);
//   - Undoer: locks removed in the background, until a late command can no
//     longer matter;
//   - TTLRounder: a store that holds locks longer than asked;
//   - FreeAcquirer: a first attempt shaped for a free name;
//   - HeldAcquirer: a later attempt shaped for a held name, that tells
//     shares apart from an exclusive holder;
//   - Tuner and Checker: the Locker's settings, and a store that refuses
//     some of them;
//   - io.Closer: closed by the Locker that built the store (core.New,
//     core.NewRedlock); a store given to core.NewWithStore is its caller's
//     to close.
package lockstore
