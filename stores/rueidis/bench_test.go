package rueidisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// BenchmarkAcquireRelease measures an uncontended TryAcquire and Release on
// the tests' redis-server over loopback, through rueidis and through the
// go-redis store (stores/redis), with the round trips per operation (rt/op).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("rueidis/fenced=%v", fenced), func(b *testing.B) {
			rc := &counting{Client: newClient(b, shared.Addr())}
			bench(b, newStore(b, rc), fenced, rc.n.Load)
		})
		b.Run(fmt.Sprintf("go-redis/fenced=%v", fenced), func(b *testing.B) {
			gc := shared.Client(b)
			rt := &redistest.RoundTrips{}
			gc.AddHook(rt)
			gs := core.NewRedisStore(gc)
			b.Cleanup(func() { _ = gs.(interface{ Close() error }).Close() })
			bench(b, gs, fenced, rt.N.Load)
		})
	}
}

func bench(b *testing.B, s core.Store, fenced bool, roundTrips func() int64) {
	ctx := context.Background()
	key := "bench:{" + uniq(b) + "}"
	if _, _, err := s.TryAcquire(ctx, key, "warm", time.Minute, fenced); err != nil { // caches the scripts
		b.Fatal(err)
	}
	if _, err := s.Release(ctx, key, "warm"); err != nil {
		b.Fatal(err)
	}
	before := roundTrips()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok := fmt.Sprint(i)
		if ok, _, err := s.TryAcquire(ctx, key, tok, time.Minute, fenced); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if ok, err := s.Release(ctx, key, tok); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(roundTrips()-before)/float64(b.N), "rt/op")
}
