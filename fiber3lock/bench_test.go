package fiber3lock_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlock/reqlock/fiber3lock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// serve serves app on a loopback listener until the test ends, and returns
// its URL and a client of its own.
func serve(tb testing.TB, app *fiber.App) (string, *http.Client) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	app.Server().MaxIdleWorkerDuration = 10 * time.Millisecond // its cleaner then ends soon after Shutdown
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	client := &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(func() {
		client.CloseIdleConnections()
		_ = app.Shutdown()
		<-done
	})
	return "http://" + ln.Addr().String(), client
}

// BenchmarkMiddleware measures what the middleware adds to an uncontended
// request on a real redis-server: the same route with a pass-through
// handler ("bare") and with fiber3lock ("locked") before the route's handler,
// served over loopback HTTP ("server") and called in process with app.Test
// ("inproc"), with the Redis round trips per request (roundtrips/op).
// Compare bare and locked with benchstat:
//
//	go test ./fiber3lock -run '^$' -bench Middleware -count 5 | tee bench.txt
//	benchstat -col /mw bench.txt
func BenchmarkMiddleware(b *testing.B) {
	e := adaptertest.NewEnv(b, nil)
	ids := make([]string, 1024) // distinct orders, as real traffic has
	for i := range ids {
		ids[i] = "bench" + strconv.Itoa(i)
	}
	handler := func(c fiber.Ctx) error { return c.SendStatus(http.StatusOK) }
	for _, via := range []string{"server", "inproc"} {
		for _, mw := range []struct {
			name string
			f    fiber.Handler
		}{
			{"bare", func(c fiber.Ctx) error { return c.Next() }},
			{"locked", fiber3lock.New(e.Locker, orderKey)},
		} {
			b.Run("via="+via+"/mw="+mw.name, func(b *testing.B) {
				app := router(mw.f, handler)
				call := func(id string) int {
					resp, err := app.Test(httptest.NewRequest(http.MethodPost, "/orders/"+id, nil), fiber.TestConfig{})
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}
				if via == "server" {
					url, client := serve(b, app)
					call = func(id string) int {
						resp, err := client.Post(url+"/orders/"+id, "", nil)
						if err != nil {
							b.Fatal(err)
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						return resp.StatusCode
					}
				}
				call(ids[0]) // warm up the connection
				e.RT.N.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if code := call(ids[i%len(ids)]); code != http.StatusOK {
						b.Fatalf("status %d", code)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(e.RT.N.Load())/float64(b.N), "roundtrips/op")
			})
		}
	}
}
