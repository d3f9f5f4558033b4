package hotspot_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/reqlock/reqlock/hotspot"
)

// BenchmarkGuardOverhead measures what the Guard adds to an acquire and
// release in the process, without Redis: one Enter and one Leave, as the
// Locker calls them around its store calls. "cold" names are never contended
// (the common case: a hash, an atomic add and a map lookup; the turn is the
// name's bucket of the in-flight sketch, with no allocation); "hot" names go
// through their local lock. Run it with
//
//	go test ./hotspot -run '^$' -bench GuardOverhead -benchmem
func BenchmarkGuardOverhead(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "reqlock:{order:" + strconv.Itoa(i) + "}"
	}
	deadline := time.Now().Add(time.Hour)
	for _, mode := range []string{"cold", "hot"} {
		b.Run(mode, func(b *testing.B) {
			var g *hotspot.Guard
			if mode == "hot" {
				g = hotspot.New(hotspot.WithKeys(keys...)) // names equal to keys here
			} else {
				g = hotspot.New()
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				key := keys[i%len(keys)]
				turn, err := g.Enter(ctx, key, key, deadline)
				if err != nil {
					b.Fatal(err)
				}
				if turn != nil {
					turn.Leave()
				}
			}
		})
	}
}
