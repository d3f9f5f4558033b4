package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
)

// pendingUndos returns the number of clean-ups s retries, and whether its
// goroutine runs.
func (s *Store) pendingUndos() (int, bool) {
	return s.undos.Pending()
}

// waitUndos waits up to limit for s to have no clean-up left and its
// goroutine to have ended, and returns how long that took.
func waitUndos(t *testing.T, s *Store, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		n, running := s.pendingUndos()
		if n == 0 && !running {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v, %d clean-ups are still pending (goroutine running: %v)", limit, n, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A clean-up that finds nothing goes on, as the attempt's SET may come
// later: a key set under its token after the first "not found" is deleted
// all the same; and once the store has answered for the attempt's TTL, the
// clean-up ends by itself, and so does its goroutine, without Close.
//
// The clean-ups run for the TTL (3 s) after the first answer: the test sets
// the key once the second round was sent (the first one's answers counted),
// which leaves it seconds before they end on a loaded machine.
func TestUndoOutlivesNotFoundAndEndsByItself(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	rounds := &redistest.RoundTrips{} // one pipeline per round, nothing else before the SET
	client.AddHook(rounds)
	ctx := context.Background()
	s := New(client)
	defer s.Close()
	const ttl = 3 * time.Second

	start := time.Now()
	s.undos.Add("late", "t1", ttl, start)
	s.undos.Add("never", "t2", ttl, start)
	for deadline := time.Now().Add(30 * time.Second); rounds.N.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds of clean-ups in 30 s, want 2 in half a second", rounds.N.Load())
		}
	}
	if n, _ := s.pendingUndos(); n != 2 {
		t.Fatalf("%d clean-ups pending after their compare-and-delete found nothing, want 2: not finding the key proves nothing", n)
	}
	client.Set(ctx, "late", "t1", time.Minute) // the late SET
	deadline := time.Now().Add(10 * time.Second)
	for client.Exists(ctx, "late").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key set under the token after the clean-up first found nothing was not deleted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitUndos(t, s, 30*time.Second)
	if took := time.Since(start); took < ttl {
		t.Fatalf("the clean-up that never found its key ended %v after it began, before the store had answered for the TTL (%v)", took, ttl)
	}
}

// A clean-up keeps trying while the server is frozen, for longer than the
// attempt's TTL: the server runs the late SET when it resumes, and the
// clean-up deletes it then. Its rounds have the store's I/O timeout, a
// second (and two intervals at most), for a loaded machine.
func TestUndoOfAnAttemptOnAFrozenServer(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	s := New(client)
	defer s.Close()
	s.ioTimeout.Store(int64(time.Second))
	const ttl = 300 * time.Millisecond
	if err := client.Ping(ctx).Err(); err != nil { // a connection from before the stall
		t.Fatal(err)
	}
	srv.Freeze(t)
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, _, err := s.TryAcquire(actx, "frozen", "t1", ttl, false)
	cancel()
	if err == nil {
		srv.Thaw(t)
		t.Fatal("TryAcquire on a frozen server succeeded")
	}
	time.Sleep(3 * ttl)
	n, running := s.pendingUndos()
	srv.Thaw(t)
	if n != 1 || !running {
		t.Fatalf("after a stall of 3 TTLs, %d clean-ups pending (running %v), want 1: the server has not answered yet", n, running)
	}
	took := waitUndos(t, s, 30*time.Second)
	if client.Exists(ctx, "frozen").Val() != 0 {
		t.Fatal("the late SET was not undone")
	}
	t.Logf("the clean-up ended %v after the thaw", took.Round(time.Millisecond))
}

// Close ends the clean-ups at once, pending or not; attempts that fail
// afterwards get no goroutine.
func TestCloseEndsTheUndos(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	s := New(client)
	s.undos.Add("k", "t", time.Minute, time.Now())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, running := s.pendingUndos(); n != 0 || running {
		t.Fatalf("after Close: %d clean-ups pending, goroutine running %v", n, running)
	}
	s.undos.Add("k", "t2", time.Minute, time.Now())
	if n, running := s.pendingUndos(); n != 0 || running {
		t.Fatalf("a clean-up added after Close: %d pending, goroutine running %v", n, running)
	}
}
