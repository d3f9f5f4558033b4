package faulthistory

import (
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/faulthistory/history"
)

// maxOrphan bounds the longest orphan after a stall on Redis with go-redis:
// the clean-up sends its compare-and-delete every 250 ms (internal/undo), so
// about half a second, with room for a busy machine (a round woken late, a
// reply slow after the thaw). Without the clean-up the orphan lasts its
// whole TTL from the stall's end (2 s): the bound stays below that.
const maxOrphan = 1500 * time.Millisecond

// TestFaultHistory runs the fault-history test (see the package
// documentation) on Redis through go-redis: without the watchdog and
// fencing, with both, and with the fair queue (core.WithFair) as well,
// prints the figures by fault and asserts the hard ones. The other stores
// run in the module internal/faulthistory/stores.
//
// It is heavy on a small machine (five processes under fault for about 15 s
// a variant) and its figures are timings, so it runs only when
// REQLOCK_FAULTHISTORY=1 (or long, which adds a cut link):
// ./scripts/test.sh runs it on its own, after the modules' tests.
func TestFaultHistory(t *testing.T) {
	var cases []history.Case
	for _, v := range []history.Variant{history.Plain, history.WatchdogFencing, history.Fair} {
		cases = append(cases, history.Case{Store: "Redis (go-redis)", Variant: v, Start: redisTarget})
	}
	history.Suite(t, cases)
}

// redisTarget is history.RedisTarget for go-redis workers, whose orphans
// after a stall are bounded by maxOrphan.
func redisTarget(t *testing.T) *history.Target {
	target := history.RedisTarget(t, "redis")
	target.MaxOrphan = maxOrphan
	return target
}
