package echo5lock_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/reqlock/reqlock/echo5lock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// BenchmarkMiddleware measures what the middleware adds to an uncontended
// request on a real redis-server: the same route with a pass-through
// middleware ("bare") and with echo5lock ("locked"), served over loopback
// HTTP ("server") and called in process ("inproc"), with the Redis round
// trips per request (roundtrips/op). Compare bare and locked with benchstat:
//
//	go test ./echo5lock -run '^$' -bench Middleware -count 5 | tee bench.txt
//	benchstat -col /mw bench.txt
func BenchmarkMiddleware(b *testing.B) {
	e := adaptertest.NewEnv(b, nil)
	ids := make([]string, 1024) // distinct orders, as real traffic has
	for i := range ids {
		ids[i] = "bench" + strconv.Itoa(i)
	}
	handler := func(c *echo.Context) error { return c.NoContent(http.StatusOK) }
	for _, via := range []string{"server", "inproc"} {
		for _, mw := range []struct {
			name string
			f    echo.MiddlewareFunc
		}{
			{"bare", func(next echo.HandlerFunc) echo.HandlerFunc { return func(c *echo.Context) error { return next(c) } }},
			{"locked", echo5lock.New(e.Locker, orderKey)},
		} {
			b.Run("via="+via+"/mw="+mw.name, func(b *testing.B) {
				h := router(mw.f, handler)
				call := func(id string) int {
					w := do(h, context.Background(), "/orders/"+id, "")
					return w.Code
				}
				if via == "server" {
					srv := httptest.NewServer(h)
					defer srv.Close()
					client := srv.Client()
					call = func(id string) int {
						resp, err := client.Post(srv.URL+"/orders/"+id, "", nil)
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
