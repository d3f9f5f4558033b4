package storetest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
)

// memStores returns a newStore for the suite: clients of one new in-memory
// store with bug.
func memStores(bug memBug) func(t *testing.T) core.Store {
	d := newMemData()
	return func(*testing.T) core.Store { return &memStore{d: d, bug: bug} }
}

// TestMemStorePassesTheSuite: the in-memory model of a Sharer,
// MultiAcquirer, Queuer and Inspector passes every property, so that the
// broken variants below fail by their bug alone.
func TestMemStorePassesTheSuite(t *testing.T) {
	storetest.Run(t, memStores(bugNone))
}

// memCase is a broken in-memory store, the property it must fail, and a
// piece of the failure the suite must report.
type memCase struct {
	property string
	store    string
	bug      memBug
	want     string
	// tries: the bug shows only when goroutines race (an overlap); the
	// case is run up to this many times until the suite fails it.
	tries int
}

// memCases pairs each property of a Sharer, MultiAcquirer or Inspector
// with broken stores.
var memCases = []memCase{
	{
		property: "Holds/SharesCoexistAndExcludeExclusive", store: "shares ignore an exclusive holder",
		bug: bugSharesIgnoreExclusive, want: "by a new token reported true while an exclusive holder held it",
	},
	{
		property: "Holds/SharesCoexistAndExcludeExclusive", store: "TryAcquire ignores the shares",
		bug: bugExclusiveIgnoresShares, want: "reported true while 6 shared holders held it",
	},
	{
		property: "Holds/HoldsNeverOverlapExclusive", store: "shares ignore an exclusive holder",
		bug: bugSharesIgnoreExclusive, want: "a shared hold began while an exclusive hold was live", tries: 3,
	},
	{
		property: "Holds/HoldsNeverOverlapExclusive", store: "TryAcquire ignores the shares",
		bug: bugExclusiveIgnoresShares, want: "an exclusive hold began while", tries: 3,
	},
	{
		property: "Holds/HoldsNeverOverlapExclusive", store: "permits(n) lets n+1 holders in",
		bug: bugPermitsOneMore, want: "permit holders of 2 were live", tries: 3,
	},
	{
		property: "Holds/HoldsNeverOverlapExclusive", store: "the slot is the number of live holders",
		bug: bugSlotsCollide, want: "which a live holder had", tries: 3,
	},
	{
		property: "Holds/LockersOfEveryModeExclude", store: "shares ignore an exclusive holder",
		bug: bugSharesIgnoreExclusive, want: "a shared hold began while an exclusive hold was live", tries: 3,
	},
	{
		property: "Holds/LockersOfEveryModeExclude", store: "permits(n) lets n+1 holders in",
		bug: bugPermitsOneMore, want: "permit holders of 2 were live", tries: 3,
	},
	{
		property: "Holds/PermitsBoundHoldersAndSlots", store: "permits(n) lets n+1 holders in",
		bug: bugPermitsOneMore, want: "more than n holders at once",
	},
	{
		property: "Holds/PermitsBoundHoldersAndSlots", store: "the slot is the number of live holders",
		bug: bugSlotsCollide, want: "the lowest free slot",
	},
	{
		property: "Holds/PermitsBoundHoldersAndSlots", store: "a re-sent attempt takes a new slot",
		bug: bugResentNewSlot, want: "sent again with the token of a live holder",
	},
	{
		property: "Holds/SharesExpireOnTheirOwn", store: "shares expire with the key, at the latest share's expiry",
		bug: bugKeyExpiry, want: "each share must expire on its own TTL",
	},
	{
		property: "Holds/SharesExpireOnTheirOwn", store: "a re-sent attempt keeps the share's TTL",
		bug: bugResentKeepsTTL, want: "a re-sent TryAcquireShare did not reset its TTL",
	},
	{
		property: "Holds/SharesExpireOnTheirOwn", store: "ExtendShare keeps the share's TTL",
		bug: bugExtendShareKeepsTTL, want: "ExtendShare did not reset its TTL",
	},
	{
		property: "Holds/ModeMismatchIsError", store: "no mode check",
		bug: bugNoMismatch, want: "want an error wrapping core.ErrModeMismatch",
	},
	{
		property: "Holds/WaitingExclusiveBlocksNewShares", store: "the waiting record is ignored",
		bug: bugWaitIgnored, want: "writers would starve",
	},
	{
		property: "Holds/WaitingExclusiveBlocksNewShares", store: "a waiter that takes the key leaves its record",
		bug: bugWaitNotCleared, want: "must clear the key's record",
	},
	{
		property: "Holds/WaitingExclusiveBlocksNewShares", store: "a waiter's success clears only the record its own token set",
		bug: bugWaitPerToken, want: "also one that an earlier attempt of the waiter with another token set",
	},
	{
		property: "Holds/ExpiredWaitingRecordFreesShares", store: "the waiting record never expires",
		bug: bugWaitForever, want: "would block shares for ever",
	},
	{
		property: "Holds/ExpiredWaitingRecordFreesShares", store: "the waiting record is ignored",
		bug: bugWaitIgnored, want: "writers would starve",
	},
	{
		property: "Holds/ShareCallsActOnlyForTheirToken", store: "ReleaseShare removes another token's share",
		bug: bugReleaseShareAny, want: "freed another token's share",
	},
	{
		property: "Holds/ShareCallsActOnlyForTheirToken", store: "Release with a share's token frees the shares",
		bug: bugReleaseFreesShares, want: "with the token of a shared holder freed the share",
	},
	{
		property: "Holds/ShareCallsActOnlyForTheirToken", store: "ExtendShare by a token without a share extends the others",
		bug: bugExtendShareAny, want: "its TTL is not honoured",
	},
	{
		property: "Holds/ShareFencesShareTheCounter", store: "shares draw fences from a counter of their own",
		bug: bugShareFenceOwnCounter, want: "must strictly increase whatever the mode",
	},
	{
		property: "Holds/BadHoldIsInvalidOption", store: "no range check of Hold.N",
		bug: bugNoHoldCheck, want: "want an error wrapping core.ErrInvalidOption",
	},
	{
		property: "AcquireAllIsAllOrNone", store: "TryAcquireAll sets keys until one is held",
		bug: bugMultiPartial, want: "it must never leave some keys set and others not",
	},

	// The Inspector's.
	{
		property: "Inspect/ListFindsHeldKeysOnly", store: "List lists companion keys",
		bug: bugListCompanions, want: "never a companion key",
	},
	{
		property: "Inspect/ListFindsHeldKeysOnly", store: "List lists expired keys",
		bug: bugListExpired, want: "its holder's TTL of 300ms ran out",
	},
	{
		property: "Inspect/ListFindsHeldKeysOnly", store: "List lists a key that only waiters wait for",
		bug: bugListWaitersHold, want: "only waiters of its fair queue are left on it",
	},
	{
		property: "Inspect/ListPrefixIsLiteral", store: "List matches the prefix as a glob pattern",
		bug: bugListGlob, want: "which does not begin with the prefix",
	},
	{
		property: "Inspect/ListPagesCoverEveryKey", store: "a cursor skips a key",
		bug: bugListSkips, want: "every such key must be on a page",
	},
	{
		property: "Inspect/ListBadLimitOrCursorIsInvalidOption", store: "List takes a limit out of range",
		bug: bugListBadLimit, want: "the limit must be 1..1000",
	},
	{
		property: "Inspect/ListBadLimitOrCursorIsInvalidOption", store: "a cursor List never handed out starts over",
		bug: bugListAnyCursor, want: "a cursor List never handed out",
	},
	{
		property: "Inspect/InspectExclusiveHolder", store: "Inspect reports the TTL asked for",
		bug: bugInspectTTLAsked, want: "not its own TTL left?",
	},
	{
		property: "Inspect/InspectExclusiveHolder", store: "Extend does not record the holder's new fence",
		bug: bugInspectOldFence, want: "whose fenced Extend drew",
	},
	{
		property: "Inspect/InspectExclusiveHolder", store: "Inspect reports the key's last fence as the holder's",
		bug: bugInspectKeyFence, want: "whose fenced TryAcquire drew",
	},
	{
		property: "Inspect/InspectShares", store: "Inspect leaves out a share",
		bug: bugInspectShareMissing, want: "want the 2 shares",
	},
	{
		property: "Inspect/InspectShares", store: "Inspect reports the TTL asked for",
		bug: bugInspectTTLAsked, want: "not its own TTL left?",
	},
	{
		property: "Inspect/InspectWaitingWriter", store: "Inspect does not report the waiting writer",
		bug: bugInspectNoWriter, want: "want that token, the exclusive holder waiting for the shares to drain",
	},
	{
		property: "Inspect/InspectWaitingWriter", store: "Inspect reports a holder without a token beside a writer's record",
		bug: bugInspectEmptyHolder, want: "a holder without a token",
	},
	{
		property: "Inspect/InspectFairQueue", store: "Inspect lists the waiters tail first",
		bug: bugInspectWaitersLIFO, want: "want the tokens that queued, head first",
	},
	{
		property: "Inspect/InspectFairQueue", store: "Inspect lists the head waiter as a holder",
		bug: bugInspectWaiterHolds, want: "a waiter does not hold the key",
	},
	{
		property: "Inspect/InspectAndListAreReadOnly", store: "Inspect resets the holders' TTLs",
		bug: bugInspectExtends, want: "Inspect or List renewed its TTL",
	},
	{
		property: "Inspect/InspectAndListBesideHolds", store: "a cursor is refused once its key is gone",
		bug: bugListCursorNeedsKey, want: "a cursor must outlive the keys listed beside it",
	},
	{
		property: "Inspect/InspectLeavesOutExpiredAndDead", store: "Inspect reports an expired exclusive holder",
		bug: bugInspectExpiredHolder, want: "a hold whose TTL ran out holds no more",
	},
	{
		property: "Inspect/InspectLeavesOutExpiredAndDead", store: "Inspect reports expired shares",
		bug: bugInspectExpiredShares, want: "a hold whose TTL ran out holds no more",
	},
	{
		property: "Inspect/InspectLeavesOutExpiredAndDead", store: "Inspect lists dead waiters",
		bug: bugInspectDeadWaiters, want: "a waiter whose patience ran out waits no more",
	},
	{
		property: "Inspect/InspectFairQueue", store: "Inspect reports the patience asked for",
		bug: bugInspectPatienceAsked, want: "the patience asked for, or another's, not its own patience left?",
	},
	{
		property: "Inspect/InspectShares", store: "Inspect reports the key's TTL for every share",
		bug: bugInspectShareKeyTTL, want: "not its own TTL left?",
	},
	{
		property: "Inspect/ListPrefixIsLiteral", store: "List escapes the prefix only inside its hash tag",
		bug: bugListTagOnlyEscaped, want: `:{1}", which does not begin with the prefix`,
	},
	{
		property: "Inspect/LockerInspectIdentifiesHolders", store: "Inspect drops the holder record from a holder's token",
		bug: bugInspectDropsRecord, want: "want one holder, exclusive, with the lease's token",
	},
}

// TestEveryInspectBugFails keeps the Inspector's bugs of the model in the
// table above: each one must fail a property.
func TestEveryInspectBugFails(t *testing.T) {
	for bug := bugListCompanions; bug <= bugInspectDropsRecord; bug++ {
		if !slices.ContainsFunc(memCases, func(c memCase) bool { return c.bug == bug }) {
			t.Errorf("the bug %d of the model fails no property in memCases", bug)
		}
	}
}

// TestSuiteFailsBrokenSharers runs each property of a Sharer or
// MultiAcquirer on in-memory stores with a deliberate bug, and checks that
// it fails with the message that names the bug.
func TestSuiteFailsBrokenSharers(t *testing.T) {
	for i, c := range memCases {
		t.Run(c.property+"/"+c.store, func(t *testing.T) {
			t.Parallel()
			var rep storetest.Report
			for try := 0; try < max(c.tries, 1) && !rep.Failed; try++ {
				rep = storetest.Check(t, c.property, memStores(c.bug), storetest.Options{})
			}
			for _, m := range rep.Messages {
				t.Log(m)
			}
			if !rep.Failed {
				t.Fatalf("case %d: the suite passed a store whose %s", i, c.store)
			}
			if !slices.ContainsFunc(rep.Messages, func(m string) bool { return strings.Contains(m, c.want) }) {
				t.Fatalf("case %d: the suite failed, but without a message containing %q", i, c.want)
			}
		})
	}
}

// plain hides every capability of the store it wraps.
type plain struct{ core.Store }

// TestHoldsSkippedForPlainStores: a store that is neither a Sharer nor a
// MultiAcquirer nor an Inspector has the properties of none of them
// skipped, with a reason.
func TestHoldsSkippedForPlainStores(t *testing.T) {
	mem := memStores(bugNone)
	for _, name := range storetest.PropertyNames() {
		if !strings.HasPrefix(name, "Holds/") && !strings.HasPrefix(name, "Inspect/") && name != "AcquireAllIsAllOrNone" {
			continue
		}
		rep := storetest.Check(t, name, func(t *testing.T) core.Store { return plain{mem(t)} }, storetest.Options{})
		if !rep.Skipped || rep.Failed || len(rep.Messages) != 1 || !strings.Contains(rep.Messages[0], "does not implement") {
			t.Errorf("%s: got %+v; want the property skipped, saying why", name, rep)
		}
	}
}

// TestAcquireAllNotAtomicIsSkipped: a MultiAcquirer that answers
// ErrNotAtomic for every set of keys has AcquireAllIsAllOrNone skipped, not
// failed.
func TestAcquireAllNotAtomicIsSkipped(t *testing.T) {
	rep := storetest.Check(t, "AcquireAllIsAllOrNone", memStores(bugMultiNotAtomic), storetest.Options{})
	if !rep.Skipped || rep.Failed {
		t.Fatalf("got %+v; want the property skipped", rep)
	}
}

// TestAcquireAllOfOneSlotSuffices: a MultiAcquirer that takes only keys of
// one hash tag in one step (a Redis Cluster), and answers ErrNotAtomic for
// the others, passes AcquireAllIsAllOrNone.
func TestAcquireAllOfOneSlotSuffices(t *testing.T) {
	rep := storetest.Check(t, "AcquireAllIsAllOrNone", memStores(bugMultiOneTag), storetest.Options{})
	if rep.Skipped || rep.Failed {
		t.Fatalf("got %+v; want the property passed", rep)
	}
}
