package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/ginlock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

func testConfig(redisAddr string) Config {
	cfg := defaultConfig()
	cfg.HTTPAddr, cfg.GRPCAddr, cfg.AdminAddr, cfg.StoreAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", redisAddr
	return cfg
}

// TestDemoOnRealRedis runs the -demo against a real redis-server: no two
// requests for one order ever overlapped, every request was either accepted
// or answered busy, and each order let at least one request through.
func TestDemoOnRealRedis(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	cfg := testConfig(srv.Addr())
	// Every request must end accepted or busy: a handler budget (and the
	// TTL above it) that 120 requests at once on a busy machine cannot run
	// out of. The lock wait and the work stay the demo's.
	cfg.HandlerTimeout, cfg.TTL = 20*time.Second, 30*time.Second
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
	t.Log("\n" + out.String())
	if res.overlaps != 0 {
		t.Errorf("%d overlaps", res.overlaps)
	}
	if a.store.entered.Load() < demoOrders {
		t.Errorf("the overlap detector saw %d critical sections, want at least %d", a.store.entered.Load(), demoOrders)
	}
	if n := res.requests(); n != demoOrders*demoDuplicates || res.accepted()+res.http.busy.Load()+res.grpc.busy.Load() != n || len(res.failures) != 0 {
		t.Errorf("requests %d, accepted %d, busy %d+%d, failures %q", n, res.accepted(), res.http.busy.Load(), res.grpc.busy.Load(), res.failures)
	}
	if res.accepted() < demoOrders {
		t.Errorf("accepted %d < %d orders", res.accepted(), demoOrders)
	}
	if !strings.Contains(out.String(), "overlaps seen: 0") {
		t.Errorf("table lacks the overlap line:\n%s", out.String())
	}
}

func TestOverlapDetector(t *testing.T) {
	s := newStore(nil, 0)
	exit := s.enter("1")
	s.enter("2")()
	s.enter("1")()
	exit()
	s.enter("1")()
	if s.overlaps.Load() != 1 || s.entered.Load() != 4 {
		t.Fatalf("overlaps %d, entered %d; want 1 and 4", s.overlaps.Load(), s.entered.Load())
	}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeHTTPAndGRPC calls both transports of one service: they share the
// orders and the per-order locks.
func TestServeHTTPAndGRPC(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	a, err := start(testConfig(srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var usage strings.Builder
	a.printUsage(&usage)
	if !strings.Contains(usage.String(), "curl -X POST http://"+a.httpAddr+"/orders/42") || !strings.Contains(usage.String(), a.grpcAddr+" orders.v1.Orders/Pay") {
		t.Fatalf("usage does not show the real addresses:\n%s", usage.String())
	}
	if a.debugURL() == "" || !strings.Contains(usage.String(), a.debugURL()) {
		t.Fatalf("usage does not show the debug page %q:\n%s", a.debugURL(), usage.String())
	}
	if resp, err := http.Get(a.debugURL() + "json"); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the debug page's JSON: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := ordersv1.NewOrdersClient(conn)
	base := "http://" + a.httpAddr + "/orders/"
	ctx := context.Background()

	if code, body := post(t, base+"7", `{"amount_cents":500}`); code != 200 || !strings.Contains(body, `"state":"created"`) {
		t.Fatalf("create: %d %s", code, body)
	}
	if o, err := rpc.Pay(ctx, &ordersv1.OrderRequest{OrderId: "7"}); err != nil || o.State != "paid" {
		t.Fatalf("pay over gRPC: %v %v", o, err)
	}
	if code, body := post(t, base+"7/cancel", ""); code != 422 || !strings.Contains(body, "paid") {
		t.Fatalf("cancel of a paid order: %d %s", code, body)
	}
	if _, err := rpc.Pay(ctx, &ordersv1.OrderRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("pay without an id: %v", err)
	}

	// Another instance holds order 8: both transports answer busy.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	held, err := core.New(client).Acquire(ctx, lockName("8"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if code, _ := post(t, base+"8", `{"amount_cents":1}`); code != http.StatusConflict {
		t.Fatalf("busy over HTTP: %d", code)
	}
	if _, err := rpc.Create(ctx, &ordersv1.OrderRequest{OrderId: "8", AmountCents: 1}); status.Code(err) != codes.Aborted {
		t.Fatalf("busy over gRPC: %v", err)
	}
}

// TestRunWithEmbeddedRedis runs the command as `go run ./examples/orders`
// does on a machine without Redis, until it is stopped.
func TestRunWithEmbeddedRedis(t *testing.T) {
	adaptertest.LeakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, testConfig(""), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "embedded miniredis") || !strings.Contains(out.String(), "shutting down") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// TestDetectorChecksTheTransports is the control of the demo's "overlaps
// seen": with the middleware skipped, or the gRPC service called without its
// interceptor, two requests for one order are both inside their handlers
// (waiting at the store's own lock, held here by another instance), and the
// detector counts it. A detector inside the store's lock would see nothing.
func TestDetectorChecksTheTransports(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	locker := core.New(client, core.WithWait(10*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	for name, call := range map[string]func(s *store, id string){
		"HTTP without the middleware": func(s *store, id string) {
			h, _ := httpHandler(s, locker, defaultConfig(), ginlock.WithSkip(func(*gin.Context) bool { return true }))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/orders/"+id+"/pay", nil))
		},
		"gRPC without the interceptor": func(s *store, id string) {
			_, _ = (&ordersService{store: s}).Pay(context.Background(), &ordersv1.OrderRequest{OrderId: id})
		},
	} {
		s := newStore(locker, 0)
		id := adaptertest.Uniq(t)
		s.orders[id] = Order{ID: id, State: stateCreated, AmountCents: 1}
		held, err := locker.Acquire(context.Background(), lockName(id)) // another instance has the order
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); call(s, id) }()
		}
		for deadline := time.Now().Add(10 * time.Second); s.entered.Load() < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		_ = held.Release(context.Background())
		wg.Wait()
		if s.entered.Load() != 2 || s.overlaps.Load() != 1 {
			t.Errorf("%s: %d handlers entered, %d overlaps; want 2 and 1", name, s.entered.Load(), s.overlaps.Load())
		}
	}
}
