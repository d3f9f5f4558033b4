package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The plain spin lock of the Redis documentation written straight on go-redis, as the peer that
// reqlock's uncontended path is compared with in the same run: SET NX PX, then
// a compare-and-delete script.
var plainRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// BenchmarkAcquireRelease measures one uncontended acquire+release on a real
// redis-server, with the round trips it makes (roundtrips/op). Run it with
//
//	go test ./core -run '^$' -bench AcquireRelease -benchmem
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("reqlock", func(b *testing.B) {
		e := newEnv(b, nil)
		benchCycle(b, e, func(name string) {
			lease, err := e.locker.Acquire(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("plain-spin", func(b *testing.B) {
		e := newEnv(b, nil)
		benchCycle(b, e, func(name string) {
			ok, err := e.client.SetNX(ctx, name, "token", 10*time.Second).Result()
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := plainRelease.Run(ctx, e.client, []string{name}, "token").Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func benchCycle(b *testing.B, e *env, cycle func(name string)) {
	names := make([]string, 1024) // distinct names, as distinct orders would be
	for i := range names {
		names[i] = "bench:" + strconv.Itoa(i)
	}
	cycle(names[0]) // loads the scripts
	e.rt.N.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cycle(names[i%len(names)])
	}
	b.StopTimer()
	b.ReportMetric(float64(e.rt.N.Load())/float64(b.N), "roundtrips/op")
}
