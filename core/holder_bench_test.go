package core_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// BenchmarkHolderIdentity measures what the holder record in every token
// costs an uncontended acquire+release on a real redis-server over
// loopback, before and after in the same run: plain is a Locker with
// core.WithoutHolder (26-character random tokens), holder the default. Both
// acquire with a route label and a request id, as an adapter does, so that
// they differ only by the record. Both make the same round trips
// (roundtrips/op); token-bytes is the length of a lease's token.
//
// On a shared machine the time of one sub-benchmark drifts with the load
// of the moment; paired alternates the two Lockers, one cycle each, so that
// they share it, and reports the median time of a cycle of each
// (plain-ns/cycle, holder-ns/cycle) and their ratio (holder/plain). Run
// them in one command:
//
//	go test ./core -run '^$' -bench HolderIdentity -benchmem -count 5 -benchtime 2000x
func BenchmarkHolderIdentity(b *testing.B) {
	ctx := context.Background()
	call := []core.CallOption{core.Route("/orders/:id"), core.RequestID("4bf92f3577b34da6a3ce929d0e0e4736")}
	cycle := func(b *testing.B, l *core.Locker, name string) int {
		lease, err := l.Acquire(ctx, name, call...)
		if err != nil {
			b.Fatal(err)
		}
		n := len(lease.Token())
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return n
	}
	for _, bc := range []struct {
		name string
		opts []core.Option
	}{
		{"plain", []core.Option{core.WithoutHolder()}},
		{"holder", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, nil, bc.opts...)
			var tokenLen int
			benchCycle(b, e, func(name string) { tokenLen = cycle(b, e.locker, name) })
			b.ReportMetric(float64(tokenLen), "token-bytes")
		})
	}
	b.Run("paired", func(b *testing.B) {
		plain, holder := newEnv(b, nil, core.WithoutHolder()).locker, newEnv(b, nil).locker
		names := make([]string, 1024)
		for i := range names {
			names[i] = "bench:" + strconv.Itoa(i)
		}
		cycle(b, plain, names[0]) // loads the scripts
		cycle(b, holder, names[0])
		times := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
		b.ResetTimer()
		lockers := [2]*core.Locker{plain, holder}
		for i := 0; i < b.N; i++ {
			order := [2]int{0, 1}
			if i%2 == 1 { // holder first every other time
				order = [2]int{1, 0}
			}
			for _, k := range order {
				start := time.Now()
				cycle(b, lockers[k], names[i%len(names)])
				times[k] = append(times[k], time.Since(start))
			}
		}
		b.StopTimer()
		median := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2])
		}
		p, h := median(times[0]), median(times[1])
		b.ReportMetric(p, "plain-ns/cycle")
		b.ReportMetric(h, "holder-ns/cycle")
		b.ReportMetric(h/p, "holder/plain")
	})
}
