package scale

import (
	"testing"

	"github.com/reqlock/reqlock/internal/redistest"
)

// BenchmarkMiddleware is the middleware section as Go benchmarks, on a
// redis-server of its own over loopback: each server locked, by hand and bare (no Redis),
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
		f    func(*testing.B, string, Mode)
	}{{"gin", BenchGin}, {"net-http", BenchHTTP}, {"grpc-unary", BenchGRPC}} {
		for _, m := range []Mode{Locked, ByHand, Bare} {
			b.Run(s.name+"/"+string(m), func(b *testing.B) { s.f(b, addr, m) })
		}
	}
	for _, impl := range []string{"hand", "reqlock", "bsm/redislock"} {
		b.Run("commands/"+impl, func(b *testing.B) { BenchCommands(b, addr, impl) })
	}
}
