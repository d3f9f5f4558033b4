package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// request builds the AcquireCall a waiter for lease's name would pass to Handoff.
func request(lease *core.Lease, ttl time.Duration) *core.AcquireCall {
	return &core.AcquireCall{Name: lease.Name(), Key: lease.Key(), TTL: ttl, Start: time.Now()}
}

func TestHandoffKeepsTheHoldWithoutRoundTrip(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(10*time.Second))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	e.rt.N.Store(0)
	second, err := first.Handoff(ctx, request(first, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.rt.N.Load(); n != 0 {
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

// TestHandoffRefreshesAShortRemainder: a lock with less than two thirds of
// the TTL the next holder asks for left is handed off with one
// compare-and-extend to that TTL. The lock is taken for 6 s and handed off
// for 30 s: its remainder is short of 20 s from the start, without a sleep
// that a loaded machine could stretch past the lock's expiry.
func TestHandoffRefreshesAShortRemainder(t *testing.T) {
	leakCheck(t)
	const held, ttl = 6 * time.Second, 30 * time.Second
	e := newEnv(t, nil, core.WithTTL(ttl))
	ctx := context.Background()
	first, err := e.locker.Acquire(core.ContextWithTTL(ctx, held), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	e.rt.N.Store(0)
	second, err := first.Handoff(ctx, request(first, ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if n := e.rt.N.Load(); n != 1 {
		t.Fatalf("refreshing handoff made %d round trips, want 1", n)
	}
	if d := pttl(t, e, second.Key()); d <= ttl-5*time.Second {
		t.Fatalf("PTTL after the refreshing handoff = %v, want close to %v", d, ttl)
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
	for _, req := range []*core.AcquireCall{nil, other, request(lease, 0), request(lease, core.MaxTTL+time.Hour)} {
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

// parkingQueue is a LocalQueue that queues nothing: a lease offered by Pass
// while pass is set is parked, and the next turn takes it over.
type parkingQueue struct {
	pass   atomic.Bool
	parked chan *core.Lease
	left   atomic.Int64 // turns ended by Leave
}

type parkingTurn struct {
	q    *parkingQueue
	prev *core.Lease
}

func (q *parkingQueue) Enter(ctx context.Context, name, key string, deadline time.Time) (core.LocalTurn, error) {
	select {
	case prev := <-q.parked:
		return &parkingTurn{q, prev}, nil
	default:
		return &parkingTurn{q: q}, nil
	}
}

func (t *parkingTurn) Passed() *core.Lease { return t.prev }

func (t *parkingTurn) Pass(lease *core.Lease) bool {
	if !t.q.pass.Load() {
		return false
	}
	t.q.parked <- lease
	return true
}

func (t *parkingTurn) Leave() { t.q.left.Add(1) }

// TestHandoffThroughTheLocalQueue passes a lock from one Acquire to the next
// through the local-queue slot: the releasing holder's turn passes the lease
// on instead of a store release, and the next Acquire takes it over without
// a round trip; Handlers and Observers see both ends whatever their order.
func TestHandoffThroughTheLocalQueue(t *testing.T) {
	leakCheck(t)
	q := &parkingQueue{parked: make(chan *core.Lease, 1)}
	var events []string
	var mu sync.Mutex
	obs := observerFunc(func(e core.AcquireEvent) core.LeaseObserver {
		mu.Lock()
		events = append(events, fmt.Sprintf("acquire %v handed=%v attempts=%d", e.Outcome, e.HandedOver, e.Attempts))
		mu.Unlock()
		return releaseFunc(func(e core.ReleaseEvent) {
			mu.Lock()
			events = append(events, fmt.Sprintf("release %v", e.Outcome))
			mu.Unlock()
		})
	})
	e := newEnv(t, nil, core.WithObservers(obs), core.WithLocalQueue(q), core.WithWait(0))
	ctx := context.Background()
	name := uniq(t)
	first, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	q.pass.Store(true)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q.pass.Store(false)
	e.rt.N.Store(0)
	second, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if second.Token() != first.Token() || e.rt.N.Load() != 0 {
		t.Fatalf("the second acquire did not take the lock over (round trips %d)", e.rt.N.Load())
	}
	select {
	case <-first.Done():
	default:
		t.Fatal("the lease that was handed off is not done")
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.client.Exists(ctx, first.Key()).Result(); n != 0 {
		t.Fatal("the last holder's release left the key")
	}
	if q.left.Load() != 1 {
		t.Fatalf("%d turns left the queue, want 1 (the second; the first passed its turn on)", q.left.Load())
	}
	want := "acquire acquired handed=false attempts=1,release handed_off,acquire acquired handed=true attempts=0,release released"
	if got := strings.Join(events, ","); got != want {
		t.Fatalf("observers saw\n%s\nwant\n%s", got, want)
	}
}

// TestHandoffOfARedlockLockWithoutAQuorumDeletesWhatIsLeft: the key is gone
// from 3 of 5 nodes, so the hand-off's extend finds no quorum and fails with
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
	_ = l.Close() // the deletes on nodes slower than the outcome are done
	if n := holders(nodes, first.Key(), first.Token()); n != 0 {
		t.Fatalf("the failed handoff left the key on %d nodes, with no holder", n)
	}
}

// failNext is a go-redis hook that fails the next script call (EVAL or
// EVALSHA) once armed, before it is sent, with the error that fail returns;
// every other command passes.
type failNext struct {
	armed atomic.Bool
	fail  func(ctx context.Context) error
}

func (f *failNext) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "eval" || name == "evalsha") && f.armed.CompareAndSwap(true, false) {
			err := f.fail(ctx)
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestHandoffUndoesTheHoldWhenItsExtendFails: the hand-off's extend fails on
// Redis, or its context is cancelled during the call. The old lease is
// ended and no new one takes the hold, so Handoff must delete the key
// rather than leave the name locked with no holder until its TTL ends.
func TestHandoffUndoesTheHoldWhenItsExtendFails(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name   string
		cancel bool
		want   error
	}{
		{"storage error", false, core.ErrStorage},
		{"context cancelled", true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, core.WithTTL(time.Minute), core.WithFencing()) // fencing: the hand-off always extends
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hook := &failNext{fail: func(context.Context) error {
				if tc.cancel {
					cancel()
					return context.Canceled
				}
				return errors.New("connection reset by peer")
			}}
			e.client.AddHook(hook)
			first, err := e.locker.Acquire(ctx, uniq(t))
			if err != nil {
				t.Fatal(err)
			}
			hook.armed.Store(true)
			if _, err := first.Handoff(ctx, request(first, time.Minute)); !errors.Is(err, tc.want) {
				t.Fatalf("Handoff = %v, want %v", err, tc.want)
			}
			if hook.armed.Load() {
				t.Fatal("the handoff made no script call")
			}
			if n := e.client.Exists(context.Background(), first.Key()).Val(); n != 0 {
				t.Fatal("the failed handoff left the key in Redis with no holder")
			}
			if err := first.Release(context.Background()); err != nil {
				t.Fatalf("release of the lease handed off: %v", err)
			}
		})
	}
}
