package lockbench

import (
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// BenchmarkUncontended is the uncontended scenario as a Go benchmark: one
// goroutine acquires and releases distinct names in turn, for every
// implementation (and reqlock with WithFair) in the same run, on the same
// redis-server, without the delaying proxy. With -benchmem, allocs/op and
// B/op are per acquire+release, counted over the whole process (go-redis's
// own goroutines included); roundtrips/op counts the client's commands.
//
//	cd benchmarks && go test ./lockbench -run '^$' -bench Uncontended -benchmem
func BenchmarkUncontended(b *testing.B) {
	srv, err := redistest.Launch()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	impls := append([]Impl(nil), Impls...)
	impls = append(impls, Impl{Name: "reqlock+fair", Open: openReqlock([]core.Option{core.WithFair()})})
	for _, impl := range impls {
		b.Run(impl.Name, func(b *testing.B) { benchUncontended(b, srv.Addr(), impl) })
	}
}

func benchUncontended(b *testing.B, addr string, impl Impl) {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	rt := &RoundTrips{}
	client.AddHook(rt)
	lock, err := impl.Open(&Env{Addr: addr, Params: DefaultParams(), Client: client, RoundTrips: rt})
	if err != nil {
		b.Fatal(err)
	}
	if c, ok := lock.(io.Closer); ok {
		defer c.Close()
	}
	names := make([]string, 1024) // distinct names, as distinct orders would be
	for i := range names {
		names[i] = "uncontended:" + impl.Name + ":" + strconv.Itoa(i)
	}
	cycle := func(name string) {
		release, err := lock.Acquire(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if err := release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range names[:8] { // connections dialled, scripts loaded
		cycle(name)
	}
	before := rt.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cycle(names[i%len(names)])
	}
	b.StopTimer()
	b.ReportMetric(float64(rt.Load()-before)/float64(b.N), "roundtrips/op")
}
