package main

// Tests of the three lock modes over HTTP: GETs of an order share its lock
// and writes exclude them, the flash sale's permits, and transfers that hold
// two orders at once. Each is checked by the overlap detectors, with
// requests held inside their handlers on purpose.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// modesService is the HTTP API on a real redis-server, called in process:
// its Locker waits 30 s for a busy name (a request with core.ContextWithWait
// of 0 makes a single attempt instead), with handler work of 0.
func modesService(t *testing.T) (*store, http.Handler, *core.Locker) {
	t.Helper()
	client := redis.NewClient(redistest.Start(t).Options())
	t.Cleanup(func() { _ = client.Close() })
	locker := core.New(client, core.WithTTL(30*time.Second), core.WithFencing(), core.WithWait(30*time.Second),
		core.WithSpin(time.Millisecond, 2*time.Millisecond))
	s := newStore(locker, 0)
	gin.SetMode(gin.ReleaseMode)
	cfg := defaultConfig()
	cfg.HandlerTimeout = 20 * time.Second
	h, err := httpHandler(s, locker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, h, locker
}

// call serves one request; wait >= 0 sets its lock wait budget.
func call(h http.Handler, method, path, body string, wait time.Duration) (int, string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if wait >= 0 {
		req = req.WithContext(core.ContextWithWait(req.Context(), wait))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// collect receives n values from ch within 10 s (a bound for a busy machine,
// not a timing assertion), or returns those it got.
func collect[T any](ch <-chan T, n int) []T {
	var got []T
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case v := <-ch:
			got = append(got, v)
		case <-deadline:
			return got
		}
	}
	return got
}

// TestReadsShareWritesExclude: two GETs of one order are inside their
// handlers at once (held there), and meanwhile a pay of the order is busy;
// a pay held before its write keeps a GET out. The read-write detector sees
// no overlap and two readers at once.
func TestReadsShareWritesExclude(t *testing.T) {
	adaptertest.LeakCheck(t)
	s, h, _ := modesService(t)
	id := orderID(t)
	s.orders[id] = Order{ID: id, State: stateCreated, AmountCents: 100}
	inside, release := make(chan struct{}, 2), make(chan struct{})
	s.onRead = func(string) { inside <- struct{}{}; <-release }
	var holdWriter atomic.Bool
	writing, resume := make(chan struct{}), make(chan struct{})
	s.beforeWrite = func(string) {
		if holdWriter.Load() {
			writing <- struct{}{}
			<-resume
		}
	}

	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i], _ = call(h, http.MethodGet, "/orders/"+id, "", -1) }()
	}
	in := len(collect(inside, 2))
	busy, body := call(h, http.MethodPost, "/orders/"+id+"/pay", "", 0) // a single attempt, while the readers are inside
	close(release)
	wg.Wait()
	if in != 2 || s.maxReaders.Load() != 2 {
		t.Fatalf("%d GETs of one order inside at once (most readers %d), want 2: GETs do not share the order's lock", in, s.maxReaders.Load())
	}
	if busy != http.StatusConflict {
		t.Errorf("a pay while two GETs are inside: %d %s, want 409", busy, body)
	}
	if codes[0] != 200 || codes[1] != 200 {
		t.Errorf("GETs: %v", codes)
	}

	// A pay held before its write: a GET is busy, and gets in after it.
	s.onRead = nil
	holdWriter.Store(true)
	paid := make(chan int, 1)
	go func() { code, _ := call(h, http.MethodPost, "/orders/"+id+"/pay", "", -1); paid <- code }()
	if len(collect(writing, 1)) != 1 {
		t.Fatal("the pay did not reach its write")
	}
	got, body := call(h, http.MethodGet, "/orders/"+id, "", 0)
	holdWriter.Store(false)
	close(resume)
	if got != http.StatusConflict {
		t.Errorf("a GET while a pay is inside: %d %s, want 409", got, body)
	}
	if code := <-paid; code != 200 {
		t.Errorf("pay: %d", code)
	}
	if code, body := call(h, http.MethodGet, "/orders/"+id, "", -1); code != 200 || !strings.Contains(body, `"state":"paid"`) {
		t.Errorf("GET after the pay: %d %s", code, body)
	}
	if s.overlaps.Load() != 0 {
		t.Errorf("%d overlaps", s.overlaps.Load())
	}
	if code, body := call(h, http.MethodGet, "/orders/nope", "", -1); code != 404 || !strings.Contains(body, "order not found") {
		t.Errorf("GET of a missing order: %d %s", code, body)
	}
}

// TestFlashSalePermits: five buys of an item are inside at once, each
// selling from its own segment, and a sixth is busy meanwhile; a buyer
// whose segment is empty while the others are held is told to retry (409);
// a lone buyer sells the rest, from whichever segments have stock, then
// gets 410.
func TestFlashSalePermits(t *testing.T) {
	adaptertest.LeakCheck(t)
	s, h, locker := modesService(t)
	sku := orderID(t)
	s.stock(sku, 2) // 10 units, 2 per segment
	var holdSellers atomic.Bool
	holdSellers.Store(true)
	inside, release := make(chan int, itemSegments+1), make(chan struct{})
	s.onSell = func(_ string, seg int) {
		if holdSellers.Load() {
			inside <- seg
			<-release
		}
	}
	buy := "/items/" + sku + "/buy"
	var wg sync.WaitGroup
	codes := make([]int, itemSegments)
	for i := range itemSegments {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i], _ = call(h, http.MethodPost, buy, "", -1) }()
	}
	segs := collect(inside, itemSegments)
	sixth, body := call(h, http.MethodPost, buy, "", 0) // a single attempt, while five are inside
	holdSellers.Store(false)
	close(release)
	wg.Wait()
	if len(segs) != itemSegments {
		t.Fatalf("%d buys inside at once, want %d", len(segs), itemSegments)
	}
	seen := map[int]bool{}
	for _, seg := range segs {
		seen[seg] = true
	}
	if len(seen) != itemSegments {
		t.Errorf("the five sellers inside at once sold from segments %v: one segment twice", segs)
	}
	if sixth != http.StatusConflict {
		t.Errorf("a sixth buy while five are inside: %d %s, want 409", sixth, body)
	}
	if s.maxSellers.Load() != itemSegments || s.segOverlaps.Load() != 0 {
		t.Errorf("most sellers inside at once %d, segment overlaps %d; want %d and 0", s.maxSellers.Load(), s.segOverlaps.Load(), itemSegments)
	}
	for i, c := range codes {
		if c != 200 {
			t.Errorf("buy %d: %d", i, c)
		}
	}

	// Four permits held elsewhere (slots 0 to 3), segment 4 emptied: the
	// buyer that gets slot 4 is told to retry.
	var held []*core.Lease
	for range itemSegments - 1 {
		l, err := locker.Acquire(context.Background(), itemLockName(sku), core.Permits(itemSegments))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	s.mu.Lock()
	s.items[sku].segments[itemSegments-1] = 0
	s.mu.Unlock()
	code, body := call(h, http.MethodPost, buy, "", 0)
	var ans struct {
		Error string `json:"error"`
		Retry bool   `json:"retry"`
	}
	_ = json.Unmarshal([]byte(body), &ans)
	if code != http.StatusConflict || !ans.Retry || !strings.Contains(ans.Error, "retry") {
		t.Errorf("a buy of an empty segment while the others are held: %d %s, want 409 with retry", code, body)
	}
	for _, l := range held {
		_ = l.Release(context.Background())
	}

	// A lone buyer (always slot 0 first) sells the four units left.
	for i := range itemSegments - 1 {
		if code, body := call(h, http.MethodPost, buy, "", -1); code != 200 {
			t.Fatalf("lone buy %d: %d %s", i, code, body)
		}
	}
	if code, body := call(h, http.MethodPost, buy, "", -1); code != http.StatusGone || !strings.Contains(body, "sold out") {
		t.Errorf("a buy of a sold-out item: %d %s, want 410", code, body)
	}
	if it, _ := s.item(sku); it.Left != 0 || it.Sold != 2*itemSegments-1 {
		t.Errorf("item after the sale: %+v", it)
	}
	if code, body := call(h, http.MethodPost, "/items/nope/buy", "", -1); code != 404 || !strings.Contains(body, "item not found") {
		t.Errorf("a buy of an unknown item: %d %s", code, body)
	}
	if s.segOverlaps.Load() != 0 {
		t.Errorf("%d segment overlaps", s.segOverlaps.Load())
	}
}

// TestTransferHoldsBothOrders: a transfer moves cents between two orders
// and writes each with its own fence; a transfer to an order held elsewhere
// is busy before its handler; while one is held before its write,
// both orders are busy (a crossing transfer and a GET of either), and the
// crossing transfer, waiting, gets through after it. Bad requests change
// nothing.
func TestTransferHoldsBothOrders(t *testing.T) {
	adaptertest.LeakCheck(t)
	s, h, locker := modesService(t)
	a, b := orderID(t)+"-a", orderID(t)+"-b"
	s.orders[a] = Order{ID: a, State: stateCreated, AmountCents: 1000}
	s.orders[b] = Order{ID: b, State: stateCreated, AmountCents: 500}
	var holdWriter atomic.Bool
	writing, resume := make(chan struct{}), make(chan struct{})
	s.beforeWrite = func(string) {
		if holdWriter.CompareAndSwap(true, false) {
			writing <- struct{}{}
			<-resume
		}
	}
	move := func(from, to, body string, wait time.Duration) (int, string) {
		return call(h, http.MethodPost, "/orders/"+from+"/transfer/"+to, body, wait)
	}
	if code, body := move(a, b, `{"amount_cents":250}`, -1); code != 200 || !strings.Contains(body, `"amount_cents":750`) {
		t.Fatalf("transfer: %d %s", code, body)
	}
	if s.fences[a] == 0 || s.fences[b] == 0 {
		t.Errorf("fences after the transfer: %d and %d, want each order's own", s.fences[a], s.fences[b])
	}
	for _, tc := range []struct {
		from, to, body string
		code           int
		says           string
	}{
		{a, a, `{"amount_cents":1}`, 422, "cannot be transferred to itself"},
		{a, "nope", `{"amount_cents":1}`, 404, "order not found: nope"},
		{"nope", a, `{"amount_cents":1}`, 404, "order not found: nope"},
		{a, b, `{"amount_cents":750}`, 422, "must keep at least 1"},
		{a, b, `{"amount":1}`, 422, `is not a field of a transfer`},
		{a, b, `{"amount_cents":0}`, 422, "amount_cents must be positive"},
		{a, b, ``, 400, "the body is empty"},
	} {
		if code, body := move(tc.from, tc.to, tc.body, -1); code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s → %s %s: %d %s; want %d saying %q", tc.from, tc.to, tc.body, code, body, tc.code, tc.says)
		}
	}

	// Another instance holds b: a transfer from a to b is busy at the
	// middleware, which takes both orders or none; its handler never runs.
	other, err := locker.Acquire(context.Background(), lockName(b))
	if err != nil {
		t.Fatal(err)
	}
	entered := s.entered.Load()
	code, body := move(a, b, `{"amount_cents":1}`, 0)
	_ = other.Release(context.Background())
	if code != http.StatusConflict || s.entered.Load() != entered {
		t.Errorf("a transfer to an order held elsewhere: %d %s, %d handlers entered; want 409 and none: the route does not lock both orders",
			code, body, s.entered.Load()-entered)
	}

	// One transfer held before its write: both orders are busy.
	holdWriter.Store(true)
	first := make(chan int, 1)
	go func() { code, _ := move(a, b, `{"amount_cents":100}`, -1); first <- code }()
	if len(collect(writing, 1)) != 1 {
		t.Fatal("the transfer did not reach its write")
	}
	crossBusy, body1 := move(b, a, `{"amount_cents":40}`, 0)
	getBusy, body2 := call(h, http.MethodGet, "/orders/"+b, "", 0)
	second := make(chan int, 1)
	go func() { code, _ := move(b, a, `{"amount_cents":40}`, -1); second <- code }() // waits for the first
	close(resume)
	if crossBusy != http.StatusConflict || getBusy != http.StatusConflict {
		t.Errorf("while a transfer of %s → %s is inside: the crossing transfer %d %s, a GET of %s %d %s; want 409 and 409",
			a, b, crossBusy, body1, b, getBusy, body2)
	}
	if c1, c2 := <-first, <-second; c1 != 200 || c2 != 200 {
		t.Errorf("crossing transfers: %d and %d", c1, c2)
	}
	if sum := s.orders[a].AmountCents + s.orders[b].AmountCents; sum != 1500 || s.orders[a].AmountCents != 690 {
		t.Errorf("after the transfers: %+v and %+v", s.orders[a], s.orders[b])
	}
	if s.overlaps.Load() != 0 {
		t.Errorf("%d overlaps", s.overlaps.Load())
	}

	// Each order's own fence is checked: a later holder of b has written.
	s.mu.Lock()
	s.fences[b] = 1 << 62
	s.mu.Unlock()
	before := s.orders[a]
	if code, body := move(a, b, `{"amount_cents":1}`, -1); code != http.StatusServiceUnavailable || !strings.Contains(body, "stale") {
		t.Errorf("a transfer to an order fenced higher: %d %s, want 503 stale", code, body)
	}
	if s.orders[a] != before {
		t.Errorf("order %s changed by a refused transfer: %+v", a, s.orders[a])
	}
}

// TestDemoModesOnRealRedis runs the lock modes' demo against a real
// redis-server: 0 overlaps of an order, the flash sale sells exactly its
// stock to its buyers with at most five sellers at once and no segment sold
// from twice at once, and the crossing transfers all end, conserving the
// sum.
func TestDemoModesOnRealRedis(t *testing.T) {
	adaptertest.LeakCheck(t)
	cfg := testConfig(redistest.Start(t).Addr())
	cfg.HandlerTimeout, cfg.TTL = 20*time.Second, 30*time.Second
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.demoModes(context.Background())
	a.close()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res.print(&out)
	t.Log("\n" + out.String())
	if bad := res.broken(); bad != "" {
		t.Errorf("%s; failures %q", bad, res.failures)
	}
	if res.sold != res.stock || res.soldOut != int64(res.buyers)-res.stock || res.left != 0 || res.maxSellers > itemSegments {
		t.Errorf("flash sale: sold %d of %d, sold out %d, left %d, most sellers %d", res.sold, res.stock, res.soldOut, res.left, res.maxSellers)
	}
	if res.moved != 2*demoTransfers || res.sumAfter != res.sumBefore {
		t.Errorf("transfers: %d done of %d, sum %d → %d", res.moved, 2*demoTransfers, res.sumBefore, res.sumAfter)
	}
	for _, s := range []string{"most readers inside at once:", "oversold: 0", "segment overlaps: 0", "deadlocks / timeouts: 0"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the figures lack %q", s)
		}
	}
}

// TestDocCurlCommandsWork: the curl commands of the package documentation
// (main.go) work as printed, against the service on the address they name:
// two orders created, a transfer between them, a read, a buy in the flash
// sale and the item's stock, each answered 200.
func TestDocCurlCommandsWork(t *testing.T) {
	adaptertest.LeakCheck(t)
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var doc strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		if cmd, ok := strings.CutPrefix(line, "//\tcurl "); ok {
			doc.WriteString("  curl " + strings.ReplaceAll(cmd, "http://127.0.0.1:8080", "http://"+a.httpAddr) + "\n")
		}
	}
	lines := bannerCurls(t, doc.String())
	if len(lines) != 6 {
		t.Fatalf("%d curl commands in the documentation, want 6:\n%s", len(lines), doc.String())
	}
	for _, calls := range lines {
		for _, c := range calls {
			if code, body := c.send(t); code != 200 {
				t.Errorf("%s %s: %d %s", c.method, c.url, code, body)
			}
		}
	}
	if o, _ := a.store.get("45"); o.AmountCents != 750 {
		t.Errorf("order 45 after the documentation's transfer: %+v", o)
	}
	if it, _ := a.store.item(flashSKU); it.Sold != 1 {
		t.Errorf("item %s after the documentation's buy: %+v", flashSKU, it)
	}
}

// TestReadWriteDetector: readers beside readers are no overlap (and count
// towards the most readers at once); a reader beside a writer, or a writer
// beside a reader, is one; sales of one segment at once are one, of two
// segments not.
func TestReadWriteDetector(t *testing.T) {
	s := newStore(nil, 0)
	r1, r2 := s.enterRead("1"), s.enterRead("1")
	if s.overlaps.Load() != 0 || s.maxReaders.Load() != 2 {
		t.Fatalf("two readers: overlaps %d, most readers %d; want 0 and 2", s.overlaps.Load(), s.maxReaders.Load())
	}
	s.enter("1")() // a writer beside the readers
	s.enter("2")() // another order
	r1()
	r2()
	w := s.enter("1")
	s.enterRead("1")() // a reader beside the writer
	w()
	s.enterRead("1")()
	if s.overlaps.Load() != 2 {
		t.Fatalf("overlaps %d, want 2", s.overlaps.Load())
	}
	a, b := s.enterSegment("x", 0), s.enterSegment("x", 1)
	s.enterSegment("y", 0)()
	s.enterSegment("x", 1)() // a second sale of segment 1
	a()
	b()
	if s.segOverlaps.Load() != 1 {
		t.Fatalf("segment overlaps %d, want 1", s.segOverlaps.Load())
	}
}
