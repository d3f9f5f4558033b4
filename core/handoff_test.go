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

// request builds the Request a waiter for lease's name would pass to Handoff.
func request(lease *core.Lease, ttl time.Duration) *core.Request {
	return &core.Request{Name: lease.Name(), Key: lease.Key(), TTL: ttl, Start: time.Now()}
}

func TestHandoffKeepsTheHoldWithoutRoundTrip(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(10*time.Second))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	e.rt.n.Store(0)
	second, err := first.Handoff(ctx, request(first, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.rt.n.Load(); n != 0 {
		t.Fatalf("a handoff with most of the TTL left made %d round trips, want 0", n)
	}
	if second.Token() != first.Token() || second.Key() != first.Key() || !second.ValidUntil().Equal(first.ValidUntil()) {
		t.Fatal("the handed-off lease should keep the token, key and expiry")
	}
	select {
	case <-first.Done():
	default:
		t.Fatal("the lease handed off is not done")
	}
	select {
	case <-second.Done():
		t.Fatal("the new lease is done at once")
	default:
	}
	// The old lease releases nothing now, even through the chain.
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend of the lease handed off = %v, want ErrNotHeld", err)
	}
	if got, _ := e.client.Get(ctx, first.Key()).Result(); got != second.Token() {
		t.Fatalf("the key holds %q after the old lease's release, want the token", got)
	}
	if _, err := first.Handoff(ctx, request(first, time.Second)); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("a second handoff = %v, want ErrNotHeld", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.client.Exists(ctx, first.Key()).Result(); n != 0 {
		t.Fatal("the new lease's release left the key")
	}
}

func TestHandoffRefreshesAShortRemainder(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Extend(ctx, 300*time.Millisecond); err != nil { // loads the script, so the count below is of one EVALSHA
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond) // less than 2/3 of 300 ms is left
	e.rt.n.Store(0)
	second, err := first.Handoff(ctx, request(first, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if n := e.rt.n.Load(); n != 1 {
		t.Fatalf("refreshing handoff made %d round trips, want 1", n)
	}
	if d := pttl(t, e, second.Key()); d <= 200*time.Millisecond {
		t.Fatalf("PTTL after the refreshing handoff = %v, want close to 300ms", d)
	}
	if !second.ValidUntil().After(first.ValidUntil()) {
		t.Fatal("the refreshed lease's validity did not move")
	}
}

func TestHandoffOfALockGoneFails(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.Del(ctx, first.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond)
	if _, err := first.Handoff(ctx, request(first, 300*time.Millisecond)); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("handoff of a deleted lock = %v, want ErrNotHeld", err)
	}
}

func TestHandoffAfterReleaseFails(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Handoff(ctx, request(first, time.Second)); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("handoff after release = %v, want ErrNotHeld", err)
	}
	inner, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Release(ctx)
	nested, err := e.locker.Acquire(core.ContextWithLease(ctx, inner), inner.Name())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nested.Handoff(ctx, request(nested, time.Second)); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("handoff of a nested lease = %v, want ErrNotHeld", err)
	}
}

func TestHandoffRejectsBadRequests(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	lease := hold(t, e, uniq(t))
	other := request(lease, time.Second)
	other.Key += "x"
	for _, req := range []*core.Request{nil, other, request(lease, 0), request(lease, core.MaxTTL+time.Hour)} {
		if _, err := lease.Handoff(ctx, req); !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("Handoff(%+v) = %v, want ErrInvalidOption", req, err)
		}
	}
	select {
	case <-lease.Done():
		t.Fatal("a rejected handoff ended the lease")
	default:
	}
	if err := lease.Extend(ctx, time.Second); err != nil {
		t.Fatalf("the lease is no longer usable after rejected handoffs: %v", err)
	}
}

// TestHandoffThroughHandlers passes a lock from one Acquire to the next the
// way a local-lock handler does: the releasing holder's Release handler keeps
// the lease instead of calling next, and the next Acquire's handler takes it
// over with Handoff.
func TestHandoffThroughHandlers(t *testing.T) {
	leakCheck(t)
	parked := make(chan *core.Lease, 1)
	h := core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
			select {
			case prev := <-parked:
				return prev.Handoff(ctx, req)
			default:
				return next(ctx, req)
			}
		},
		OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
			if lease.Value("pass") != nil {
				parked <- lease
				return nil
			}
			return next(ctx, lease)
		},
	}
	e := newEnv(t, nil, core.WithHandlers(h), core.WithWait(0))
	ctx := context.Background()
	name := uniq(t)
	first, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	first.SetValue("pass", true)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.rt.n.Store(0)
	second, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if second.Token() != first.Token() || e.rt.n.Load() != 0 {
		t.Fatalf("the second acquire did not take the lock over (round trips %d)", e.rt.n.Load())
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.client.Exists(ctx, first.Key()).Result(); n != 0 {
		t.Fatal("the last holder's release left the key")
	}
}

// TestHandoffOfARedlockLockWithoutAQuorumDeletesWhatIsLeft: the key is gone
// from 3 of 5 nodes, so the handoff's extend finds no quorum and fails with
// ErrNotHeld; the 2 nodes that still hold the token must not keep it for a
// whole TTL, as nobody owns it any more.
func TestHandoffOfARedlockLockWithoutAQuorumDeletesWhatIsLeft(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 5)
	l := redlockEnv(t, nodes, core.WithTTL(time.Minute), core.WithFencing())
	ctx := context.Background()
	first, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range nodes[:3] {
		c := redis.NewClient(s.Options())
		c.Del(ctx, first.Key())
		_ = c.Close()
	}
	if _, err := first.Handoff(ctx, request(first, time.Minute)); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("handoff without a quorum = %v, want ErrNotHeld", err)
	}
	if n := holders(nodes, first.Key(), first.Token()); n != 0 {
		t.Fatalf("the failed handoff left the key on %d nodes, with no holder", n)
	}
}
