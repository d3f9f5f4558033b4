package lockdebug_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/testmain"
	"github.com/reqlock/reqlock/lockdebug"
)

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
}

// get serves path from page and returns the answer.
func get(t *testing.T, page http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// snapshot reads the page's JSON endpoint.
func snapshot(t *testing.T, page http.Handler) (lockdebug.Snapshot, string) {
	t.Helper()
	rec := get(t, page, http.MethodGet, "/debug/reqlock/json")
	if rec.Code != http.StatusOK {
		t.Fatalf("json: %d %s", rec.Code, rec.Body)
	}
	var s lockdebug.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("json: %v\n%s", err, rec.Body)
	}
	return s, rec.Body.String()
}

// waitFor polls the page's JSON until ok accepts it, for at most 30 s.
func waitFor(t *testing.T, page http.Handler, what string, ok func(lockdebug.Snapshot) bool) lockdebug.Snapshot {
	t.Helper()
	var s lockdebug.Snapshot
	var raw string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if s, raw = snapshot(t, page); ok(s) {
			return s
		}
	}
	t.Fatalf("the page never showed %s:\n%s", what, raw)
	return s
}

func newLocker(t *testing.T, opts ...core.Option) *core.Locker {
	t.Helper()
	l := core.New(shared.Client(t), append([]core.Option{core.WithWait(30 * time.Second), core.WithSpin(time.Millisecond, time.Millisecond)}, opts...)...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLeasesAndWaitersOfALocker: a page given to a Locker lists its held
// lease (name, key, route, mode, TTL, validity, fence, token) and the
// acquire that waits for it, on the JSON and the HTML page; both go when
// they end, and the window counts the two acquires.
func TestLeasesAndWaitersOfALocker(t *testing.T) {
	testmain.LeakCheck(t)
	page := lockdebug.New(lockdebug.WithNames())
	if err := page.Err(); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, core.WithFencing(), core.WithTTL(20*time.Second), core.WithObservers(page))
	name := uniq(t)
	ctx := context.Background()
	lease, err := l.Acquire(ctx, name, core.Route("/orders/:id"), core.RequestID("req-7f3a"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		second, err := l.Acquire(ctx, name, core.Route("/orders/:id/pay"))
		if err == nil {
			err = second.Release(ctx)
		}
		done <- err
	}()
	s := waitFor(t, page, "the waiter", func(s lockdebug.Snapshot) bool { return s.Waiting.Count == 1 })
	key, _ := l.Key(name)
	if len(s.Held.Leases) != 1 || s.Held.Count != 1 {
		t.Fatalf("held: %+v", s.Held)
	}
	got := s.Held.Leases[0]
	if got.Name != name || got.Key != key || got.Route != "/orders/:id" || got.Mode != "exclusive" || got.TTLMS != 20000 ||
		got.ValidMS <= 0 || got.ValidMS > 20000 || got.Fence != lease.Fence() || got.Fence == 0 || got.HeldMS < 0 {
		t.Errorf("lease: %+v, want %s %s /orders/:id exclusive, TTL 20 s, fence %d", got, name, key, lease.Fence())
	}
	host, _ := os.Hostname()
	if h := got.Holder; h == nil || got.Token != "" || h.Host != host || h.PID != os.Getpid() || h.Route != "/orders/:id" || h.RequestID != "req-7f3a" ||
		h.Text != fmt.Sprintf("%s pid %d request req-7f3a", host, os.Getpid()) {
		t.Errorf("lease: token %q, holder %+v; want this process with request req-7f3a", got.Token, got.Holder)
	}
	if w := s.Waiting.Waiters; len(w) != 1 || w[0].Name != name || w[0].Route != "/orders/:id/pay" || w[0].Mode != "exclusive" {
		t.Errorf("waiters: %+v", w)
	}
	html := get(t, page, http.MethodGet, "/debug/reqlock/").Body.String()
	for _, want := range []string{name, "/orders/:id/pay", "Held leases", got.Holder.Text} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML page lacks %q:\n%s", want, html)
		}
	}

	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, _ = snapshot(t, page)
	if s.Held.Count != 0 || len(s.Held.Leases) != 0 || s.Waiting.Count != 0 || len(s.Waiting.Waiters) != 0 {
		t.Errorf("after the releases: held %+v, waiting %+v", s.Held, s.Waiting)
	}
	if s.Waits.Total != 2 || s.Waits.ByOutcome[0] != 2 || s.Waits.Releases["released"] != 2 {
		t.Errorf("window: total %d, by outcome %v, releases %v; want 2 acquired, 2 released", s.Waits.Total, s.Waits.ByOutcome, s.Waits.Releases)
	}
}

// TestRedactedByDefault: without WithNames, neither the JSON nor the HTML
// page carries the lock's name, key or token; they show its route, mode
// and durations.
func TestRedactedByDefault(t *testing.T) {
	testmain.LeakCheck(t)
	page := lockdebug.New()
	l := newLocker(t, core.WithObservers(page))
	name := "secret-" + uniq(t)
	ctx := context.Background()
	lease, err := l.Acquire(ctx, name, core.Route("/orders/:id"), core.RequestID("req-secret-7f3a"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	waiting, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(waiting, name, core.Route("/orders/:id/pay"))
		done <- err
	}()
	s := waitFor(t, page, "the waiter", func(s lockdebug.Snapshot) bool { return s.Waiting.Count == 1 })
	_, raw := snapshot(t, page)
	html := get(t, page, http.MethodGet, "/debug/reqlock/").Body.String()
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter: %v", err)
	}
	if s.NamesShown {
		t.Error("names_shown is set without WithNames")
	}
	if got := s.Held.Leases; len(got) != 1 || got[0].Name != "" || got[0].Key != "" || got[0].Token != "" || got[0].Holder != nil || got[0].Route != "/orders/:id" {
		t.Errorf("held: %+v, want the route without name, key, token or holder", got)
	}
	if w := s.Waiting.Waiters; len(w) != 1 || w[0].Name != "" || w[0].Key != "" || w[0].Route != "/orders/:id/pay" {
		t.Errorf("waiters: %+v", w)
	}
	secret := strings.TrimPrefix(name, "secret-")
	for what, body := range map[string]string{"JSON": raw, "HTML": html} {
		for _, leak := range []string{secret, lease.Token()[:16], "req-secret", fmt.Sprint("pid ", os.Getpid()), `"holder":`} {
			if strings.Contains(body, leak) {
				t.Errorf("the %s shows %q without WithNames:\n%s", what, leak, body)
			}
		}
		if !strings.Contains(body, "/orders/:id/pay") {
			t.Errorf("the %s lacks the route:\n%s", what, body)
		}
	}
}

// TestTokenWithoutHolder: the lease of a Locker built WithoutHolder shows
// its token, with WithNames.
func TestTokenWithoutHolder(t *testing.T) {
	testmain.LeakCheck(t)
	page := lockdebug.New(lockdebug.WithNames())
	l := newLocker(t, core.WithoutHolder(), core.WithObservers(page))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	s, _ := snapshot(t, page)
	if got := s.Held.Leases; len(got) != 1 || got[0].Holder != nil || got[0].Token != lease.Token() {
		t.Errorf("held: %+v, want the token %q and no holder", got, lease.Token())
	}
}

// fixed is a clock a test moves itself.
type fixed struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixed) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fixed) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }
func newClock() *fixed               { return &fixed{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)} }
func acquireAt(end time.Time, wait time.Duration, o core.Outcome) core.AcquireEvent {
	return core.AcquireEvent{Name: "n", Key: "reqlock:{n}", Route: "/r", Start: end.Add(-wait), End: end, Outcome: o}
}

// TestWindowExpiry: an acquire is counted in its bucket and outcome for the
// whole window, and no longer once the window has slid past it; an event
// already older than the window is not counted.
func TestWindowExpiry(t *testing.T) {
	clock := newClock()
	page := lockdebug.New(lockdebug.WithClock(clock.Now), lockdebug.WithWindow(time.Minute))
	ctx := context.Background()
	t0 := clock.Now()
	page.ObserveStart(ctx, core.StartEvent{Name: "n", Key: "reqlock:{n}", Start: t0.Add(-3 * time.Millisecond)})
	if lo := page.ObserveAcquire(ctx, acquireAt(t0, 3*time.Millisecond, core.OutcomeAcquired)); lo != nil {
		lo.ObserveRelease(ctx, core.ReleaseEvent{End: t0, Outcome: core.OutcomeReleased})
	}
	page.ObserveAcquire(ctx, acquireAt(t0, 200*time.Millisecond, core.OutcomeBusy))
	page.ObserveAcquire(ctx, acquireAt(t0, 30*time.Second, core.OutcomeDeadline))
	page.ObserveAcquire(ctx, acquireAt(t0.Add(-2*time.Minute), time.Millisecond, core.OutcomeAcquired)) // before the window

	counts := func() (total int64, byBucket map[string][]int64) {
		s, _ := snapshot(t, page)
		byBucket = map[string][]int64{}
		for _, b := range s.Waits.Buckets {
			if b.Total > 0 {
				byBucket[b.Label] = b.Counts[:4]
			}
		}
		if s.Waits.WindowMS != 60000 {
			t.Errorf("window_ms %d, want 60000", s.Waits.WindowMS)
		}
		return s.Waits.Total, byBucket
	}
	want := map[string][]int64{"≤ 5ms": {1, 0, 0, 0}, "≤ 250ms": {0, 1, 0, 0}, "> 10s": {0, 0, 0, 1}}
	if total, got := counts(); total != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("at once: total %d, buckets %v; want 3, %v", total, got, want)
	}
	clock.Add(58 * time.Second) // still inside the window
	if total, got := counts(); total != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("58 s later: total %d, buckets %v; want 3, %v", total, got, want)
	}
	clock.Add(2 * time.Second) // the window has slid past them
	if total, got := counts(); total != 0 || len(got) != 0 {
		t.Fatalf("60 s later: total %d, buckets %v; want nothing", total, got)
	}
	// The slots are reused: a new acquire is counted alone.
	page.ObserveAcquire(ctx, acquireAt(clock.Now(), 3*time.Millisecond, core.OutcomeAcquired))
	if total, got := counts(); total != 1 || fmt.Sprint(got) != fmt.Sprint(map[string][]int64{"≤ 5ms": {1, 0, 0, 0}}) {
		t.Fatalf("a new acquire: total %d, buckets %v", total, got)
	}
}

// TestCaps: beyond WithMaxLeases and WithMaxWaiters the page counts leases
// and waiters without listing them, and the counts go back to zero when
// they all end.
func TestCaps(t *testing.T) {
	clock := newClock()
	page := lockdebug.New(lockdebug.WithClock(clock.Now), lockdebug.WithMaxLeases(2), lockdebug.WithMaxWaiters(3))
	ctx := context.Background()
	var starts []core.StartEvent
	for i := range 5 {
		e := core.StartEvent{Name: fmt.Sprint("n", i), Key: fmt.Sprint("reqlock:{n", i, "}"), Start: clock.Now().Add(time.Duration(i) * time.Millisecond)}
		starts = append(starts, e)
		page.ObserveStart(ctx, e)
	}
	s, _ := snapshot(t, page)
	if s.Waiting.Count != 5 || len(s.Waiting.Waiters) != 3 || s.Waiting.NotListed != 2 {
		t.Fatalf("waiting: count %d, listed %d, not listed %d; want 5, 3, 2", s.Waiting.Count, len(s.Waiting.Waiters), s.Waiting.NotListed)
	}
	var ends []core.LeaseObserver
	for _, e := range starts {
		ends = append(ends, page.ObserveAcquire(ctx, core.AcquireEvent{Name: e.Name, Key: e.Key, Start: e.Start, End: clock.Now(), Outcome: core.OutcomeAcquired}))
	}
	s, _ = snapshot(t, page)
	if s.Waiting.Count != 0 || len(s.Waiting.Waiters) != 0 {
		t.Fatalf("waiting after the acquires: %+v", s.Waiting)
	}
	if s.Held.Count != 5 || len(s.Held.Leases) != 2 || s.Held.NotListed != 3 {
		t.Fatalf("held: count %d, listed %d, not listed %d; want 5, 2, 3", s.Held.Count, len(s.Held.Leases), s.Held.NotListed)
	}
	html := get(t, page, http.MethodGet, "/debug/reqlock/").Body.String()
	if !strings.Contains(html, "and 3 more, not listed") {
		t.Errorf("the HTML does not say 3 more:\n%s", html)
	}
	for _, lo := range ends {
		lo.ObserveRelease(ctx, core.ReleaseEvent{End: clock.Now(), Outcome: core.OutcomeReleased})
	}
	s, _ = snapshot(t, page)
	if s.Held.Count != 0 || len(s.Held.Leases) != 0 || s.Held.NotListed != 0 || s.Waits.Releases["released"] != 5 {
		t.Fatalf("after the releases: %+v, releases %v", s.Held, s.Waits.Releases)
	}
}

// TestEscaping: a lock name made of markup is shown as text on the HTML
// page, never as markup.
func TestEscaping(t *testing.T) {
	clock := newClock()
	page := lockdebug.New(lockdebug.WithNames(), lockdebug.WithClock(clock.Now))
	ctx := context.Background()
	evil := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	page.ObserveStart(ctx, core.StartEvent{Name: evil, Key: "k", Route: `"><b>route</b>`, Start: clock.Now()})
	body := get(t, page, http.MethodGet, "/debug/reqlock/").Body.String()
	for _, raw := range []string{"<script>alert", "<img src=x", "<b>route</b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the page carries %q unescaped:\n%s", raw, body)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("the page lacks the escaped name:\n%s", body)
	}
}

// TestHTTP: the answers' methods, paths, types and headers.
func TestHTTP(t *testing.T) {
	page := lockdebug.New()
	for _, c := range []struct {
		method, path string
		code         int
		ctype        string
	}{
		{http.MethodGet, "/debug/reqlock/", 200, "text/html; charset=utf-8"},
		{http.MethodGet, "/debug/reqlock/json", 200, "application/json"},
		{http.MethodGet, "/debug/reqlock/live.js", 200, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/debug/reqlock/style.css", 200, "text/css; charset=utf-8"},
		{http.MethodHead, "/debug/reqlock/json", 200, "application/json"},
		{http.MethodGet, "/debug/reqlock/nothing", 404, "text/plain; charset=utf-8"},
		{http.MethodPost, "/debug/reqlock/", 405, "text/plain; charset=utf-8"},
		{http.MethodDelete, "/debug/reqlock/json", 405, "text/plain; charset=utf-8"},
	} {
		rec := get(t, page, c.method, c.path)
		h := rec.Header()
		if rec.Code != c.code || h.Get("Content-Type") != c.ctype || h.Get("Cache-Control") != "no-store" ||
			h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s %s: %d %v", c.method, c.path, rec.Code, h)
		}
		if c.code == 405 && h.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, h.Get("Allow"))
		}
		if c.method == http.MethodHead && rec.Body.Len() != 0 {
			t.Errorf("HEAD %s: a body of %d bytes", c.path, rec.Body.Len())
		}
	}
	// Mounted like net/http/pprof on a mux.
	mux := http.NewServeMux()
	mux.Handle("/debug/reqlock/", page)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/reqlock/json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("through a mux: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestInvalidOptions: every bad option is reported by Err, wrapping
// core.ErrInvalidOption; such a page answers 500 and observes nothing.
func TestInvalidOptions(t *testing.T) {
	page := lockdebug.New(lockdebug.WithMaxLeases(0), lockdebug.WithMaxWaiters(lockdebug.MaxList+1), lockdebug.WithMaxHot(-1),
		lockdebug.WithWindow(time.Second), lockdebug.WithClock(nil), nil)
	err := page.Err()
	if !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Err() = %v, want core.ErrInvalidOption", err)
	}
	for _, want := range []string{"WithMaxLeases(0)", "WithMaxWaiters(10001)", "WithMaxHot(-1)", "WithWindow(1s)", "WithClock(nil)", "option 5 is nil"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %v, lacks %q", err, want)
		}
	}
	if rec := get(t, page, http.MethodGet, "/debug/reqlock/json"); rec.Code != http.StatusInternalServerError {
		t.Errorf("an invalid page answers %d", rec.Code)
	}
	ctx := context.Background()
	page.ObserveStart(ctx, core.StartEvent{Name: "n"})
	if lo := page.ObserveAcquire(ctx, core.AcquireEvent{Name: "n", Outcome: core.OutcomeAcquired}); lo != nil {
		t.Error("an invalid page returned a LeaseObserver")
	}
	if s := page.Snapshot(); s.Held.Count != 0 || s.Waiting.Count != 0 {
		t.Errorf("an invalid page counts: %+v", s)
	}
	if err := lockdebug.New().Err(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestConcurrentUse: acquires and releases of many goroutines on a real
// Locker while the page is served (under -race); the counts end at zero.
func TestConcurrentUse(t *testing.T) {
	testmain.LeakCheck(t)
	page := lockdebug.New(lockdebug.WithNames(), lockdebug.WithMaxLeases(3), lockdebug.WithMaxWaiters(3))
	l := newLocker(t, core.WithHandlers(page))
	name := uniq(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				get(t, page, http.MethodGet, "/debug/reqlock/")
				snapshot(t, page)
			}
		}
	}()
	var workers sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for range 10 {
				lease, err := l.Acquire(ctx, fmt.Sprint(name, i%3), core.Route("/r"))
				if err == nil {
					err = lease.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, _ := snapshot(t, page)
	if s.Held.Count != 0 || s.Waiting.Count != 0 || len(s.Held.Leases) != 0 || len(s.Waiting.Waiters) != 0 {
		t.Errorf("at the end: held %+v, waiting %+v", s.Held, s.Waiting)
	}
	if s.Waits.Total != 80 || s.Waits.ByOutcome[0] != 80 || s.Waits.Releases["released"] != 80 {
		t.Errorf("window: %d acquires %v, releases %v; want 80", s.Waits.Total, s.Waits.ByOutcome, s.Waits.Releases)
	}
}

// TestGuard: the Guard's hot names, with their local holder and waiters,
// named with WithNames and not without.
func TestGuard(t *testing.T) {
	testmain.LeakCheck(t)
	name := uniq(t)
	guard := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(2))
	named := lockdebug.New(lockdebug.WithNames(), lockdebug.WithGuard(guard))
	anonymous := lockdebug.New(lockdebug.WithGuard(guard))
	l := newLocker(t, core.WithHandlers(guard, named, anonymous))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		next, err := l.Acquire(ctx, name)
		if err == nil {
			err = next.Release(ctx)
		}
		done <- err
	}()
	s := waitFor(t, named, "a local waiter", func(s lockdebug.Snapshot) bool {
		return s.Hot != nil && len(s.Hot.Names) == 1 && s.Hot.Names[0].Waiters == 1
	})
	key, _ := l.Key(name)
	if h := s.Hot.Names[0]; h.Name != name || h.Key != key || !h.Pinned || h.Holders != 1 {
		t.Errorf("hot name: %+v, want %s pinned with 1 holder", h, name)
	}
	if a, raw := snapshot(t, anonymous); a.Hot == nil || len(a.Hot.Names) != 1 || a.Hot.Names[0].Name != "" || a.Hot.Names[0].Key != "" || strings.Contains(raw, name) {
		t.Errorf("without WithNames: %s", raw)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The release handed the lock to the waiter if it was parked by then,
	// which is likely but not certain: rounds go on until one was, and the
	// page's counts agree with the Guard's.
	for round := 0; guard.Stats().Handoffs == 0 && round < 100; round++ {
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			next, err := l.Acquire(ctx, name)
			if err == nil {
				err = next.Release(ctx)
			}
			done <- err
		}()
		waitFor(t, named, "a local waiter", func(s lockdebug.Snapshot) bool { return s.Hot.Names[0].Waiters == 1 })
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s, _ = snapshot(t, named)
	if s.Hot.Handoffs < 1 || s.Waits.HandedOver != s.Hot.Handoffs || s.Waits.Releases["handed_off"] != s.Hot.Handoffs {
		t.Errorf("hand-offs: guard %d, window %d handed over, releases %v; want the same, at least 1", s.Hot.Handoffs, s.Waits.HandedOver, s.Waits.Releases)
	}
	if none, _ := snapshot(t, lockdebug.New()); none.Hot != nil {
		t.Errorf("a page without a Guard shows hot names: %+v", none.Hot)
	}
}

// TestPermitsAndShared: a lease of Permits(n) shows its slot of n, a
// shared hold its mode, on the JSON and the HTML page.
func TestPermitsAndShared(t *testing.T) {
	testmain.LeakCheck(t)
	page := lockdebug.New()
	l := newLocker(t, core.WithObservers(page))
	ctx := context.Background()
	var leases []*core.Lease
	defer func() {
		for _, lease := range leases {
			_ = lease.Release(ctx)
		}
	}()
	for _, opt := range []core.CallOption{core.Permits(3), core.Permits(3), core.Shared()} {
		name := uniq(t)
		if len(leases) == 1 {
			name = leases[0].Name() // the second permit of the same name
		}
		lease, err := l.Acquire(ctx, name, opt)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	s, raw := snapshot(t, page)
	modes := map[string]int{}
	slots := map[int]bool{}
	for _, got := range s.Held.Leases {
		modes[got.Mode]++
		if got.Mode == "permits" {
			if got.Permits != 3 || got.Slot < 0 || got.Slot > 2 {
				t.Errorf("permit: %+v", got)
			}
			slots[got.Slot] = true
		}
	}
	if modes["permits"] != 2 || modes["shared"] != 1 || len(slots) != 2 {
		t.Fatalf("modes %v, slots %v, want 2 permits in distinct slots and 1 shared:\n%s", modes, slots, raw)
	}
	html := get(t, page, http.MethodGet, "/debug/reqlock/").Body.String()
	for _, want := range []string{fmt.Sprintf("permit %d of 3", leases[0].Slot()), fmt.Sprintf("permit %d of 3", leases[1].Slot()), "<td>shared</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML lacks %q:\n%s", want, html)
		}
	}
}
