package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// orderID returns an order id of the test's own that fits in a URL path.
func orderID(t *testing.T) string {
	return strings.NewReplacer("#", "-", "/", "-").Replace(adaptertest.Uniq(t))
}

// acquires returns how many locks the service has taken so far.
func (a *app) acquires() int {
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	return len(a.waits.d)
}

// locked reports whether order id's lock is in Redis now.
func locked(t *testing.T, a *app, client *redis.Client, id string) bool {
	t.Helper()
	key, err := a.store.locker.Key(lockName(id))
	if err != nil {
		t.Fatal(err)
	}
	n, err := client.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestTricklingBodyTakesNoLock: a client that sends its headers and then
// dribbles a 19-byte body never holds the order's lock, because the handlers
// read the whole body before the lock middleware runs (the design: the lock
// is not taken before the body is complete). While it dribbles, another
// create of the same order goes straight through; the server gives up on it
// at its ReadTimeout (408 or a closed connection), and its create never runs.
func TestTricklingBodyTakesNoLock(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := srv.Client(t)
	cfg := testConfig(srv.Addr())
	// Long enough for the complete request to be read on a busy machine,
	// far shorter than the trickled body (8 s).
	cfg.ReadTimeout = 2 * time.Second
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	id := orderID(t)
	body := `{"amount_cents":42}` // 19 bytes

	conn, err := net.Dial("tcp", a.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	fmt.Fprintf(conn, "POST /orders/%s HTTP/1.1\r\nHost: orders\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, len(body), body[:3])
	stopDribble := make(chan struct{})
	dribbled := make(chan struct{})
	go func() { // one more byte every 500 ms: the body would take 8 s more
		defer close(dribbled)
		for i := 3; i < len(body); i++ {
			select {
			case <-stopDribble:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	defer func() { close(stopDribble); <-dribbled }()

	time.Sleep(100 * time.Millisecond) // the trickler is in the middle of its body
	if locked(t, a, client, id) {
		t.Fatal("the order is locked while its body is still arriving")
	}
	before := a.acquires()
	if code, resp := post(t, "http://"+a.httpAddr+"/orders/"+id, `{"amount_cents":7}`); code != http.StatusOK {
		t.Fatalf("a create while another client trickles its body: %d %s (the trickler holds the lock?)", code, resp)
	}
	if got := a.acquires() - before; got != 1 {
		t.Fatalf("%d locks taken for one complete request", got)
	}

	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	took := time.Since(began)
	if err == nil && !strings.Contains(line, " 408 ") {
		t.Fatalf("the trickler got %q, want 408 or a closed connection", line)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still waits for the trickled body after %v (ReadTimeout %v)", took, cfg.ReadTimeout)
	}
	t.Logf("the trickler was answered %q (%v) after %v; ReadTimeout %v", strings.TrimSpace(line), err, took.Round(time.Millisecond), cfg.ReadTimeout)
	if got := a.acquires() - before; got != 1 {
		t.Fatalf("the trickled request took a lock: %d locks taken", got)
	}
	if o, _ := a.store.get(id); o.AmountCents != 7 {
		t.Fatalf("order %+v: the trickled create ran", o)
	}
}

// TestOversizedBodyGets413AndNoLock: a body above MaxBody is answered 413
// before any lock is taken, with a Content-Length or without one (chunked);
// over gRPC a message above it is ResourceExhausted.
func TestOversizedBodyGets413AndNoLock(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := srv.Client(t)
	cfg := testConfig(srv.Addr())
	cfg.MaxBody = 4 << 10
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	id := orderID(t)
	big := `{"amount_cents":1,"note":"` + strings.Repeat("x", 1<<20) + `"}`
	url := "http://" + a.httpAddr + "/orders/" + id
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	web := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"Content-Length", strings.NewReader(big)},
		{"chunked", io.MultiReader(strings.NewReader(big))}, // no length known: sent chunked
	} {
		before := a.acquires()
		resp, err := web.Post(url, "application/json", tc.body)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: %d %s, want 413", tc.name, resp.StatusCode, b)
		}
		if n := a.acquires() - before; n != 0 || locked(t, a, client, id) {
			t.Fatalf("%s: %d locks taken for a body that was refused", tc.name, n)
		}
	}
	if _, ok := a.store.get(id); ok {
		t.Fatal("an oversized create was stored")
	}
	if code, resp := post(t, url, `{"amount_cents":1}`); code != http.StatusOK {
		t.Fatalf("a small body after the large ones: %d %s", code, resp)
	}

	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := a.acquires()
	_, err = ordersv1.NewOrdersClient(conn).Create(context.Background(), &ordersv1.OrderRequest{OrderId: strings.Repeat("9", 64<<10), AmountCents: 1})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an oversized gRPC message: %v, want ResourceExhausted", err)
	}
	if n := a.acquires() - before; n != 0 {
		t.Fatalf("%d locks taken for a gRPC message that was refused", n)
	}
}

// TestStaleWriteRefused: a holder frozen between its last check of the lease
// and its write (a GC pause, a stopped VM) wakes up after its lock expired
// and a later holder wrote: the fenced store refuses its write, and the
// later holder's state stays.
func TestStaleWriteRefused(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := redis.NewClient(srv.Options())
	defer client.Close()
	// The payer must reach its last check of the lease within the TTL, and
	// the canceller's wait must outlast the TTL: both with room for a busy
	// machine.
	locker := core.New(client, core.WithTTL(2*time.Second), core.WithFencing(),
		core.WithWait(30*time.Second), core.WithSpin(time.Millisecond, 2*time.Millisecond))
	s := newStore(locker, 0)
	id := orderID(t)
	ctx := context.Background()
	if _, err := s.create(ctx, id, 100); err != nil {
		t.Fatal(err)
	}

	frozen, thaw := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s.beforeWrite = func(string) {
		if first.CompareAndSwap(false, true) { // only the first writer freezes
			close(frozen)
			<-thaw
		}
	}
	paid := make(chan error, 1)
	go func() {
		_, err := s.pay(ctx, id)
		paid <- err
	}()
	select {
	case <-frozen: // the payer checked its lease and froze before its write
	case err := <-paid:
		t.Fatalf("the payer returned %v before its write (its lease ran out before its last check?)", err)
	}
	// Its lock expires; the canceller takes the order with a higher fence.
	cancelled, err := s.cancel(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	close(thaw)
	err = <-paid
	if !errors.Is(err, errStale) {
		t.Fatalf("the frozen payer's write: %v, want errStale", err)
	}
	if o, _ := s.get(id); o.State != stateCancelled || o != cancelled {
		t.Fatalf("order %+v after the stale write, want %+v", o, cancelled)
	}
	t.Log(err)

	// The store's check alone: lower refused, equal and higher accepted.
	s2 := newStore(nil, 0)
	if err := s2.put("1", Order{ID: "1"}, 5); err != nil {
		t.Fatal(err)
	}
	if err := s2.put("1", Order{ID: "1", State: "x"}, 4); !errors.Is(err, errStale) {
		t.Fatalf("fence 4 after 5: %v", err)
	}
	if s2.put("1", Order{ID: "1"}, 5) != nil || s2.put("1", Order{ID: "1"}, 6) != nil {
		t.Fatal("an equal or higher fence was refused")
	}
}

// TestLostLeaseStopsTheHandler: when the lease is lost (here its TTL runs
// out under a handler slower than it), the adapter cancels the request's
// context, the store stops its slow part and writes nothing, and the client
// is told to retry.
func TestLostLeaseStopsTheHandler(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := redis.NewClient(srv.Options())
	defer client.Close()
	locker := core.New(client, core.WithTTL(200*time.Millisecond), core.WithFencing())
	s := newStore(locker, time.Minute)
	id := orderID(t)
	_ = s.put(id, Order{ID: id, State: stateCreated, AmountCents: 1}, 0)
	cfg := defaultConfig()
	cfg.HandlerTimeout = time.Minute // the lease, not the budget, ends the request
	h, err := httpHandler(s, locker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	began := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders/"+id+"/pay", nil))
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("the handler ran %v after its lease was lost", took)
	}
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "try again") {
		t.Fatalf("%d %s, want 503", rec.Code, rec.Body.String())
	}
	if o, _ := s.get(id); o.State != stateCreated {
		t.Fatalf("order %+v: written after the lease was lost", o)
	}
}

// TestBudgetStopsTheHandler: a handler slower than HandlerTimeout is
// cancelled at its budget, before its lock's TTL, and writes nothing.
func TestBudgetStopsTheHandler(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	client := srv.Client(t)
	cfg := testConfig(srv.Addr())
	cfg.HandlerTimeout, cfg.TTL, cfg.Work = 200*time.Millisecond, time.Minute, time.Minute
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	id := orderID(t)
	_ = a.store.put(id, Order{ID: id, State: stateCreated, AmountCents: 1}, 0)
	if code, body := post(t, "http://"+a.httpAddr+"/orders/"+id+"/pay", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", code, body)
	}
	if o, _ := a.store.get(id); o.State != stateCreated {
		t.Fatalf("order %+v: written after the budget", o)
	}
	if locked(t, a, client, id) {
		t.Fatal("the lock is still held after the handler stopped")
	}
}

func TestConfigCheck(t *testing.T) {
	cfg := defaultConfig()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	cfg.TTL = cfg.HandlerTimeout
	if err := cfg.check(); err == nil || !strings.Contains(err.Error(), "TTL") {
		t.Fatalf("a TTL equal to the handler timeout: %v", err)
	}
	cfg = defaultConfig()
	cfg.MaxBody = 0
	if _, err := start(cfg); err == nil {
		t.Fatal("start accepted a zero body limit")
	}
}
