package zkstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// TestPollManyWaitersThroughSlowLink: a fair Locker polls its waiters of a
// name in one Poll, bounded by its I/O timeout (1 s). Twelve waiters wait
// behind a holder through a link with a 60 ms round trip: the poll's round
// trips must not grow with the waiters (one after the other, they would
// take well over the timeout, and every waiter would fail with
// ErrStorage). Once the holder releases, each waiter gets the name in turn.
func TestPollManyWaitersThroughSlowLink(t *testing.T) {
	leakCheck(t)
	const waiters = 12
	proxy := redistest.NewProxy(t, shared.Addr())
	slow := newStore(t, dial(t, proxy.Addr(), 0))
	fast := newStore(t, dial(t, "", 0))
	opts := []core.Option{core.WithFair(), core.WithTTL(10 * time.Second), core.WithWait(time.Minute)}
	lslow := core.NewWithStore(slow, opts...)
	t.Cleanup(func() { _ = lslow.Close() })
	lfast := core.NewWithStore(fast, opts...)
	t.Cleanup(func() { _ = lfast.Close() })
	name := uniq(t)
	holder, err := lfast.Acquire(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetDelay(30 * time.Millisecond) // each way

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	got := 0
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			lease, err := lslow.Acquire(c, name)
			mu.Lock()
			if err != nil {
				failed = append(failed, err)
			} else {
				got++
			}
			mu.Unlock()
			if err == nil {
				if err := lease.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	// The waiters queue and are polled several times (every third of the
	// patience, 1 s) while the holder holds the name.
	time.Sleep(3 * time.Second)
	if err := holder.Release(ctx(t)); err != nil {
		t.Fatalf("Release by the holder: %v", err)
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d waiters failed behind a slow link; the first: %v", len(failed), waiters, failed[0])
	}
	if got != waiters {
		t.Fatalf("%d of %d waiters got the name", got, waiters)
	}
}
