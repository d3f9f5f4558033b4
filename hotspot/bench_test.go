package hotspot_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// BenchmarkGuardOverhead measures what the Guard adds to an acquire and
// release in the process, without Redis: the inner link hands back one lease
// taken beforehand. "cold" names are never contended (the common case: a
// hash, an atomic add and a map lookup); "hot" names go through their local
// lock. Run it with
//
//	go test ./hotspot -run '^$' -bench GuardOverhead -benchmem
func BenchmarkGuardOverhead(b *testing.B) {
	ctx := context.Background()
	l := core.New(shared.Client(b))
	lease, err := l.Acquire(ctx, uniq(b))
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release(ctx)
	next := func(context.Context, *core.Request) (*core.Lease, error) { return lease, nil }
	release := func(context.Context, *core.Lease) error { return nil }
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "reqlock:{order:" + strconv.Itoa(i) + "}"
	}
	for _, mode := range []string{"cold", "hot"} {
		b.Run(mode, func(b *testing.B) {
			var g *hotspot.Guard
			if mode == "hot" {
				g = hotspot.New(hotspot.WithKeys(keys...)) // names equal to keys here
			} else {
				g = hotspot.New()
			}
			req := &core.Request{TTL: time.Second, Deadline: time.Now().Add(time.Hour)}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req.Name, req.Key = keys[i%len(keys)], keys[i%len(keys)]
				got, err := g.Acquire(ctx, req, next)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Release(ctx, got, release); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
