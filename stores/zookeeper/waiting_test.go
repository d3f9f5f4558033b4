package zkstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// waitCounter is the store with a count of the TryAcquireWaiting calls that
// failed: each sends on failed (dropped when full).
type waitCounter struct {
	*zkstore.Store
	failed chan struct{}
}

// TryAcquireWaiting is the store's, and tells failed when it fails.
func (w *waitCounter) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := w.Store.TryAcquireWaiting(ctx, key, token, ttl, patience, fenced)
	if !ok && err == nil {
		select {
		case w.failed <- struct{}{}:
		default:
		}
	}
	return ok, fence, err
}

// TestWaitingWriterClearsItsRecord: a writer that waits behind a reader
// through a Locker makes several attempts, each with a token of its own
// (core draws one per attempt), and each renews the key's exclusive
// waiter's record; there is one such record per key, not one per attempt.
// Once the writer has taken the name and released it, a new reader gets
// it at once (core.Wait(0): one attempt): the writer's success cleared the
// record of its earlier attempts too, instead of leaving them to keep
// readers out for the writer's patience.
func TestWaitingWriterClearsItsRecord(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	r := root(t)
	store := &waitCounter{
		Store:  newStore(t, conn, zkstore.WithRoot(r), zkstore.WithSessionTimeout(sessionTimeout)),
		failed: make(chan struct{}, 64),
	}
	locker := core.NewWithStore(store, core.WithTTL(3*time.Second), core.WithWatchdog(), core.WithNotify())
	t.Cleanup(func() { _ = locker.Close() })
	bg := context.Background()

	reader, err := locker.Acquire(bg, "doc", core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *core.Lease
		err   error
	}
	writer := make(chan result, 1)
	go func() {
		l, err := locker.Acquire(bg, "doc", core.Wait(30*time.Second))
		writer <- result{l, err}
	}()
	const attempts = 3
	for i := range attempts {
		select {
		case <-store.failed:
		case w := <-writer:
			t.Fatalf("the writer's Acquire ended while a reader held the name: %v, %v", w.lease, w.err)
		case <-time.After(20 * time.Second): // a hang, not a timing
			t.Fatalf("the writer made %d waiting attempts in 20s; want %d", i, attempts)
		}
	}
	key, err := locker.Key("doc")
	if err != nil {
		t.Fatal(err)
	}
	var records []string
	for _, n := range children(t, conn, r+"/"+key) { // the store escapes none of the key's characters
		if !strings.HasPrefix(n, "l-") { // not a contender: a waiter's record
			records = append(records, n)
		}
	}
	if len(records) != 1 {
		t.Errorf("after %d waiting attempts of one writer, the key has the waiter's records %q; want one", attempts, records)
	}
	if err := reader.Release(bg); err != nil {
		t.Fatal(err)
	}
	w := <-writer
	if w.err != nil {
		t.Fatalf("the waiting writer: %v", w.err)
	}
	if err := w.lease.Release(bg); err != nil {
		t.Fatal(err)
	}
	l, err := locker.Acquire(bg, "doc", core.Shared(), core.Wait(0))
	if err != nil {
		t.Fatalf("a shared Acquire (Wait 0) of a free name, after the waiting writer took it and released it: %v; the writer's success left a record of one of its earlier attempts, which keeps readers out for its patience", err)
	}
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
}
