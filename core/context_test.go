package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

func TestReentrantAcquireThroughContext(t *testing.T) {
	leakCheck(t)
	calls := 0
	counting := core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		calls++
		_, err := next(ctx, req)
		return err
	}}
	e := newEnv(t, nil, core.WithWait(0), core.WithHandlers(counting))
	ctx := context.Background()
	name := uniq(t)

	outer, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ctx = core.ContextWithLease(ctx, outer)
	if got := core.LeaseFromContext(ctx); got != outer {
		t.Fatalf("LeaseFromContext = %p, want the outer lease %p", got, outer)
	}
	e.rt.N.Store(0)

	inner, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("reentrant acquire: %v", err)
	}
	if n := e.rt.N.Load(); n != 0 || calls != 1 {
		t.Fatalf("reentrant acquire made %d round trips and ran the handler %d times; want 0 and 1 (the outer acquire's)", n, calls)
	}
	if inner == outer || inner.Token() != outer.Token() || inner.Key() != outer.Key() || inner.Done() != outer.Done() {
		t.Fatal("the nested lease should be a new lease sharing the outer one's token, key and Done")
	}

	// Nested twice: a context carrying the nested lease is reentrant too.
	innermost, err := e.locker.Acquire(core.ContextWithLease(ctx, inner), name)
	if err != nil || innermost.Token() != outer.Token() {
		t.Fatalf("acquire under the nested lease: %v", err)
	}
	for _, l := range []*core.Lease{innermost, inner, inner} { // twice: idempotent
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release of a nested lease: %v", err)
		}
	}
	if got, _ := e.client.Get(ctx, outer.Key()).Result(); got != outer.Token() {
		t.Fatalf("after the nested releases the key holds %q, want the outer token", got)
	}
	select {
	case <-outer.Done():
		t.Fatal("a nested release closed the outer lease's Done")
	default:
	}
	if err := inner.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend of a released nested lease = %v, want ErrNotHeld", err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.client.Exists(ctx, outer.Key()).Result(); n != 0 {
		t.Fatal("the outer release left the key")
	}

	// The outer lease is gone: the context no longer makes Acquire reentrant.
	e.rt.N.Store(0)
	again, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release(ctx)
	if again.Token() == outer.Token() || e.rt.N.Load() != 1 {
		t.Fatalf("acquire after the outer release should go to Redis (round trips %d)", e.rt.N.Load())
	}
}

func TestReentrancyIsPerLockerAndName(t *testing.T) {
	leakCheck(t)
	a := newEnv(t, nil, core.WithWait(0))
	b := newEnv(t, nil, core.WithWait(0))
	name := uniq(t)
	outer := hold(t, a, name)
	ctx := core.ContextWithLease(context.Background(), outer)

	// Another Locker (another service instance) is not the holder.
	if _, err := b.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("another Locker's acquire under the lease = %v, want ErrTimeout", err)
	}
	// Another name is an ordinary acquire.
	other, err := a.locker.Acquire(ctx, name+"/other")
	if err != nil {
		t.Fatal(err)
	}
	if other.Token() == outer.Token() {
		t.Fatal("another name shared the outer lease")
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The extend of a nested lease reaches the outer lease's key.
	inner, err := a.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Extend(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Slack for a slow reply; the TTL before the Extend was 10 s.
	if d := pttl(t, a, outer.Key()); d <= 25*time.Second || d > 30*time.Second {
		t.Fatalf("PTTL after a nested Extend(30s) = %v", d)
	}
	if outer.TTL() != 30*time.Second || inner.TTL() != 30*time.Second {
		t.Fatalf("TTL after Extend: outer %v, nested %v", outer.TTL(), inner.TTL())
	}
}

func TestLeaseFromContextEmpty(t *testing.T) {
	if l := core.LeaseFromContext(context.Background()); l != nil {
		t.Fatal("a bare context carries a lease")
	}
	ctx := core.ContextWithLease(context.Background(), nil)
	if l := core.LeaseFromContext(ctx); l != nil {
		t.Fatal("ContextWithLease(nil) added a lease")
	}
}

func TestRouteReachesHandlers(t *testing.T) {
	leakCheck(t)
	var seen string
	h := core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		seen = req.Route
		_, err := next(ctx, req)
		return err
	}}
	e := newEnv(t, nil, core.WithHandlers(h))
	ctx := core.ContextWithRoute(context.Background(), "/orders/:id")
	if core.RouteFromContext(ctx) != "/orders/:id" || core.RouteFromContext(context.Background()) != "" {
		t.Fatal("RouteFromContext does not return what ContextWithRoute set")
	}
	lease, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if seen != "/orders/:id" {
		t.Fatalf("AcquireCall.Route = %q", seen)
	}
}

func TestPerRequestWait(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithWait(5*time.Second), core.WithSpin(10*time.Millisecond, 0))
	name := uniq(t)
	hold(t, e, name)
	ctx := context.Background()
	if d, ok := core.WaitFromContext(core.ContextWithWait(ctx, time.Second)); !ok || d != time.Second {
		t.Fatalf("WaitFromContext = %v, %v", d, ok)
	}
	if _, ok := core.WaitFromContext(ctx); ok {
		t.Fatal("a bare context carries a wait")
	}

	// Shorter than the Locker's: the per-request budget is what is spent.
	start := time.Now()
	_, err := e.locker.Acquire(core.ContextWithWait(ctx, 50*time.Millisecond), name)
	if !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("acquire of a held name with a 50ms wait = %v, want ErrTimeout", err)
	}
	if waited := time.Since(start); waited >= 5*time.Second {
		t.Fatalf("waited %v: the Locker's budget was used", waited)
	}
	// Zero: exactly one attempt.
	e.rt.N.Store(0)
	if _, err := e.locker.Acquire(core.ContextWithWait(ctx, 0), name); !errors.Is(err, core.ErrTimeout) || e.rt.N.Load() != 1 {
		t.Fatalf("wait 0: %v after %d round trips, want ErrTimeout after 1", err, e.rt.N.Load())
	}
	// Negative: rejected before any I/O.
	e.rt.N.Store(0)
	if _, err := e.locker.Acquire(core.ContextWithWait(ctx, -time.Second), name); !errors.Is(err, core.ErrInvalidOption) || e.rt.N.Load() != 0 {
		t.Fatalf("negative wait: %v after %d round trips, want ErrInvalidOption and none", err, e.rt.N.Load())
	}
}

func TestPerRequestWaitLengthensTheBudget(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithWait(0), core.WithSpin(10*time.Millisecond, 0))
	name := uniq(t)
	first, err := e.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		_ = first.Release(context.Background())
	}()
	lease, err := e.locker.Acquire(core.ContextWithWait(context.Background(), 5*time.Second), name)
	<-released
	if err != nil {
		t.Fatalf("a per-request wait longer than the Locker's did not wait: %v", err)
	}
	_ = lease.Release(context.Background())
}

// TestContextWithLeaseIsAContext: the context of ContextWithLease is one
// allocation; it carries the leases innermost first and its parent's
// values, deadline and cancellation, and a context.WithCancelCause on top
// of it is cancelled with its parent, cause and all.
func TestContextWithLeaseIsAContext(t *testing.T) {
	l := core.NewWithStore(grantAll{})
	defer l.Close()
	bg := context.Background()
	a, err := l.Acquire(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(bg)
	b, err := l.Acquire(bg, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(bg)
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(bg, key{}, "v"))
	if n := testing.AllocsPerRun(100, func() { _ = core.ContextWithLease(parent, a) }); n != 1 {
		t.Errorf("ContextWithLease allocates %v times, want 1", n)
	}
	ctx := core.ContextWithLease(core.ContextWithLease(parent, a), b)
	if core.LeaseFromContext(ctx) != b || core.LeaseFromContext(core.ContextWithLease(parent, a)) != a || ctx.Value(key{}) != "v" {
		t.Fatal("the leases or the parent's value are not found")
	}
	if nested, err := l.Acquire(ctx, "a"); err != nil || nested.Token() != a.Token() {
		t.Fatalf("the outer lease of a is not found under b's: %v", err)
	} else {
		_ = nested.Release(bg)
	}
	child, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cause := errors.New("gone")
	cancel(cause)
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived from it is not cancelled with its parent")
	}
	if context.Cause(child) != cause || ctx.Err() != context.Canceled {
		t.Fatalf("cause %v, err %v", context.Cause(child), ctx.Err())
	}
	if s := fmt.Sprint(ctx); !strings.HasSuffix(s, ".WithLease(a).WithLease(b)") {
		t.Errorf("String: %s", s)
	}
}
