package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// TestFairSlowLinkKeepsItsPlace: a waiter whose round trip (80 ms, through a
// delaying proxy) is longer than its patience (30 ms) keeps its place in
// line all the same, and gets the lock before a waiter that queued after
// it. Its place lives a patience after each poll, and its polls came a
// third of the patience plus a round trip apart: the place was dead most of
// the time, and a release granted the lock to the waiter behind it.
func TestFairSlowLinkKeepsItsPlace(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	p := redistest.NewProxy(t, shared.Addr())
	p.SetDelay(40 * time.Millisecond)
	slowClient := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slowClient.Close() })
	slow := core.New(slowClient, core.WithFair(), core.WithFairPatience(30*time.Millisecond),
		core.WithWait(time.Minute), core.WithIOTimeout(5*time.Second))
	t.Cleanup(func() { _ = slow.Close() })
	holder := newEnv(t, nil, core.WithFair())
	fast := newEnv(t, nil, core.WithFair(), core.WithWait(time.Minute))
	for round := range 3 {
		name := uniq(t)
		lease, err := holder.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan string, 2)
		take := func(who string, l *core.Locker) {
			got, err := l.Acquire(ctx, name)
			if err != nil {
				t.Error(err)
				first <- who
				return
			}
			first <- who
			_ = got.Release(ctx)
		}
		go take("slow", slow)
		waitQueued(t, holder, name, 1)
		go take("fast", fast.locker)
		waitQueued(t, holder, name, 2)
		time.Sleep(300 * time.Millisecond) // a few of the slow waiter's polls
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		a, b := <-first, <-first
		if a != "slow" {
			t.Fatalf("round %d: the lock went to the %s waiter, then the %s one: the slow waiter, first in line, lost its place", round, a, b)
		}
	}
}
