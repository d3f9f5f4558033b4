package core_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// queueUndoer is a store that keeps queues and undoes in the background, as
// the Redis store does.
type queueUndoer interface {
	core.Queuer
	core.Undoer
}

// lateCalls is a Redis store whose Enqueue (or Poll) fails at once, as one
// sent into a stalled store fails at the I/O timeout, and is run 300 ms
// later all the same, as the stalled store runs it when it resumes: after
// the waiter has given up its place.
type lateCalls struct {
	queueUndoer
	late   string        // "enqueue" or "poll"
	landed chan struct{} // closed once the late call has run
}

var errStalled = errors.New("test: no reply (the store stalls)")

func (s *lateCalls) runLate(call func(ctx context.Context)) {
	go func() {
		defer close(s.landed)
		time.Sleep(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		call(ctx)
	}()
}

func (s *lateCalls) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	if s.late != "enqueue" {
		return s.queueUndoer.Enqueue(ctx, key, token, ttl, patience, fenced)
	}
	s.runLate(func(ctx context.Context) { _, _ = s.queueUndoer.Enqueue(ctx, key, token, ttl, patience, fenced) })
	return core.Grant{}, errStalled
}

func (s *lateCalls) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	if s.late != "poll" {
		return s.queueUndoer.Poll(ctx, key, waiters, patience, fenced)
	}
	s.runLate(func(ctx context.Context) { _, _, _ = s.queueUndoer.Poll(ctx, key, waiters, patience, fenced) })
	return -1, core.Grant{}, errStalled
}

// TestFairLateCallLeavesNoPlace: an Enqueue or a Poll that failed, and that
// the store runs late, after the waiter has gone, queues it again; the
// Locker takes that place out in the background, long before its patience
// (6 s) runs out. A place left there would hold up everyone behind it for
// the patience, and the holder's release would grant the name to the
// waiter that has gone: held by nobody for as long.
func TestFairLateCallLeavesNoPlace(t *testing.T) {
	for _, late := range []string{"enqueue", "poll"} {
		t.Run(late, func(t *testing.T) {
			leakCheck(t)
			name := uniq(t)
			ctx := context.Background()
			holder := newEnv(t, nil, core.WithFair())
			lease, err := holder.locker.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			store := core.NewRedisStore(holder.client)
			t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
			lc := &lateCalls{queueUndoer: store.(queueUndoer), late: late, landed: make(chan struct{})}
			w := core.NewWithStore(lc, core.WithFair(), core.WithFairPatience(6*time.Second), core.WithWait(30*time.Second))
			t.Cleanup(func() { _ = w.Close() })
			if _, err := w.Acquire(ctx, name); !errors.Is(err, core.ErrStorage) {
				t.Fatalf("Acquire with a failed %s = %v, want ErrStorage", late, err)
			}
			select {
			case <-lc.landed:
			case <-time.After(10 * time.Second):
				t.Fatalf("the late %s did not run", late)
			}
			key, _ := holder.locker.Key(name)
			queue := key + ":queue"
			for deadline := time.Now().Add(3 * time.Second); holder.client.ZCard(ctx, queue).Val() > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the late %s left the waiter that had gone in the queue for 3 s (patience 6 s): %v",
						late, holder.client.ZRange(ctx, queue, 0, -1).Val())
				}
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if n := holder.client.Exists(ctx, key).Val(); n != 0 {
				t.Fatalf("the release granted the name to a waiter that had gone (key %s holds %q)", key, holder.client.Get(ctx, key).Val())
			}
		})
	}
}
