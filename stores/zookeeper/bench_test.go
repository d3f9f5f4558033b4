package zkstore_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/internal/redistest"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// BenchmarkAcquireRelease measures an uncontended TryAcquire and Release
// over a proxy that delays each direction by 2 ms, and reports the round
// trips per acquire and release (round-trips/op: the time per operation
// over that of one read, an exists, on the same connection). A foreign
// child keeps the
// key's parent node, so that ZooKeeper never deletes it between two
// iterations: the steady state of a key in use.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		name := "plain"
		if fenced {
			name = "fenced"
		}
		b.Run(name, func(b *testing.B) {
			proxy := redistest.NewProxy(b, shared.Addr())
			r := root(b)
			conn := dial(b, proxy.Addr(), 0)
			s := newStore(b, conn, zkstore.WithRoot(r))
			key := "bench"
			keep(b, s, r, key)
			proxy.SetDelay(2 * time.Millisecond)
			rt := roundTrip(b, conn, r)
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				tok := rand.Text()
				if ok, _, err := s.TryAcquire(ctx, key, tok, time.Minute, fenced); !ok || err != nil {
					b.Fatalf("TryAcquire: %v, %v", ok, err)
				}
				if ok, err := s.Release(ctx, key, tok); !ok || err != nil {
					b.Fatalf("Release: %v, %v", ok, err)
				}
			}
			b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(rt), "round-trips/op")
		})
	}
}

// keep makes key's parent node under root (s's) and gives it a child that is
// not a contender's, so that ZooKeeper never deletes it as an empty
// container.
func keep(b *testing.B, s *zkstore.Store, root, key string) {
	b.Helper()
	tok := rand.Text()
	if ok, _, err := s.TryAcquire(context.Background(), key, tok, time.Minute, false); !ok || err != nil {
		b.Fatalf("TryAcquire: %v, %v", ok, err)
	}
	conn := dial(b, "", 0)
	dir := root + "/" + key
	if _, err := conn.Create(dir+"/keep", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Delete(dir+"/keep", -1) })
	if ok, err := s.Release(context.Background(), key, tok); !ok || err != nil {
		b.Fatalf("Release: %v, %v", ok, err)
	}
}

// roundTrip returns the mean time of an exists of p on conn.
func roundTrip(b *testing.B, conn *zk.Conn, p string) time.Duration {
	b.Helper()
	const n = 20
	start := time.Now()
	for range n {
		if _, _, err := conn.Exists(p); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / n
}
