package fiber3lock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/fiber3lock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// send sends a request with method to app in process and returns the
// status and body.
func send(app *fiber.App, method, path, body string) (int, string, error) {
	resp, err := app.Test(httptest.NewRequest(method, path, strings.NewReader(body)), fiber.TestConfig{})
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// sendOK is send, with any status but 200 as an error.
func sendOK(app *fiber.App, method, path, body string) (string, error) {
	code, got, err := send(app, method, path, body)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %s", method, path, code, got)
	}
	return got, err
}

// describe answers how the request is locked: the names of its lease, its
// mode and its slot ("a,b|shared|0"), "<none>" unlocked.
func describe(c fiber.Ctx) error {
	l := fiber3lock.Lease(c)
	if l == nil {
		return c.SendString("<none>")
	}
	return c.SendString(fmt.Sprintf("%s|%s|%d", strings.Join(l.Names(), ","), l.Mode(), l.Slot()))
}

// readWrite watches the critical sections of the readers and writers of one
// name: a writer beside anyone, or a reader beside a writer, is a
// violation. Each side counts itself in before it looks at the other, so
// that of two sections that overlap, at least one sees the other.
type readWrite struct {
	readers, writers atomic.Int64
	violations       atomic.Int64
}

func (rw *readWrite) read() {
	rw.readers.Add(1)
	defer rw.readers.Add(-1)
	for range 2 {
		if rw.writers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
	}
}

func (rw *readWrite) write() {
	if rw.writers.Add(1) > 1 {
		rw.violations.Add(1)
	}
	defer rw.writers.Add(-1)
	for range 2 {
		if rw.readers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond)
	}
}

// concurrently runs f(i) for i in [0, n) at once and returns the errors.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// TestSharedReadsOverlapWritesAlone: with WithSharedReads, GET requests of
// an order run together (three meet at a barrier inside the handler), and
// a PUT of the order never runs beside any of them nor beside another PUT.
func TestSharedReadsOverlapWritesAlone(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	path := "/orders/" + uniq(t)
	var rw readWrite
	var meet atomic.Pointer[adaptertest.Barrier]
	lock := fiber3lock.New(e.Locker, orderKey, fiber3lock.WithSharedReads())
	app := newApp()
	app.Get("/orders/:id", lock, func(c fiber.Ctx) error {
		if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
			return c.Status(http.StatusPreconditionFailed).SendString("the readers did not run together")
		}
		rw.read()
		return describe(c)
	})
	app.Put("/orders/:id", lock, func(c fiber.Ctx) error {
		rw.write()
		return describe(c)
	})

	meet.Store(adaptertest.NewBarrier(3))
	for _, err := range concurrently(3, func(int) error {
		got, err := sendOK(app, http.MethodGet, path, "")
		if err == nil && !strings.HasSuffix(got, "|shared|0") {
			err = fmt.Errorf("the reader's lease is %q, want a shared one", got)
		}
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	meet.Store(nil)
	if got, err := sendOK(app, http.MethodPut, path, ""); err != nil || !strings.HasSuffix(got, "|exclusive|0") {
		t.Fatalf("PUT: %q, %v; want an exclusive lease", got, err)
	}

	for _, err := range concurrently(12, func(i int) error {
		method := http.MethodGet
		if i%3 == 0 {
			method = http.MethodPut
		}
		_, err := sendOK(app, method, path, "")
		return err
	}) {
		if err != nil {
			t.Error(err)
		}
	}
	if n := rw.violations.Load(); n != 0 {
		t.Fatalf("%d times a writer ran beside another holder", n)
	}
}

// TestSharedRoute: a route WithShared reads beside readers elsewhere, not
// beside a writer; the modes' options are checked at New.
func TestSharedRoute(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id := uniq(t)
	name := "order:" + keyfunc.Escape(id)
	app := router(fiber3lock.New(e.Locker, orderKey, fiber3lock.WithShared(), fiber3lock.WithWait(20*time.Millisecond)), describe)
	held := e.Hold(t, name)
	if code, got, err := send(app, http.MethodPost, "/orders/"+id, ""); err != nil || code != http.StatusConflict {
		t.Errorf("beside a writer: %d %q, %v; want 409", code, got, err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	share, err := e.Locker.Acquire(t.Context(), name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer share.Release(t.Context())
	if got, err := sendOK(app, http.MethodPost, "/orders/"+id, ""); err != nil || got != name+"|shared|0" {
		t.Errorf("beside a reader: %q, %v; want a shared lease", got, err)
	}

	for _, opts := range [][]fiber3lock.Option{
		{fiber3lock.WithSharedIf(nil)},
		{fiber3lock.WithShared(), fiber3lock.WithSharedReads()},
		{fiber3lock.WithPermits(0)},
		{fiber3lock.WithMaxNames(0)},
	} {
		if err := fiber3lock.Check(e.Locker, orderKey, opts...); err == nil || !strings.HasPrefix(err.Error(), "fiber3lock: ") {
			t.Errorf("%d options: Check = %v, want a fiber3lock error", len(opts), err)
		}
	}
}

// TestPermits: with WithPermits(3), three requests hold the name at once,
// in slots 0, 1 and 2; never more than three, never two in one slot; a
// fourth beside three holders elsewhere is answered 409.
func TestPermits(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	id := uniq(t)
	var (
		meet       atomic.Pointer[adaptertest.Barrier]
		mu         sync.Mutex
		inside     = map[int]bool{}
		violations int
	)
	app := router(fiber3lock.New(e.Locker, orderKey, fiber3lock.WithPermits(3)), func(c fiber.Ctx) error {
		slot := fiber3lock.Lease(c).Slot()
		mu.Lock()
		if inside[slot] || len(inside) >= 3 {
			violations++
		}
		inside[slot] = true
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(inside, slot)
			mu.Unlock()
		}()
		if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
			return c.Status(http.StatusPreconditionFailed).SendString("the permit holders did not run together")
		}
		time.Sleep(time.Millisecond)
		return describe(c)
	})

	meet.Store(adaptertest.NewBarrier(3))
	var slots []string
	var smu sync.Mutex
	for _, err := range concurrently(3, func(int) error {
		got, err := sendOK(app, http.MethodPost, "/orders/"+id, "")
		if err == nil {
			smu.Lock()
			slots = append(slots, got[strings.LastIndexByte(got, '|')+1:])
			smu.Unlock()
		}
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if slices.Sort(slots); !slices.Equal(slots, []string{"0", "1", "2"}) {
		t.Errorf("slots of three holders at once: %q, want 0, 1 and 2", slots)
	}
	meet.Store(nil)

	for _, err := range concurrently(12, func(int) error {
		_, err := sendOK(app, http.MethodPost, "/orders/"+id, "")
		return err
	}) {
		if err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	n := violations
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d times a holder entered a slot in use or beside 3 others", n)
	}

	for range 3 {
		lease, err := e.Locker.Acquire(t.Context(), "order:"+keyfunc.Escape(id), core.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(t.Context())
	}
	busy := router(fiber3lock.New(e.Locker, orderKey, fiber3lock.WithPermits(3), fiber3lock.WithWait(20*time.Millisecond)), describe)
	if code, got, err := send(busy, http.MethodPost, "/orders/"+id, ""); err != nil || code != http.StatusConflict {
		t.Fatalf("a fourth holder: %d %q, %v; want 409", code, got, err)
	}
	other := router(fiber3lock.New(e.Locker, orderKey, fiber3lock.WithPermits(5)), describe)
	if code, got, err := send(other, http.MethodPost, "/orders/"+id, ""); err != nil || code != http.StatusInternalServerError {
		t.Fatalf("another n: %d %q, %v; want 500 (a mode mismatch)", code, got, err)
	}
}

// TestSeveralNames: a key of two path parameters, or of every item of a
// JSON array, locks all its names at once, all or none.
func TestSeveralNames(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	a, b := uniq(t), uniq(t)
	for _, tc := range []struct {
		name, route, path, body string
		key                     keyfunc.Func
		names                   []string
	}{
		{"two parameters", "/transfers/:from/:to", "/transfers/" + b + "/" + a, "",
			must(keyfunc.Templates("order:{param.from}", "order:{param.to}")), []string{"order:" + a, "order:" + b}},
		{"array items", "/carts/:id", "/carts/1", `{"items":[{"sku":"` + a + `"},{"sku":"` + b + `"},{"sku":"` + a + `"}]}`,
			must(keyfunc.Template("item:{field.items[*].sku}")), []string{"item:" + a, "item:" + b}}, // a repeated item is taken once
	} {
		t.Run(tc.name, func(t *testing.T) {
			var heldInside []bool
			app := newApp()
			app.Post(tc.route, fiber3lock.New(e.Locker, tc.key, fiber3lock.WithWait(20*time.Millisecond)), func(c fiber.Ctx) error {
				for _, n := range tc.names {
					heldInside = append(heldInside, e.Exists(t, n))
				}
				return describe(c)
			})
			got, err := sendOK(app, http.MethodPost, tc.path, tc.body)
			names, mode, _ := strings.Cut(got, "|")
			covered := strings.Split(names, ",")
			slices.Sort(covered)
			want := slices.Sorted(slices.Values(tc.names))
			if err != nil || !slices.Equal(covered, want) || mode != "exclusive|0" || slices.Contains(heldInside, false) || len(heldInside) != 2 {
				t.Errorf("got %q, %v (held inside: %v); want the names %q, all held", got, err, heldInside, want)
			}
			for _, n := range tc.names {
				if e.Exists(t, n) {
					t.Errorf("%s still held after the request", n)
				}
			}

			// One name busy: the request is answered 409 and holds none of them.
			held := e.Hold(t, tc.names[1])
			if code, got, err := send(app, http.MethodPost, tc.path, tc.body); err != nil || code != http.StatusConflict {
				t.Errorf("one name busy: %d %q, %v; want 409", code, got, err)
			}
			if e.Exists(t, tc.names[0]) {
				t.Errorf("%s left held by a request that was refused", tc.names[0])
			}
			_ = held.Release(t.Context())
		})
	}

	cart := must(keyfunc.Template("item:{field.items[*].sku}"))
	for body, opts := range map[string][]fiber3lock.Option{
		`{"items":[]}`:                        nil,
		`{"items":[{"sku":"a"},{"sku":""}]}`:  nil,
		`{"items":[{"sku":"a"},{"sku":"b"}]}`: {fiber3lock.WithMaxNames(1)},
		`{"items":{"sku":"a"}}`:               nil,
	} {
		app := router(fiber3lock.New(e.Locker, cart, opts...), describe)
		if code, got, err := send(app, http.MethodPost, "/orders/1", body); err != nil || code != http.StatusBadRequest {
			t.Errorf("%s: %d %q, %v; want 400", body, code, got, err)
		}
	}
}
