package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// roundingStore is the Redis store behind a store that, like etcd, holds
// every lock for its TTL rounded up to a whole step, and says so
// (core.TTLRounder).
type roundingStore struct {
	core.Store
	step time.Duration
}

func (s roundingStore) StoreTTL(ttl time.Duration) time.Duration {
	return (ttl + s.step - 1) / s.step * s.step
}

func (s roundingStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.Store.TryAcquire(ctx, key, token, s.StoreTTL(ttl), fenced)
}

func (s roundingStore) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.Store.Extend(ctx, key, token, s.StoreTTL(ttl), fenced)
}

// TestLeaseReportsTheTTLTheStoreHolds: on a store that holds locks longer
// than asked (a core.TTLRounder), Lease.TTL is the TTL the store holds, at
// acquire and after Extend, and the validity counts from it, never past
// what the store holds.
func TestLeaseReportsTheTTLTheStoreHolds(t *testing.T) {
	leakCheck(t)
	c := shared.Client(t)
	store := roundingStore{Store: core.NewRedisStore(c), step: time.Second}
	l := core.NewWithStore(store, core.WithTTL(300*time.Millisecond))
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()

	before := time.Now()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	defer lease.Release(ctx)
	if got := lease.TTL(); got != time.Second {
		t.Errorf("Lease.TTL() = %v on a store that holds a lock asked for 300ms for 1s; want 1s", got)
	}
	// The validity counts from the command's sending, between before and
	// after, less the drift margin (1% and 2 ms): from the TTL the store
	// holds, not the one asked for, and never past it.
	valid := lease.ValidUntil()
	if lo := before.Add(time.Second - 10*time.Millisecond - 2*time.Millisecond); valid.Before(lo) {
		t.Errorf("ValidUntil is %v after the acquire began; want at least %v (1s held, less the margin)", valid.Sub(before), lo.Sub(before))
	}
	if hi := after.Add(time.Second); valid.After(hi) {
		t.Errorf("ValidUntil is %v after the acquire returned: past what the store holds (1s)", valid.Sub(after))
	}
	pttl, err := c.PTTL(ctx, lease.Key()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Set for 1s at or after before: at least 1s less the time since then
	// is left (PTTL counts whole milliseconds).
	if elapsed := time.Since(before); pttl < time.Second-elapsed-time.Millisecond || pttl > time.Second {
		t.Errorf("the key's PTTL is %v, %v after the acquire began; the store was to hold it for 1s", pttl, elapsed)
	}

	before = time.Now()
	if err := lease.Extend(ctx, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	after = time.Now()
	if got := lease.TTL(); got != 2*time.Second {
		t.Errorf("Lease.TTL() after Extend(1.5s) = %v; want 2s, as the store holds it", got)
	}
	valid = lease.ValidUntil()
	if lo, hi := before.Add(2*time.Second-20*time.Millisecond-2*time.Millisecond), after.Add(2*time.Second); valid.Before(lo) || valid.After(hi) {
		t.Errorf("ValidUntil after Extend(1.5s) is %v after it began; want from %v to %v after it", valid.Sub(before), lo.Sub(before), hi.Sub(before))
	}
}

// TestLeaseTTLWithoutRounder: a store that holds what it is asked reports
// the TTL asked for.
func TestLeaseTTLWithoutRounder(t *testing.T) {
	leakCheck(t)
	l := core.NewWithStore(core.NewRedisStore(shared.Client(t)), core.WithTTL(300*time.Millisecond))
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	if got := lease.TTL(); got != 300*time.Millisecond {
		t.Errorf("Lease.TTL() = %v; want the 300ms asked for", got)
	}
}
