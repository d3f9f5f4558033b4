package core_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// slowLongExtends is a Redis store whose Extends for longer than a minute
// (a user's) take 1.5 s before they are sent.
type slowLongExtends struct{ core.Store }

func (s slowLongExtends) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if ttl > time.Minute {
		time.Sleep(1500 * time.Millisecond)
	}
	return s.Store.Extend(ctx, key, token, ttl, fenced)
}

// TestWatchdogKeepsAUsersLongerExtend: a renewal of the watchdog that falls
// due while the user's Extend(1h) is in flight waits for it, then renews
// for the lease's TTL as that Extend left it, not for the TTL it read
// before: it used to set the lock back to 3 s, undoing the user's Extend.
func TestWatchdogKeepsAUsersLongerExtend(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil)
	store := core.NewRedisStore(e.client)
	t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
	l := core.NewWithStore(slowLongExtends{store}, core.WithTTL(3*time.Second), core.WithWatchdog(), core.WithIOTimeout(5*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	name := uniq(t)
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()
	// The watchdog's first renewal falls due 1 s in, while this Extend
	// waits 1.5 s before it is sent.
	if err := lease.Extend(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	key, _ := l.Key(name)
	// Let the renewal that waited run, and the watchdog's next one fall due.
	time.Sleep(1500 * time.Millisecond)
	if ttl := lease.TTL(); ttl != time.Hour {
		t.Fatalf("Lease.TTL() = %v after Extend(1h) and a renewal, want 1h", ttl)
	}
	if pttl := e.client.PTTL(ctx, key).Val(); pttl < 50*time.Minute {
		t.Fatalf("the lock's PTTL is %v after Extend(1h) and a renewal: the watchdog undid the Extend", pttl)
	}
}
