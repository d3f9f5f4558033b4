// Package storetest is the conformance suite of core.Store: the properties
// every store of reqlock's locks must have, whatever keeps the locks
// (Redis, a Redlock quorum, etcd, ZooKeeper, SQL, Memcached...).
//
// A store's module runs it from its own tests, on a real server of its
// kind:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) core.Store {
//			client := newClient(t) // a new client of the test's server, closed by t.Cleanup
//			return mystore.New(client)
//		})
//	}
//
// Every call of the function passed to Run must return a new client of one
// and the same store, as another process would have: the suite calls it
// several times in one subtest to get independent holders. RunWith adapts
// the suite to a store that counts TTLs in whole seconds and lets it take
// the store down:
//
//	storetest.RunWith(t, newStore, storetest.Options{
//		TTLResolution: time.Second,
//		Down:          func(t *testing.T) { proxy.Cut() },
//		Up:            func(t *testing.T) { proxy.Restore() },
//	})
//
// Each property is one subtest (the properties of a core.Sharer are grouped
// under Holds: -run 'TestConformance/Holds', those of a
// core.Inspector under Inspect), so that a failure names what is
// broken:
//
//   - MutualExclusion: Lockers on three clients never hold one name at once;
//   - TTLFreesUnreleasedLock: a lock that is not released stays held until
//     its TTL runs out, and not much longer (TTL resolution and slack
//     allowed);
//   - ReleaseByOtherTokenKeepsLock, SecondReleaseReportsFalse,
//     ExpiredHolderCannotReleaseOrExtend: Release and Extend act only for the
//     token that holds the key, and report false otherwise;
//   - ExtendByOtherTokenKeepsTTL, ExtendByHolderKeepsLock: only the holder
//     extends, and its Extend keeps the lock past its first TTL;
//   - FencesStrictlyIncrease: fenced acquires and extends draw strictly
//     increasing fencing tokens (every store must support fencing);
//   - ResentAcquireSucceedsAndResetsTTL: an attempt sent again with the
//     holder's token counts as acquired and resets the TTL;
//   - KeysAreIndependent: locks on different keys do not interfere;
//   - BusyIsErrTimeout, CancelIsContextCanceled,
//     DeadlineIsContextDeadlineExceeded, StoreDownIsErrStorage: through a
//     Locker, errors keep their kind (the last one needs Options.Down);
//   - NotifierWakesWatchers: a core.Notifier wakes the watchers of a key
//     when another client releases it (skipped for other stores);
//   - for a core.Queuer (core.WithFair; skipped for other stores):
//     FairMutualExclusion, MutualExclusion with fair Lockers;
//     FairGrantsInArrivalOrder, fair Lockers get a name in the order they
//     queued for it; QueuerReleaseGrantsTheHead, a release grants the key
//     to the first waiter, which learns it on its Grants channel without
//     polling; QueuerGiveUpPassesTheGrantOn, a waiter that gives up after a
//     grant passes the key to the next; QueuerSkipsDeadWaiters and
//     QueuerGrantToDeadWaiterExpires, a waiter that stopped polling is
//     skipped once its patience has passed, and a key granted to it is free
//     again after its patience, not its TTL; QueuerPollKeepsPlaces, Poll
//     keeps the places of the waiters it lists, and only theirs;
//     QueuerPollReportsAGrant, Poll reports a grant a release made (its
//     message may be lost); QueuerPollGrantsAFreeKey, Poll grants a free key
//     to the first live waiter, listed or not; QueuerPollRequeuesALostWaiter,
//     Poll queues a waiter that lost its place again at the tail;
//   - AcquireAllIsAllOrNone, for a core.MultiAcquirer (skipped for other
//     stores, and for one that answers core.ErrNotAtomic for every set of
//     keys tried): TryAcquireAll of keys one of which another token holds
//     reports false and sets none of them; of free keys, it sets them all,
//     each released by Release, with a fence per key above its last one.
//
// The properties of a core.Sharer (shared holds and permits: Curator's
// InterProcessReadWriteLock and InterProcessSemaphoreV2, Redisson's
// RReadWriteLock) are the subtests of the group Holds, each skipped for
// other stores:
//
//   - SharesCoexistAndExcludeExclusive: shared holders on several clients
//     hold a key at once; while they (or permit holders) do, TryAcquire and
//     TryAcquireWaiting fail, and while an exclusive holder holds it,
//     TryAcquireShare fails;
//   - HoldsNeverOverlapExclusive: goroutines on three clients mixing
//     exclusive and shared (then permits(2)) attempts on one key: an
//     in-process checker sees no exclusive hold overlap another hold, never
//     more than n permit holders, and no two in one slot;
//   - LockersOfEveryModeExclude: MutualExclusion with modes: Lockers on
//     three clients take one name exclusively or with core.Shared (then
//     core.Permits(2)), and the same checker sees no overlap;
//   - PermitsBoundHoldersAndSlots: permits(n) admits n holders, in slots
//     0..n-1, the lowest free one each time; the next is refused and takes
//     nothing; an attempt sent again with a holder's token keeps its slot;
//   - SharesExpireOnTheirOwn: a short share frees its slot at its own TTL
//     while a long one stays live, a key whose shares all ran out is free
//     for an exclusive holder, and an attempt sent again with a holder's
//     token, or its ExtendShare, resets its share's TTL;
//   - ModeMismatchIsError: shared beside permits, permits(m) beside
//     permits(n) and permits beside shared are errors wrapping
//     core.ErrModeMismatch that take nothing;
//   - WaitingExclusiveBlocksNewShares: writers do not starve: once
//     TryAcquireWaiting failed on a shared key (or a permits key with a
//     free slot), new shares fail, also once the shares are released, until
//     the waiter takes the key; its success, with a token of its own as the
//     Locker draws one per attempt, clears the key's record;
//   - ExpiredWaitingRecordFreesShares: the record of a waiter that gave up
//     blocks shares for its patience only;
//   - ShareCallsActOnlyForTheirToken: ReleaseShare and ExtendShare by a
//     token without a share, and Release and Extend with a share's token,
//     report false and change nothing (the shares neither go nor outlive
//     their TTL); ReleaseShare is idempotent;
//   - ShareFencesShareTheCounter: fenced shares draw fences from the
//     counter of exclusive holds, so that interleaved holds of any mode
//     draw strictly increasing fences;
//   - BadHoldIsInvalidOption: a Hold with N < 0 or N > core.MaxPermits is an
//     error wrapping core.ErrInvalidOption that sets nothing.
//
// The properties of a core.Inspector (the capability behind
// core.Locker's List and Inspect and the reqlock command: which keys are
// held, by whom, for how long still, who waits) are the subtests of the
// group Inspect, each skipped for other stores (and their parts of shares
// or of the fair queue skipped for a store that is not a core.Sharer or a
// core.Queuer). Every state Inspect returns must be well formed: each
// holder and waiter has a token, an exclusive holder holds alone, shares
// have one hold and slots in range, and no waiter or writer is a holder. A
// TTL or a fence of 0 is a store that cannot tell, as the contract allows;
// any other value must be right.
//
//   - ListFindsHeldKeysOnly: List finds every key held under its prefix
//     (exclusively, fenced or not; by shared holders and permit holders,
//     also with a waiting writer; with waiters in its fair queue), and
//     neither a key nobody held, nor one released, nor one whose holders'
//     TTLs ran out, nor one outside the prefix, nor one that only queue
//     waiters or a waiting writer's record are left on; every key it lists
//     is one the property passed to TryAcquire, TryAcquireShare or Enqueue,
//     never a companion key (fence counter, queue, share or waiter record);
//   - ListPrefixIsLiteral: the prefix matches only itself: characters that
//     a SCAN MATCH pattern (* ? [ ] \) or SQL's LIKE (% _) give a meaning
//     to, and letters of another case, are not patterns, for a prefix
//     inside a key's hash tag ("storetest:{name:") and for one before it
//     (a Locker's prefix, its keys "prefix{name}"), beside decoy keys of
//     the same shape;
//   - ListPagesCoverEveryKey: with 25 keys held, following the cursor from
//     "" until it comes back "" in pages of 1, 2, 7, 25 and
//     core.MaxListLimit lists each of them at least once (more than
//     once is allowed, as Redis's SCAN does), no page longer than its limit;
//   - ListBadLimitOrCursorIsInvalidOption: a limit of 0, -1 or
//     MaxListLimit+1, or a cursor List did not hand out, is an error
//     wrapping core.ErrInvalidOption that changes nothing;
//   - InspectExclusiveHolder: one exclusive holder with its token, the TTL
//     it has left (not the one it asked for; TTL resolution and
//     core.TTLRounder allowed), the fence its fenced TryAcquire drew and
//     then its fenced Extend, the key's fence at least that; a free key has
//     no holder, waiter or writer, and is no error;
//   - InspectShares: shared holds and permits(n) holds, each with its token,
//     hold, the slot TryAcquireShare returned, the TTL it has left of its
//     own TTL (shares of one key are taken with different TTLs: not the
//     TTL asked for, nor the key's) and its fence, in slot order; a share
//     released is gone and the others stay;
//   - InspectWaitingWriter: the token of a TryAcquireWaiting that failed on
//     shares is the Writer, not a holder; it stays once the shares are gone,
//     and goes when the writer takes the key;
//   - InspectFairQueue: the waiters of a core.Queuer in the order they
//     queued, head first, none of them a holder, each with the TTL it asked
//     for and the patience it has left (not the patience it asked for); one
//     that gave up (Dequeue) is gone; a release makes the head the holder;
//   - InspectLeavesOutExpiredAndDead: with no call on the keys since, an
//     exclusive holder whose TTL ran out, a share whose TTL ran out beside
//     a live one (shared and permits(2)), and a fair-queue waiter whose
//     patience ran out ahead of a live one are not reported: a store that
//     drops them lazily must judge them by their expiry when it inspects;
//   - InspectAndListAreReadOnly: a holder and a share inspected and listed
//     again and again are free at their TTL all the same, and the TTL
//     Inspect reports never rises; a free key inspected is neither held
//     nor listed; a queue inspected and listed keeps its order;
//   - InspectAndListBesideHolds: a listing goes on when the keys of its
//     last page were released (its cursor outlives them) and lists the
//     keys held throughout; Inspect and List, beside goroutines that take
//     and release keys on other clients, return no error and only
//     well-formed states;
//   - LockerInspectIdentifiesHolders: through a core.Locker on the store
//     (WithFencing), with a request id and a route on the context: List
//     under a name prefix returns exactly the names held under it, a name
//     longer than core.MaxNameLen in its "sha256:" form; Inspect reports
//     an exclusive holder, shares and permits (core.Sharer), the waiting
//     writer and a fair-queue waiter (core.Queuer) identified by their
//     tokens (this host and process, the request id and route, the mode),
//     with the lease's token, a TTL left and its fence (or 0);
//     ForceRelease with another token changes nothing and reports false,
//     with the holder's releases that hold alone (and lets in who waits),
//     after which the lease's Release fails with core.ErrNotHeld; the
//     hashed name is inspected and force-released by its listed form.
//
// The suite takes a few seconds with a store that counts milliseconds
// (most of it waiting for TTLs to run out), and longer with a coarser
// TTLResolution. It leaves no goroutines of its own behind.
package storetest
