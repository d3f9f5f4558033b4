package memcachedstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAcquireRelease measures an uncontended TryAcquire and Release on
// the tests' memcached over loopback, with its round trips per operation
// (rt/op), plain and fenced.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%v", fenced), func(b *testing.B) {
			client, n := counted(b, shared.Addr())
			s := storeOn(b, client)
			key := uniq(b)
			ctx := context.Background()
			if ok, _, err := s.TryAcquire(ctx, key, "warm", time.Minute, fenced); err != nil || !ok { // the counter exists
				b.Fatal(ok, err)
			}
			if _, err := s.Release(ctx, key, "warm"); err != nil {
				b.Fatal(err)
			}
			n.Store(0)
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
			b.ReportMetric(float64(n.Load())/float64(b.N), "rt/op")
		})
	}
}
