package lockbench

import (
	"context"
	"errors"
	"strings"
	"testing"

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
	// node first). The proxy sees a pipelined or parallel pair as one
	// exchange unless the machine holds the second request up, and the
	// clients' background exchanges (ZooKeeper's pings, pgx's ping of a
	// connection idle for a second) add a few.
	want := map[string]struct{ roundTrips, requests int64 }{
		RedisStore: {2, 2}, "rueidis": {2, 2}, "etcd": {2, 3}, "zookeeper": {5, 6},
		"postgres": {2, 0}, "mariadb": {2, 0}, "memcached": {3, 0},
	}
	const background = 3
	for i, r := range rep.StoreSolo {
		ops := int64(p.StoreSoloOps)
		w := want[r.Store]
		if r.Store != Stores[i].Name || r.Ops != p.StoreSoloOps || r.Failed != 0 || r.P99 < r.P50 || r.Mean <= 0 {
			t.Errorf("uncontended: %s: %+v", r.Store, r)
		}
		high := w.roundTrips * ops
		if w.requests > 0 {
			high = w.requests * ops
			if r.RoundTrips != high {
				t.Errorf("uncontended: %s: the client counted %d requests for %d acquires, want %d each", r.Store, r.RoundTrips, ops, w.requests)
			}
		}
		if r.Exchanges < w.roundTrips*ops || r.Exchanges > high+background {
			t.Errorf("uncontended: %s: the proxy counted %d exchanges for %d acquires, want %d to %d each", r.Store, r.Exchanges, ops, w.roundTrips, max(w.requests, w.roundTrips))
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
