package connectlock_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/connectlock"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// bare is a pass-through interceptor: the baseline of the benchmark.
var bare = connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) { return next(ctx, req) }
})

// BenchmarkInterceptor measures what the interceptor adds to an uncontended
// unary call on a real redis-server, over loopback HTTP/1.1 and h2c: the
// same handler behind a pass-through interceptor ("bare") and behind
// connectlock ("locked"), with the Redis round trips per call
// (roundtrips/op). Compare bare and locked with benchstat:
//
//	go test ./connectlock -run '^$' -bench Interceptor -count 5 | tee bench.txt
//	benchstat -col /mw bench.txt
func BenchmarkInterceptor(b *testing.B) {
	e := adaptertest.NewEnv(b, nil)
	reqs := make([]*connect.Request[testsvc.Request], 1024) // distinct orders, as real traffic has
	for i := range reqs {
		reqs[i] = connect.NewRequest(order("bench" + strconv.Itoa(i)))
	}
	svc := &service{do: func(context.Context, *testsvc.Request) (*testsvc.Reply, error) { return &testsvc.Reply{}, nil }}
	for _, via := range []string{"http1", "h2c"} {
		for _, mw := range []struct {
			name string
			icpt connect.Interceptor
		}{
			{"bare", bare},
			{"locked", connectlock.NewInterceptor(e.Locker, orderKey)},
		} {
			b.Run("via="+via+"/mw="+mw.name, func(b *testing.B) {
				url, hc := serveURL(b, svc, with(mw.icpt))
				if via == "http1" {
					tr := &http.Transport{}
					defer tr.CloseIdleConnections()
					hc = &http.Client{Transport: tr}
				}
				client := testsvcconnect.NewTestClient(hc, url)
				ctx := context.Background()
				if _, err := client.Do(ctx, reqs[0]); err != nil { // warm up the connection
					b.Fatal(err)
				}
				e.RT.N.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := client.Do(ctx, reqs[i%len(reqs)]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(e.RT.N.Load())/float64(b.N), "roundtrips/op")
			})
		}
	}
}
