package lockbench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/servers"
)

// A small run of the stores section on every store, with the simulated
// round trip: each server starts, every acquire succeeds without overlap,
// the proxies and the clients count what each store's documentation says
// an uncontended acquire and release take, and the tables have a row for
// each store and setting.
func TestStoresRun(t *testing.T) {
	p := DefaultParams()
	p.Procs, p.Goroutines = 2, 2
	p.StoreSoloOps, p.StoreAttempts = 6, 4
	// Every acquire must succeed: a wait budget that a slow store (etcd
	// syncs its log to disk) on a busy machine cannot run out of. It only
	// bounds a wait that goes wrong.
	p.Wait = 30 * time.Second
	rep, err := Run(context.Background(), p, nil, Scenarios{Stores: true}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results)+len(rep.Hot)+len(rep.Solo)+len(rep.Scale) != 0 {
		t.Errorf("the stores section alone ran other scenarios: %+v", rep)
	}
	if len(rep.StoreSolo) != len(Stores) {
		t.Fatalf("%d uncontended rows for %d stores", len(rep.StoreSolo), len(Stores))
	}
	// Round trips and client requests per uncontended acquire+release (see
	// the stores' documentation; ZooKeeper creates each new name's parent
	// node first). The client hooks count every request the lock sends,
	// whatever the schedule: that count is exact. The proxy's exchanges are
	// not (see redistest.Stats.Exchanges): a parallel pair (etcd's
	// keep-alive and transaction, ZooKeeper's list and stat) is one
	// exchange or two depending on when the replies come back, client-only
	// frames (gRPC's stream resets and ping acks) open exchanges of their
	// own, and the clients' background exchanges (ZooKeeper's and rueidis's
	// pings, pgx's ping of a connection idle for a second) add more on a
	// slow machine. What holds on any schedule:
	//   - a lower bound: each step of an acquire+release that waits for the
	//     reply of the step before it (seq of them) starts an exchange, but
	//     the very first may join one the client opened before the count
	//     began (a client-only frame after the warm-up's last reply);
	//   - an upper bound only where the client sends nothing but requests
	//     that each get a reply and nothing in the background: go-redis
	//     (the hook counts them), gomemcache and go-sql-driver/mysql with
	//     the statements prepared in the warm-up; the slack is for a
	//     connection dialled again (MySQL prepares its statements anew).
	want := map[string]struct {
		seq, requests, high int64 // high: 0 for no upper bound
	}{
		RedisStore: {2, 2, 2}, "rueidis": {2, 2, 0}, "etcd": {2, 3, 0}, "zookeeper": {5, 6, 0},
		"postgres": {2, 0, 0}, "mariadb": {2, 0, 2}, "memcached": {3, 0, 3},
	}
	const slack = 3
	for i, r := range rep.StoreSolo {
		ops := int64(p.StoreSoloOps)
		w := want[r.Store]
		if r.Store != Stores[i].Name || r.Ops != p.StoreSoloOps || r.Failed != 0 || r.P99 < r.P50 || r.Mean <= 0 {
			t.Errorf("uncontended: %s: %+v", r.Store, r)
		}
		if w.requests > 0 && r.RoundTrips != w.requests*ops {
			t.Errorf("uncontended: %s: the client counted %d requests for %d acquires, want %d each", r.Store, r.RoundTrips, ops, w.requests)
		}
		if low := w.seq*ops - 1; r.Exchanges < low {
			t.Errorf("uncontended: %s: the proxy counted %d exchanges for %d acquires, want at least %d (%d sequential round trips each, the first one maybe merged)", r.Store, r.Exchanges, ops, low, w.seq)
		}
		if high := w.high*ops + slack; w.high > 0 && r.Exchanges > high {
			t.Errorf("uncontended: %s: the proxy counted %d exchanges for %d acquires, want at most %d (%d requests each)", r.Store, r.Exchanges, ops, high, w.high)
		}
		if rep.StoreVersions[r.Store] == "" {
			t.Errorf("%s: no server version", r.Store)
		}
	}

	rows := 0
	for _, setting := range StoreSettings {
		for _, k := range Stores {
			if !k.Runs(setting) {
				continue
			}
			r, ok := rep.StoreResultOf(k.Name, setting)
			if !ok {
				t.Errorf("contention: no row for %s, %s", k.Name, setting)
				continue
			}
			rows++
			n := p.Procs * p.StoreAttempts
			if r.Attempts != n || r.Succeeded != n || r.Failed != 0 || r.Overlaps != 0 || r.ReleaseErrors != 0 {
				t.Errorf("contention: %s, %s: %+v", k.Name, setting, r)
			}
			if r.Exchanges < 1 || (k.Requests != "") != (r.RoundTrips > 0) || r.WaitP99 < r.WaitP50 || r.Wall <= 0 {
				t.Errorf("contention: %s, %s: implausible counts %+v", k.Name, setting, r)
			}
		}
	}
	if len(rep.StoreResults) != rows {
		t.Errorf("%d contention rows, want %d", len(rep.StoreResults), rows)
	}
	for _, k := range Stores {
		if k.Queuer != (k.Name == RedisStore || k.Name == "rueidis" || k.Name == "zookeeper") {
			t.Errorf("%s: Queuer %v", k.Name, k.Queuer)
		}
	}

	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, k := range Stores {
		// The store table and the uncontended one; then a contention row
		// per setting.
		if n := strings.Count(out, "\n| "+k.Name+" | "); n != 2 {
			t.Errorf("%s has %d rows in the store tables, want 2:\n%s", k.Name, n, out)
		}
		for _, setting := range StoreSettings {
			if got := strings.Contains(out, "| "+setting+" | "+k.Name+" | "); got != k.Runs(setting) {
				t.Errorf("%s, %s: a contention row %v, want %v", k.Name, setting, got, k.Runs(setting))
			}
		}
	}
	if !strings.Contains(out, "| "+StoreSettings[0]+" | "+RedisStore+" | ") || !strings.Contains(out, " 1.00× |") {
		t.Errorf("the reference row or its ratio is missing:\n%s", out)
	}
}

// A store whose server is not installed fails the section with the Debian
// package to install.
func TestStoresMissingServer(t *testing.T) {
	missing := StoreKind{Name: "nosuch", spec: func() servers.Spec {
		return servers.Spec{Name: "nosuch", Binary: "reqlock-no-such-server", Package: "no-such-package"}
	}}
	b := &bench{p: DefaultParams()}
	srvs, err := b.startStores(context.Background(), []StoreKind{missing}, "")
	for _, s := range srvs {
		s.close()
	}
	if !errors.Is(err, servers.ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install no-such-package") || !strings.Contains(err.Error(), "needs nosuch") {
		t.Fatalf("err = %v", err)
	}
}

func TestLookupStores(t *testing.T) {
	for _, list := range [][]string{nil, {"all"}, {""}} {
		if got, err := LookupStores(list); err != nil || len(got) != len(Stores) {
			t.Errorf("LookupStores(%q) = %d stores, %v", list, len(got), err)
		}
	}
	// In table order, whatever the order asked.
	got, err := LookupStores([]string{"memcached", " etcd"})
	if err != nil || len(got) != 2 || got[0].Name != "etcd" || got[1].Name != "memcached" {
		t.Errorf("LookupStores = %v, %v", got, err)
	}
	if _, err := LookupStores([]string{"etcd", "cassandra"}); err == nil || !strings.Contains(err.Error(), "cassandra") {
		t.Errorf("an unknown store: %v", err)
	}
	if s, err := ParseScenarios("stores"); err != nil || s != (Scenarios{Stores: true}) {
		t.Errorf("ParseScenarios(stores) = %+v, %v", s, err)
	}
}
