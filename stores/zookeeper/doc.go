// Package zkstore keeps reqlock's locks in Apache ZooKeeper (3.5.3 or
// later), on a github.com/go-zookeeper/zk connection:
//
//	conn, _, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second,
//		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
//	if err != nil {
//		return err
//	}
//	defer conn.Close()
//	store, err := zkstore.New(conn, zkstore.WithRoot("/myapp/locks"), zkstore.WithSessionTimeout(10*time.Second))
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	locker := core.NewWithStore(store, core.WithWatchdog(), core.WithFencing())
//	defer locker.Close()
//
// HostProvider and Dial are recommended. With HostProvider the connection
// reconnects within a quarter of a second of a server's return (a restart,
// a new leader), where go-zookeeper's own provider waits a second after
// each round of servers that all failed, during which the locks are out of
// reach. With Dial a server that takes the connection and never answers it
// (ZooKeeper 3.8.0 while it starts) is left after go-zookeeper's read
// timeout, not after ten times it, longer than the session.
//
// # The recipe
//
// Locks follow Apache Curator's InterProcessMutex recipe (and
// go-zookeeper's own zk.Lock). Each key has a parent node under the root
// (the key escaped so that '/' and other characters are safe), created as
// a container node that ZooKeeper deletes once it is empty. Each contender
// creates an EPHEMERAL_SEQUENTIAL child named after its token, so that a
// client that lost the reply of its create finds its own node (Curator's
// "protected" mode); the lowest live child holds the lock.
//
// ZooKeeper has no TTL on ephemeral nodes, while a reqlock lock must expire
// after its TTL even while its holder's session lives. So a node's data is
// its TTL, and a node is dead once the server's clock passes its mtime (the
// server's time of its last write) plus that TTL. Time is only ever read
// from the server: a contender learns the server's "now" from the ctime of
// its own, just created node, and deletes a dead node ahead of it with the
// version it read, so that a node extended meanwhile is never deleted.
// Extend is a SetData guarded by the node's version, which moves its
// mtime; Release deletes the node (guarded by its version) and sets the
// data of the key's parent node in one multi-operation, whose reply
// carries the server's time and so tells whether the lock had expired.
//
// ZooKeeper's own liveness applies too, as in Curator: when the holder's
// session expires (its client was cut off from the ensemble for longer
// than the session timeout), ZooKeeper deletes its nodes and another
// process can take the lock at once, before the lock's TTL has run out.
// So a lock's TTL must not exceed the session timeout: a lease's validity
// runs for its TTL from the sending of its last successful write, which
// the server heard, and the session cannot expire before the session
// timeout has passed since then; a lease that reports itself valid thus
// holds its name, even on a holder cut off from the ensemble. Curator's
// SUSPENDED state (the connection is lost: assume the lock is lost) gives
// that guarantee only if the client acts on it before the session can
// expire; the TTL bound gives it to every lease, with or without a
// watchdog. WithSessionTimeout tells the store the session timeout, and
// it then refuses longer TTLs (core.ErrInvalidOption); without it, keep
// every TTL at most the session timeout yourself. The holder learns that
// its session expired at its next Extend, which reports the lock lost
// (with core.WithWatchdog the lease's Done closes then). Use fencing where
// a second holder must be refused by the resource itself.
//
// # The fair queue
//
// The store is a core.Queuer, for core.WithFair: the children of a key's
// parent node are a queue in arrival order already. A waiter keeps its
// node between polls (Enqueue, then Poll for all the waiters of a Locker
// and key at once, their renewals pipelined) and renews it at each; its
// node's TTL is its patience, so that a waiter that stops polling is dead
// after its patience and the contender behind it deletes its node. A release
// deletes the holder's node; ZooKeeper tells the waiter right behind it,
// which watches only that node (no herd), and Grants hands it the lock:
// one listing after the watch fires. A waiter that gives up deletes its
// node (Dequeue), which passes a lock granted to it meanwhile on.
//
// # Shared holds and permits
//
// The store is a core.Sharer (core.Shared, core.Permits). The reference
// recipes are Apache Curator's InterProcessReadWriteLock, whose read and
// write locks are sequential nodes of one queue (a reader holds once no
// writer's node is ahead of its own, a writer once its node is the lowest),
// and InterProcessSemaphoreV2, whose leases are nodes under the semaphore's
// node, counted under an internal lock. This store keeps the first and
// adapts the second, because a share must keep the Store's contract, which
// neither recipe does: its own TTL, a non-blocking try, and fences from the
// same zxids as exclusive holds.
//
//   - A share is a contender in the key's queue like an exclusive lock: an
//     EPHEMERAL_SEQUENTIAL child whose data is its TTL, judged dead by the
//     server's clock as a lock is, but whose name carries a tag no token
//     escapes to: "%S" and the token for a shared hold, "%P", n, the slot
//     and the token for a permit. So the exclusive paths need no change: a
//     live share ahead keeps an exclusive contender out (the marker of the
//     other stores is the shares' nodes themselves), a dead one is deleted
//     by the next contender, and Release or Extend of a share's token finds
//     no lock of it.
//   - A share holds while no live node ahead of it is an exclusive lock (or
//     a fair waiter's place: shares queue behind a waiting writer, as
//     Curator's readers do), a share of another mode (ErrModeMismatch), or a
//     permit of its own slot. Curator blocks a reader until then; this
//     store deletes the share's node again and reports the key busy.
//   - A permit's slot is chosen before its node is made, from a listing:
//     the lowest slot that no live permit holds. Two attempts may choose one
//     slot; the later node finds the earlier one ahead and tries the next
//     free slot. Permits of one slot never hold at once, so never more than
//     n; no internal lock is needed (Curator's semaphore takes one), and a
//     dead holder's slot is free at its TTL (CURATOR-315: leases of dead
//     holders kept their permits).
//   - Writers do not starve: TryAcquireWaiting, when live shares keep it
//     out, writes the key's exclusive waiter's record, an EPHEMERAL node
//     "w" beside the queue with its patience as TTL (and the token of the
//     attempt that wrote it last). There is one record per key, not per
//     token (a Locker draws a token per attempt): each waiting attempt
//     resets it. While it is live no new share holds, also
//     after the shares have drained, until a waiter takes the key and
//     deletes it, or it dies after the patience of the last attempt that
//     wrote it.
//   - ReleaseShare and ExtendShare are Release and Extend on the share's
//     node; a store that did not take the share finds it by its token.
//   - A fenced share's fence is the zxid of a write to its node made once it
//     holds, higher than every fence drawn before, whatever the mode.
//
// Round trips: a shared hold takes two (create; list and read the new
// node's stat, pipelined), three when nodes ahead must be read (an
// exclusive node, another mode's share, a waiter's record), and one more to
// delete its node when it fails; a permit one more first (the listing that
// chooses its slot), and one more again to read the other permits' nodes
// when they hold the lower slots; a fenced share one more (the write whose
// zxid is its fence). ReleaseShare takes one, ExtendShare one;
// TryAcquireWaiting one more than TryAcquire when it writes or deletes the
// record.
//
// # Several keys at once
//
// The store is a core.MultiAcquirer (core.Locker.AcquireAll): one
// multi-operation creates the token's node in the queue of every key, all
// or none, whatever the keys; each key is then settled as TryAcquire
// settles it, every key pipelined; if one of them is busy, one more
// multi-operation deletes every node of the attempt. Two round trips for
// any number of free keys, four when one is busy (its holder's node read,
// then the deletion), as for one key. While the attempt runs, its nodes
// that are the lowest hold their keys for a moment, as those of a
// one-by-one attempt would; once it returns, the token holds every key or
// none.
//
// # Clean-ups
//
// The store is a core.Undoer. A call that fails after it may have reached
// the server (a lost reply; a stalled server or link, which may still run
// it late), a Release that fails, a lease the Locker gives up and a fair
// waiter that has gone leave nodes that nobody would renew or delete: the
// store deletes the nodes of their tokens (found by the token in their
// names: locks, places in the queue and shares; a key's exclusive waiter's
// record is no token's, and dies after its patience), at once and then
// every 250 ms in the background, until it has deleted one or the server
// has answered for the TTL (internal/undo, shared with the other stores). A connection runs its requests in order, so a deletion sent
// after a late renewal runs after it.
//
// # Fencing
//
// Fences are ZooKeeper transaction ids (zxids), which increase across the
// whole ensemble, through leader elections and restarts: an acquire's fence
// is the parent node's pzxid in the listing that showed its node lowest
// (the zxid of the last change of the children, at least the deletion of
// the previous holder's node), and a fenced Extend's is the zxid of its
// SetData. A fenced share's is the zxid of a SetData on its node once it
// holds: shares hold side by side, and the renewal of one moves no pzxid,
// so a listing's pzxid could fall behind a fence another share drew. Each
// is higher than every fence drawn before it on the key, whatever the mode.
//
// # Round trips
//
// An uncontended acquire takes two round trips (create; list the children
// and read the new node's stat, pipelined) and a release one: three in
// all. The first acquire of a key whose parent node is missing takes two
// more. An attempt that finds the key busy takes four (create, list, read
// the holder, delete its own node), and leaves nothing behind. Watch (push
// wake-ups for core.WithNotify) sets one data watch on the holder's node
// per key and process. A poll of a Locker's waiters of a key takes two
// round trips whatever their number (renew every node and list, pipelined;
// read the lowest node), one or two more when a waiter's node must be made
// again; a grant takes one after the release's watch event, and a waiter's
// Dequeue one.
//
// # Inspection
//
// The store is a lockstore.Inspector (core.Locker's List and Inspect, the
// reqlock command): List reads the names of the root's children, unescapes
// them and keeps the keys under a prefix (ZooKeeper has no paged listing of
// children: each page reads them all, and judges at most its limit of
// keys); Inspect reads a key's children and their nodes in two round
// trips. Both judge the nodes as a contender does, by the server's clock,
// and delete nothing: a holder whose TTL ran out holds nothing, even
// before the next contender deletes its node. Fences are zxids and a
// holder's is not kept as such: a key's Fence is the highest zxid a fence
// can have been drawn from. A store that has not written for 30 seconds
// learns the server's clock again with a write that changes no lock, queue
// or fence (the root node's unused data); see Store.Inspect.
//
// # Limits
//
// Expiry is judged by the ZooKeeper leader's wall clock (a transaction's
// time is the leader's): the leaders of an ensemble should keep their
// clocks in step (NTP), and a step of the leader's clock moves the expiry
// of every lock. A node's times count milliseconds. The store needs the
// root for itself: nodes that others create under it are ignored.
package zkstore
