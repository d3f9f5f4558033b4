package lockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// TestPendingCountsWaitingRequests: reqlock.acquire.pending counts the
// Acquires in progress, here fair waiters queued behind a holder, and goes
// back to 0 as they end, acquired or timed out.
func TestPendingCountsWaitingRequests(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := newEnv(t, nil, nil, core.WithFair(), core.WithWait(30*time.Second))
	t.Cleanup(func() { _ = e.locker.Close() }) // ends the grants' subscription
	name := uniq(t)
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n := sum(t, e.collect(t), lockotel.MetricAcquirePending); n != 0 {
		t.Fatalf("pending = %d with no waiter, want 0", n)
	}
	const waiters = 3
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			l, err := e.locker.Acquire(ctx, name)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for sum(t, e.collect(t), lockotel.MetricAcquirePending) != waiters {
		if time.Now().After(deadline) {
			t.Fatalf("pending never reached %d waiters", waiters)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := sum(t, e.collect(t), lockotel.MetricAcquirePending); n != 0 {
		t.Fatalf("pending = %d after every waiter ended, want 0", n)
	}
	l, err := e.locker.Acquire(ctx, name, core.Wait(0))
	if err != nil {
		t.Fatal(err) // free again: the name was released by the last waiter
	}
	_ = l.Release(ctx)
}
