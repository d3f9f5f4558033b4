package core_test

import (
	"context"
	"testing"

	"github.com/reqlock/reqlock/core"
)

// BenchmarkHolderIdentity measures what the holder record in every token
// costs an uncontended acquire+release on a real redis-server over
// loopback, before and after in the same run: plain is a Locker with
// core.WithoutHolder (26-character random tokens), holder the default. Both
// acquire with a route label and a request id, as an adapter does, so that
// they differ only by the record. Both make the same round trips
// (roundtrips/op); token-bytes is the length of a lease's token. Run both in one command, so that they share the machine's state:
//
//	go test ./core -run '^$' -bench HolderIdentity -benchmem -count 5 -benchtime 2000x
func BenchmarkHolderIdentity(b *testing.B) {
	ctx := context.Background()
	call := []core.CallOption{core.Route("/orders/:id"), core.RequestID("4bf92f3577b34da6a3ce929d0e0e4736")}
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
			benchCycle(b, e, func(name string) {
				lease, err := e.locker.Acquire(ctx, name, call...)
				if err != nil {
					b.Fatal(err)
				}
				tokenLen = len(lease.Token())
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(tokenLen), "token-bytes")
		})
	}
}
