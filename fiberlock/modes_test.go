package fiberlock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/fiberlock"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// TestModes runs the lock-mode scenarios (shared reads, permits, keys of
// several names, crossing orders) on a Fiber app.
func TestModes(t *testing.T) { adaptertest.RunModes(t, serveModes) }

func serveModes(_ *testing.T, l *core.Locker, routes []adaptertest.Route) (http.Handler, error) {
	app := newApp()
	for _, r := range routes {
		opts := modeOptions(r.Mode)
		if err := fiberlock.Check(l, r.Key, opts...); err != nil {
			return nil, err
		}
		lock := fiberlock.New(l, r.Key, opts...)
		for _, m := range r.Methods {
			app.Add(m, adaptertest.ColonPath(r.Path), lock, func(c *fiber.Ctx) error {
				// The scenario's handler sees the request as net/http has
				// it, with the context that carries the lease.
				req, err := http.NewRequestWithContext(c.UserContext(), c.Method(), c.OriginalURL(), nil)
				if err != nil {
					return err
				}
				req.Header.Set("X-Names", c.Get("X-Names"))
				r.Handle(req)
				return c.SendStatus(http.StatusOK)
			})
		}
	}
	return fiberHandler{app}, nil
}

func modeOptions(m adaptertest.Mode) []fiberlock.Option {
	opts := []fiberlock.Option{fiberlock.WithWait(m.Wait)}
	if m.Shared {
		opts = append(opts, fiberlock.WithShared())
	}
	if m.SharedReads {
		opts = append(opts, fiberlock.WithSharedReads())
	}
	if m.Permits != 0 {
		opts = append(opts, fiberlock.WithPermits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, fiberlock.WithMaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, fiberlock.WithRequestIDHeader(m.RequestIDHeader))
	}
	return opts
}

// fiberHandler serves net/http requests with a Fiber app, in process
// (app.Test, no timeout).
type fiberHandler struct{ app *fiber.App }

func (h fiberHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := h.app.Test(r, -1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// describe answers how the request is locked: the names of its lease, its
// mode and its slot ("a,b|shared|0"), "<none>" unlocked.
func describe(c *fiber.Ctx) error {
	l := fiberlock.Lease(c)
	if l == nil {
		return c.SendString("<none>")
	}
	return c.SendString(fmt.Sprintf("%s|%s|%d", strings.Join(l.Names(), ","), l.Mode(), l.Slot()))
}

// send sends a POST to app in process and returns the status and body.
func send(t *testing.T, app *fiber.App, path, body string) (int, string) {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestModesBesideOtherHolders: a route WithShared waits for a writer
// elsewhere and runs beside a reader elsewhere; a route WithPermits(3) is
// busy beside three permits elsewhere and refused (500) beside permits of
// another n; a request of two names is refused when one is held
// elsewhere, and then holds neither.
func TestModesBesideOtherHolders(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
	id, other := uniq(t), uniq(t)
	name := "order:" + keyfunc.Escape(id)
	short := fiberlock.WithWait(20 * time.Millisecond)

	shared := router(fiberlock.New(e.Locker, orderKey, fiberlock.WithShared(), short), describe)
	held := e.Hold(t, name)
	if code, got := send(t, shared, "/orders/"+id, ""); code != http.StatusConflict {
		t.Errorf("shared beside a writer: %d %q, want 409", code, got)
	}
	_ = held.Release(t.Context())
	share, err := e.Locker.Acquire(t.Context(), name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if code, got := send(t, shared, "/orders/"+id, ""); code != http.StatusOK || got != name+"|shared|0" {
		t.Errorf("shared beside a reader: %d %q, want a shared lease", code, got)
	}
	_ = share.Release(t.Context())

	for range 3 {
		lease, err := e.Locker.Acquire(t.Context(), name, core.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(t.Context())
	}
	if code, got := send(t, router(fiberlock.New(e.Locker, orderKey, fiberlock.WithPermits(3), short), describe), "/orders/"+id, ""); code != http.StatusConflict {
		t.Errorf("a fourth permit: %d %q, want 409", code, got)
	}
	if code, got := send(t, router(fiberlock.New(e.Locker, orderKey, fiberlock.WithPermits(5)), describe), "/orders/"+id, ""); code != http.StatusInternalServerError {
		t.Errorf("permits of another n: %d %q, want 500 (a mode mismatch)", code, got)
	}

	app := newApp()
	app.Post("/transfers/:from/:to", fiberlock.New(e.Locker, must(keyfunc.Templates("order:{param.from}", "order:{param.to}")), short), describe)
	busy := e.Hold(t, "order:"+keyfunc.Escape(other))
	first := uniq(t)
	if code, got := send(t, app, "/transfers/"+first+"/"+other, ""); code != http.StatusConflict {
		t.Errorf("one name of two busy: %d %q, want 409", code, got)
	}
	if e.Exists(t, "order:"+keyfunc.Escape(first)) {
		t.Errorf("order:%s left held by a request that was refused", first)
	}
	_ = busy.Release(t.Context())
	free := uniq(t)
	if code, got := send(t, app, "/transfers/"+free+"/"+other, ""); code != http.StatusOK || !strings.Contains(got, "order:"+free) || !strings.Contains(got, "order:"+other) {
		t.Errorf("two free names: %d %q, want both held", code, got)
	}

	if err := fiberlock.Check(e.Locker, orderKey, fiberlock.WithSharedIf(nil)); err == nil || !strings.HasPrefix(err.Error(), "fiberlock: ") {
		t.Errorf("WithSharedIf(nil): Check = %v, want a fiberlock error", err)
	}
}
