package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// resentFree is the Redis store whose TryAcquireFree loses its reply after
// taking the key: its client re-sent the command, which found the key
// held, by the same token (the answer core.FreeAcquirer allows).
type resentFree struct{ *redisstore.Store }

func (s resentFree) TryAcquireFree(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Store.TryAcquireFree(ctx, key, token, ttl, fenced)
	if ok {
		return false, 0, nil
	}
	return ok, fence, err
}

// cancelSoon is a context cancelled 20 ms from now: during the first sleep
// (500 ms) of an Acquire that begins now.
func cancelSoon(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(20*time.Millisecond, cancel)
	t.Cleanup(func() { timer.Stop(); cancel() })
	return ctx
}

// A first attempt that took the name but answered busy (a re-sent
// transmission) is found by the next attempt, which sends the same token:
// the Acquire takes its own name after one sleep, instead of waiting for
// it until its budget ends. An Acquire that ends before a second attempt
// releases that token, so that the name is free at once, not after its
// TTL.
func TestResentFirstAttempt(t *testing.T) {
	leakCheck(t)
	c := shared.Client(t)
	st := resentFree{core.NewRedisStore(c).(*redisstore.Store)}
	l := core.NewWithStore(st, core.WithTTL(time.Minute), core.WithWait(2*time.Second), core.WithSpin(500*time.Millisecond, 0))
	defer l.Close()
	ctx := context.Background()

	name := uniq(t)
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire after a first attempt whose reply was lost: %v", err)
	}
	key, _ := l.Key(name)
	if v, _ := c.Get(ctx, key).Result(); v != lease.Token() {
		t.Fatalf("the store holds %q, the lease %q", v, lease.Token())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The caller gives up during the first sleep: its token is released.
	name = uniq(t)
	key, _ = l.Key(name)
	if _, err := l.Acquire(cancelSoon(t), name); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled during its first sleep: %v, want context.Canceled", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("after an Acquire that gave up, its first attempt's key exists (%d, %v): left to its TTL", n, err)
	}

	// Another holder's key is never released by it.
	name = uniq(t)
	key, _ = l.Key(name)
	if err := c.Set(ctx, key, "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(cancelSoon(t), name); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire of a held name cancelled during its first sleep: %v", err)
	}
	if v, _ := c.Get(ctx, key).Result(); v != "other" {
		t.Fatalf("another holder's key holds %q after a busy Acquire gave up", v)
	}
}
