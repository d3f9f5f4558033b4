package kratoslock_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/go-kratos/kratos/v2/middleware"

	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/kratoslock"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

// BenchmarkMiddleware measures what the middleware adds to an uncontended
// request on a real redis-server, over loopback on each of Kratos's
// transports: the same handler behind a pass-through middleware ("bare") and
// behind kratoslock ("locked"), with the Redis round trips per request
// (roundtrips/op). Compare bare and locked with benchstat:
//
//	go test ./kratoslock -run '^$' -bench Middleware -count 5 | tee bench.txt
//	benchstat -col /mw bench.txt
func BenchmarkMiddleware(b *testing.B) {
	e := adaptertest.NewEnv(b, nil)
	ids := make([]string, 1024) // distinct orders, as real traffic has
	for i := range ids {
		ids[i] = "bench" + strconv.Itoa(i)
	}
	ok := func(context.Context, *testsvc.Request) (*testsvc.Reply, error) { return &testsvc.Reply{}, nil }
	for _, via := range []string{"http", "grpc"} {
		for _, mw := range []struct {
			name string
			m    middleware.Middleware
		}{
			{"bare", func(next middleware.Handler) middleware.Handler { return next }},
			{"locked", kratoslock.Server(e.Locker, orderKey)},
		} {
			b.Run("via="+via+"/mw="+mw.name, func(b *testing.B) {
				var call func(id string) error
				if via == "http" {
					c := serveHTTP(b, ok, mws(mw.m))
					call = func(id string) error {
						a, err := c.do(context.Background(), "1", id, "")
						if err == nil && a.Status != http.StatusOK {
							b.Fatalf("status %d", a.Status)
						}
						return err
					}
				} else {
					c := serveGRPC(b, ok, mws(mw.m))
					call = func(id string) error { _, err := c.Do(context.Background(), order(id)); return err }
				}
				if err := call(ids[0]); err != nil { // warm up the connection
					b.Fatal(err)
				}
				e.RT.N.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := call(ids[i%len(ids)]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(e.RT.N.Load())/float64(b.N), "roundtrips/op")
			})
		}
	}
}
