package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// BenchmarkAcquireRelease measures an uncontended Acquire and Release
// through a Locker, over a proxy that gives every call a round trip of 1 ms,
// with the lease pool (a released lease is renewed in parallel with the next
// acquisition's transaction) and without it (a grant per acquisition). It
// reports the calls to etcd per acquire and release.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []etcdstore.Option
	}{
		{"pool", nil},
		{"nopool", []etcdstore.Option{etcdstore.WithLeasePool(0)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			proxy := redistest.NewProxy(b, shared.Addr())
			proxy.SetDelay(500 * time.Microsecond)
			var n counter
			s := newStore(b, countingClient(b, proxy.Addr(), &n), bc.opts...)
			l := core.NewWithStore(s, core.WithTTL(10*time.Second))
			defer l.Close()
			ctx := context.Background()
			name := uniq(b)
			lease, err := l.Acquire(ctx, name) // connects, and fills the pool
			if err != nil {
				b.Fatal(err)
			}
			_ = lease.Release(ctx)
			n.take()
			b.ResetTimer()
			for range b.N {
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			unary, streams := n.take()
			b.ReportMetric(float64(unary+streams)/float64(b.N), "calls/op")
		})
	}
}
