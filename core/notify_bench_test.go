package core_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

// attemptHook signals every attempt the waiter's client has sent and got a
// reply to (the acquire script of a first attempt, SET of a later one; its
// only other command is the release that ends the wait): the waiter has
// failed an attempt and is about to sleep.
type attemptHook struct{ sets chan struct{} }

func (h attemptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h attemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name == "set" || name == "evalsha" || name == "eval" {
			select {
			case h.sets <- struct{}{}:
			default:
			}
		}
		return err
	}
}

func (h attemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// BenchmarkWakeUp measures how long a waiter takes to get a name once its
// holder releases it, with the random sleep alone (10–20 ms, the
// default) and with WithNotify, alternating the two in one run so that both
// see the same machine. The release comes at a random moment of the
// waiter's sleep, as it would in production. Reported per variant: the mean
// time from the release call to the waiter holding the lock, the waiter's
// attempts, and spin/notify, the ratio of the two means. Run it with
//
//	go test ./core -run '^$' -bench WakeUp -benchtime 100x
func BenchmarkWakeUp(b *testing.B) {
	ctx := context.Background()
	srv := shared
	holder := core.New(srv.Client(b), core.WithNotify()) // every release publishes, for both variants
	b.Cleanup(func() { _ = holder.Close() })
	admin := srv.Client(b)
	type variant struct {
		name     string
		locker   *core.Locker
		failed   chan struct{} // the waiter's first attempt failed
		wake     time.Duration // summed over the iterations
		attempts atomic.Int64  // summed over the iterations
	}
	var variants []*variant
	for _, notify := range []bool{false, true} {
		v := &variant{name: "spin", failed: make(chan struct{}, 1)}
		opts := []core.Option{core.WithWait(10 * time.Second), core.WithHandlers(core.HandlerFuncs{
			OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
				_, err := next(ctx, req)
				v.attempts.Add(int64(req.Attempts))
				return err
			},
		})}
		if notify {
			v.name = "notify"
			opts = append(opts, core.WithNotify())
		}
		c := srv.Client(b)
		c.AddHook(attemptHook{sets: v.failed})
		v.locker = core.New(c, opts...)
		b.Cleanup(func() { _ = v.locker.Close() })
		variants = append(variants, v)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			name := uniq(b)
			held, err := holder.Acquire(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				lease, err := v.locker.Acquire(ctx, name)
				at := time.Now()
				if err != nil {
					b.Error(err)
				} else {
					_ = lease.Release(ctx)
				}
				got <- at
			}()
			<-v.failed
			if v.name == "notify" { // subscribed, as a hot name's waiters are
				channel := held.Key() + ":released"
				for admin.PubSubNumSub(ctx, channel).Val()[channel] == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
			time.Sleep(time.Duration(rand.Int64N(int64(20 * time.Millisecond)))) // anywhere in the sleep
			start := time.Now()
			if err := held.Release(ctx); err != nil {
				b.Fatal(err)
			}
			v.wake += (<-got).Sub(start)
			for len(v.failed) > 0 {
				<-v.failed
			}
		}
	}
	b.StopTimer()
	for _, v := range variants {
		b.ReportMetric(float64(v.wake.Microseconds())/float64(b.N), v.name+"-wake-µs")
		b.ReportMetric(float64(v.attempts.Load())/float64(b.N), v.name+"-attempts/op")
	}
	b.ReportMetric(float64(variants[0].wake)/float64(variants[1].wake), "spin/notify")
}
