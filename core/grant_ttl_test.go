package core_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// zeroTTLGrants is a Redis store whose grants say that less than a
// millisecond of the key's TTL is left (Redis's PTTL answers 0 then), and
// whose extends fail, so that nothing but the grant dates the lease.
type zeroTTLGrants struct {
	core.Queuer
}

func (s zeroTTLGrants) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	g, err := s.Queuer.Enqueue(ctx, key, token, ttl, patience, fenced)
	if g.OK {
		g.TTL = 0
	}
	return g, err
}

var errNoExtend = errors.New("test: no extend")

func (s zeroTTLGrants) Extend(context.Context, string, string, time.Duration, bool) (bool, int64, error) {
	return false, 0, errNoExtend
}

// A grant with 0 ms left is a lease born lost, not one valid for a full TTL:
// the store frees the key within the millisecond.
func TestFairGrantWithNoTimeLeftIsLost(t *testing.T) {
	leakCheck(t)
	store := core.NewRedisStore(shared.Client(t))
	t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
	l := core.NewWithStore(zeroTTLGrants{store.(core.Queuer)}, core.WithFair(), core.WithTTL(10*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	start := time.Now()
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	if v := lease.ValidUntil(); v.After(start.Add(time.Millisecond)) {
		t.Fatalf("a grant with 0 ms left gave a lease valid %v after the Acquire began", v.Sub(start).Round(time.Millisecond))
	}
	if !lease.Lost() {
		t.Fatal("a grant with 0 ms left gave a lease that is not lost")
	}
}
