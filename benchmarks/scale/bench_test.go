package scale

import (
	"testing"

	"github.com/reqlock/reqlock/internal/redistest"
)

// BenchmarkMiddleware is the middleware section as Go benchmarks, on a
// redis-server of its own over loopback: each server locked and by hand,
// then the two commands alone by hand, through reqlock and through
// bsm/redislock.
//
//	cd benchmarks && go test ./scale -run '^$' -bench Middleware -benchmem
func BenchmarkMiddleware(b *testing.B) {
	srv, err := redistest.Launch()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr()
	for _, s := range []struct {
		name string
		f    func(*testing.B, string, bool)
	}{{"gin", BenchGin}, {"net-http", BenchHTTP}, {"grpc-unary", BenchGRPC}} {
		b.Run(s.name+"/locked", func(b *testing.B) { s.f(b, addr, true) })
		b.Run(s.name+"/by-hand", func(b *testing.B) { s.f(b, addr, false) })
	}
	for _, impl := range []string{"hand", "reqlock", "bsm/redislock"} {
		b.Run("bare/"+impl, func(b *testing.B) { BenchBare(b, addr, impl) })
	}
}
