package history

import (
	"context"
	"os"
	"testing"
	"time"
)

// enableEnv turns the fault history on: "1" for the default runs, "long"
// for the long ones as well.
const enableEnv = "REQLOCK_FAULTHISTORY"

// Enabled skips the test unless REQLOCK_FAULTHISTORY is "1" or "long".
func Enabled(t *testing.T) {
	t.Helper()
	switch os.Getenv(enableEnv) {
	case "1", "long":
	default:
		t.Skipf("set %s=1 (or long, for the long variants too) to run it (./scripts/test.sh sets 1, on its own after the modules' tests)", enableEnv)
	}
}

// Long reports whether REQLOCK_FAULTHISTORY=long asks for the long runs:
// both variants of every store, more faults, clusters.
func Long() bool { return os.Getenv(enableEnv) == "long" }

// Variant is one configuration of the workers' Lockers.
type Variant struct {
	Name                    string
	Watchdog, Fencing, Fair bool
}

// The variants.
var (
	Plain           = Variant{Name: "plain"}
	WatchdogFencing = Variant{Name: "watchdog+fencing", Watchdog: true, Fencing: true}
	Fair            = Variant{Name: "fair+watchdog+fencing", Watchdog: true, Fencing: true, Fair: true}
)

// Target is a store under test, its servers running.
type Target struct {
	// Addrs are the addresses of the store's servers. Each worker reaches
	// each of them through a proxy of its own (redistest.Proxy), which the
	// link faults cut or black-hole.
	Addrs []string
	// URL returns the URL the workers open (see Opener), given the
	// addresses of a worker's proxies, in the order of Addrs.
	URL func(addrs []string) string
	// Hold is the longest the store holds a lock taken for TTL (memcached
	// rounds up and adds seconds); 0 means TTL. The faults that stall
	// last past it.
	Hold time.Duration
	// Faults are injected one after the other.
	Faults []Step
	// Sample, when set, reads the token the lock's key holds ("" when
	// none), for the orphans after a stall (Redis).
	Sample func(ctx context.Context) (token string, err error)
	// MaxOrphan, when set, bounds the longest orphan after a stall (the
	// run fails above it); otherwise it is reported only. It is not
	// asserted for the fair variant: a grant to a waiter that has just
	// given up holds that waiter's token until its clean-up passes the
	// lock on (a round of 250 ms, or the grant's patience), at any time.
	MaxOrphan time.Duration
}

// Case is one run: a store, a variant, and how to start the store's
// servers for the (sub)test.
type Case struct {
	Store   string
	Variant Variant
	Start   func(t *testing.T) *Target
}

// Fault kinds.
const (
	KindHolderFreeze = "holder frozen (SIGSTOP) past the TTL"
	KindStoreFreeze  = "store frozen (SIGSTOP) past the TTL"
	KindBlackhole    = "a holder's link black-holed past the TTL"
	KindCut          = "a holder's link cut past the TTL"
	KindRestart      = "store killed (SIGKILL), restarted on its data"
	KindRestartEmpty = "store killed (SIGKILL), restarted empty"
	KindFlushAll     = "FLUSHALL"
	KindLeaderKill   = "leader killed (SIGKILL), restarted after a TTL"
)

// Step is one fault of a run. Inject injects it and returns once it has
// healed; f holds Fault as a template, with Start set to when Inject was
// called. Inject may set f.Start later (once it found its victim), f.Proc,
// and f.End (otherwise the time Inject returned).
type Step struct {
	Fault  Fault
	Inject func(r *Run, f *Fault) error
}
