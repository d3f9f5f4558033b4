package main

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
)

// TestDemoOnEveryStore runs the -demo with its locks in each store but
// Redis (TestDemoOnRealRedis has that one), on a real server: no two
// requests for one order overlap, whatever the store; and the lock modes'
// demo (shared reads, the flash sale, crossing transfers) finds nothing
// broken.
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
			if err != nil {
				a.close()
				t.Fatal(err)
			}
			modes, err := a.demoModes(context.Background())
			if err == nil && modes.sharesSkipped != "" { // a store that keeps one holder per name
				if code, body := post(t, "http://"+a.httpAddr+"/items/"+flashSKU+"/buy", ""); code != http.StatusNotImplemented || !strings.Contains(body, "permits") {
					t.Errorf("a buy on a store without permits: %d %s, want 501 saying why", code, body)
				}
			}
			a.close()
			if err != nil {
				t.Fatal(err)
			}
			var figures strings.Builder
			modes.print(&figures)
			t.Log("\n" + figures.String())
			if bad := modes.broken(); bad != "" {
				t.Errorf("the lock modes' demo: %s; failures %q", bad, modes.failures)
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
	return servers.MariaDBUser + "@tcp(" + mariaDBAddr(t) + ")/orders"
}

// mariaDBAddr starts a MariaDB server with a database "orders" and returns
// its address.
func mariaDBAddr(t *testing.T) string {
	addr := servers.StartMariaDB(t).Addr()
	db, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE orders"); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestStoreDownIsUnavailable: with its lock store unreachable (a proxy in
// front of it cut), the service answers 503 over HTTP and Unavailable over
// gRPC, as it does with Redis, on every store; it locks again once the store
// is back.
func TestStoreDownIsUnavailable(t *testing.T) {
	for _, c := range []struct {
		store string
		start func(t *testing.T) string                 // the server's address
		addr  func(t *testing.T, proxied string) string // the address to give the service
	}{
		{"etcd", func(t *testing.T) string { return servers.StartEtcd(t).Addr() }, nil},
		{"zookeeper", func(t *testing.T) string { return servers.StartZooKeeper(t).Addr() }, nil},
		{"postgres", func(t *testing.T) string { return servers.StartPostgres(t).Addr() },
			func(_ *testing.T, p string) string { return servers.PostgresURL(p) }},
		{"mysql", func(t *testing.T) string { return mariaDBAddr(t) },
			func(_ *testing.T, p string) string { return servers.MariaDBUser + "@tcp(" + p + ")/orders" }},
		{"memcached", func(t *testing.T) string { return servers.StartMemcached(t).Addr() }, nil},
	} {
		t.Run(c.store, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			proxy := redistest.NewProxy(t, c.start(t))
			cfg := testConfig(proxy.Addr())
			if c.addr != nil {
				cfg.StoreAddr = c.addr(t, proxy.Addr())
			}
			cfg.Store = c.store
			a, err := start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			rpc := ordersv1.NewOrdersClient(conn)
			base := "http://" + a.httpAddr + "/orders/"
			if code, body := post(t, base+"1", `{"amount_cents":500}`); code != 200 {
				t.Fatalf("create with the store up: %d %s", code, body)
			}
			proxy.Cut()
			if code, body := post(t, base+"1/pay", ""); code != http.StatusServiceUnavailable {
				t.Fatalf("pay with the store down: %d %s, want 503", code, body)
			}
			if _, err := rpc.Pay(context.Background(), &ordersv1.OrderRequest{OrderId: "1"}); status.Code(err) != codes.Unavailable {
				t.Fatalf("pay over gRPC with the store down: %v, want Unavailable", err)
			}
			proxy.Restore()
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, body := post(t, base+"1/pay", "")
				if code == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pay 20 s after the store came back: %d %s", code, body)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
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
