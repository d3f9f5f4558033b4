package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// A Release that fails because the link to Redis is cut never reached it:
// the Locker finishes it in the background, so that once the link heals the
// name is free at once, not at the end of its TTL (30 s here).
func TestReleaseOnACutLinkIsFinishedWhenItHeals(t *testing.T) {
	leakCheck(t)
	p := redistest.NewProxy(t, shared.Addr())
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	l := core.New(client, core.WithTTL(30*time.Second), core.WithIOTimeout(time.Second))
	t.Cleanup(func() { _ = l.Close() })
	admin := shared.Client(t)
	ctx := context.Background()
	name := uniq(t)
	key, _ := l.Key(name)

	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := lease.Release(ctx); !errors.Is(err, core.ErrStorage) {
		p.Restore()
		t.Fatalf("Release on a cut link = %v, want ErrStorage", err)
	}
	if n, err := admin.Exists(ctx, key).Result(); err != nil || n != 1 {
		p.Restore()
		t.Fatalf("the key after a Release that could not reach Redis: exists = %d, %v; want it held", n, err)
	}
	p.Restore()
	healed := time.Now()
	for {
		n, err := admin.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Logf("free %v after the link healed", time.Since(healed).Round(time.Millisecond))
			return
		}
		if time.Since(healed) > 10*time.Second {
			t.Fatal("the name is still held 10 s after the link healed: the failed Release was not finished")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
