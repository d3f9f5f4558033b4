package faulthistory

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/faulthistory/history"
	"github.com/reqlock/reqlock/internal/redistest"
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

// redisTarget starts a redis-server without persistence for a run: its
// faults are a holder frozen, Redis frozen, a black-holed link (and a cut
// one, in the long run), Redis killed and restarted empty, and FLUSHALL.
func redisTarget(t *testing.T) *history.Target {
	srv := redistest.Start(t)
	admin := redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = admin.Close() })
	key, err := core.New(admin).Key(history.Name())
	if err != nil {
		t.Fatal(err)
	}
	steps := []history.Step{
		history.FreezeHolder(),
		history.FreezeStore(func() error { srv.Freeze(t); return nil }, func() error { srv.Thaw(t); return nil }),
		history.BreakLink(false),
	}
	if history.Long() {
		steps = append(steps, history.BreakLink(true))
	}
	steps = append(steps,
		history.RestartStore(true, srv.Stop, srv.Relaunch),
		history.FlushAll(func() error { return admin.FlushAll(context.Background()).Err() }),
	)
	return &history.Target{
		Addrs:     []string{srv.Addr()},
		URL:       func(addrs []string) string { return "redis://" + addrs[0] },
		Faults:    steps,
		Sample:    history.RedisSample(admin, key),
		MaxOrphan: maxOrphan,
	}
}
