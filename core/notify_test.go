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

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// notifyOpts make a waiter whose sleep is a minute: only a notification
// wakes it before its context's deadline.
var notifyOpts = []core.Option{core.WithWait(time.Minute), core.WithSpin(time.Minute, 0)}

func TestNotifyWakesWaiterOnRelease(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	holder := newEnv(t, srv, core.WithNotify())
	var attempts atomic.Int64
	count := core.WithHandlers(core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
		lease, err := next(ctx, req)
		attempts.Store(int64(req.Attempts))
		return lease, err
	}})
	waiter := newEnv(t, srv, append(notifyOpts, core.WithNotify(), count)...)
	t.Cleanup(func() { _ = holder.locker.Close(); _ = waiter.locker.Close() })
	checkWake(t, holder.locker, waiter.locker, srv)
	if n := attempts.Load(); n != 2 {
		t.Fatalf("the woken waiter made %d attempts, want 2 (one before the release, one after)", n)
	}
}

// TestNotifyControlWithoutNotify is the control of the test above: without
// WithNotify the same waiter sleeps past its context's deadline.
func TestNotifyControlWithoutNotify(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	holder := newEnv(t, nil)
	waiter := newEnv(t, nil, notifyOpts...)
	ctx := context.Background()
	held, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { _ = held.Release(ctx) })
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := waiter.locker.Acquire(wctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline: without notifications the waiter sleeps on", err)
	}
}

func TestNotifySharesOneSubscription(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	holder := newEnv(t, srv, core.WithNotify())
	waiters := newEnv(t, srv, core.WithNotify(), core.WithWait(time.Minute), core.WithSpin(time.Minute, 0))
	admin := srv.Client(t)
	ctx := context.Background()
	const names, perName = 5, 4
	var held []*core.Lease
	for i := 0; i < names; i++ {
		lease, err := holder.locker.Acquire(ctx, fmt.Sprintf("%s:%d", uniq(t), i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	var wg sync.WaitGroup
	errs := make(chan error, names*perName)
	for _, h := range held {
		for j := 0; j < perName; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				lease, err := waiters.locker.Acquire(wctx, h.Name())
				if err == nil {
					err = lease.Release(ctx)
				}
				errs <- err
			}()
		}
	}
	for _, h := range held {
		waitSubscribed(t, h.Key()+":released", srv)
	}
	for _, h := range held {
		if n := admin.PubSubNumSub(ctx, h.Key()+":released").Val()[h.Key()+":released"]; n != 1 {
			t.Fatalf("%d subscriptions to a name with %d waiters, want 1", n, perName)
		}
	}
	if n := pubsubClients(t, srv); n != 1 {
		t.Fatalf("%d pub/sub connections for %d waiters in one Locker, want 1", n, names*perName)
	}
	for _, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiter: %v", err)
		}
	}
	// The last waiter of a name unsubscribes it.
	deadline := time.Now().Add(5 * time.Second)
	for _, h := range held {
		for admin.PubSubNumSub(ctx, h.Key()+":released").Val()[h.Key()+":released"] != 0 {
			if time.Now().After(deadline) {
				t.Fatal("a channel stayed subscribed after its last waiter left")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := waiters.locker.Close(); err != nil {
		t.Fatal(err)
	}
	_ = waiters.locker.Close() // idempotent
	deadline = time.Now().Add(5 * time.Second)
	for pubsubClients(t, srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Close left the pub/sub connection open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A closed Locker still locks, on its sleep alone.
	lease, err := waiters.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(ctx)
}

// pubsubClients counts the pub/sub connections of srv.
func pubsubClients(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	list, err := srv.Client(t).Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}
