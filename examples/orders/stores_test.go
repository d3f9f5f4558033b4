package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/servers"
)

// TestDemoOnEveryStore runs the -demo with its locks in each store but
// Redis (TestDemoOnRealRedis has that one), on a real server: no two
// requests for one order overlap, whatever the store.
func TestDemoOnEveryStore(t *testing.T) {
	for _, c := range []struct {
		store string
		addr  func(t *testing.T) string
	}{
		{"etcd", func(t *testing.T) string { return servers.StartEtcd(t).Addr() }},
		{"zookeeper", func(t *testing.T) string { return servers.StartZooKeeper(t).Addr() }},
		{"postgres", func(t *testing.T) string { return servers.PostgresURL(servers.StartPostgres(t).Addr()) }},
		{"mysql", func(t *testing.T) string { return mariaDB(t) }},
		{"memcached", func(t *testing.T) string { return servers.StartMemcached(t).Addr() }},
	} {
		t.Run(c.store, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			cfg := testConfig(c.addr(t))
			cfg.Store = c.store
			a, err := start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.demo(context.Background(), demoOrders, demoDuplicates)
			a.close()
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			res.print(&out, a.cfg)
			if res.overlaps != 0 || len(res.failures) != 0 || res.accepted() < demoOrders {
				t.Fatalf("overlaps %d, failures %q, accepted %d of %d orders:\n%s", res.overlaps, res.failures, res.accepted(), demoOrders, out.String())
			}
			if !strings.Contains(a.storeAt, c.store) {
				t.Errorf("the banner says the locks are in %q, want %s", a.storeAt, c.store)
			}
		})
	}
}

// mariaDB starts a MariaDB server with a database "orders" and returns its
// DSN.
func mariaDB(t *testing.T) string {
	addr := servers.StartMariaDB(t).Addr()
	db, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE orders"); err != nil {
		t.Fatal(err)
	}
	return servers.MariaDBUser + "@tcp(" + addr + ")/orders"
}

func TestUnknownStoreAndMissingAddress(t *testing.T) {
	cfg := testConfig("")
	cfg.Store = "cassandra"
	if _, err := start(cfg); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Fatalf("-store cassandra: err = %v", err)
	}
	cfg.Store = "etcd"
	if _, err := start(cfg); err == nil || !strings.Contains(err.Error(), "ETCD_ENDPOINTS") {
		t.Fatalf("-store etcd without an address: err = %v", err)
	}
}
