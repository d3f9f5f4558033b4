package undo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/testmain"
)

// TestMain fails a passing run that left goroutines behind, once those that
// are ending have had testmain.LeakPatience to end.
func TestMain(m *testing.M) {
	testmain.Run(m, nil)
}

// store is a fake store: a map of keys to tokens, with a switch that makes
// it stop answering.
type store struct {
	mu     sync.Mutex
	keys   map[string]string
	silent bool
	rounds int
}

func newStore() *store { return &store{keys: make(map[string]string)} }

func (s *store) set(key, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = token
}

func (s *store) get(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}

func (s *store) setSilent(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent = v
}

func (s *store) sweep(ctx context.Context, batch []*Attempt) []Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	out := make([]Outcome, len(batch))
	for i, a := range batch {
		switch {
		case s.silent:
			out[i] = NoAnswer
		case s.keys[a.Key] == a.Token:
			delete(s.keys, a.Key)
			out[i] = Done
		default:
			out[i] = Answered
		}
	}
	return out
}

func second() time.Duration { return time.Second }

// wait waits up to limit for q to have nothing pending and no goroutine.
func wait(t *testing.T, q *Queue, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		n, running := q.Pending()
		if n == 0 && !running {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("after %v, %d clean-ups are still pending (goroutine running: %v)", limit, n, running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// roundsSeen returns how many rounds s has seen.
func (s *store) roundsSeen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds
}

// A clean-up that finds nothing goes on for the attempt's TTL after the
// store's first answer: a key set under its token meanwhile is deleted, and
// then the clean-up ends by itself, and so does its goroutine. The key is
// set once the second round began (the first one's answers were counted),
// seconds before the clean-ups end on a busy machine too.
func TestUndoOutlivesNotFoundAndEndsByItself(t *testing.T) {
	s := newStore()
	q := NewQueue(s.sweep, second)
	defer q.Close()
	const ttl = 3 * time.Second
	start := time.Now()
	q.Add("late", "t1", ttl, start)
	q.Add("never", "t2", ttl, start)
	for deadline := time.Now().Add(30 * time.Second); s.roundsSeen() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds in 30 s, want 2 in half a second", s.roundsSeen())
		}
	}
	if n, _ := q.Pending(); n != 2 {
		t.Fatalf("%d clean-ups pending after their compare-and-delete found nothing, want 2", n)
	}
	s.set("late", "t1") // the late command
	deadline := time.Now().Add(10 * time.Second)
	for s.get("late") != "" {
		if time.Now().After(deadline) {
			t.Fatal("a key set under the token after the clean-up first found nothing was not deleted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wait(t, q, 2*ttl)
	if took := time.Since(start); took < ttl {
		t.Fatalf("the clean-up that never found its key ended %v after it began, before the store had answered for the TTL (%v)", took, ttl)
	}
}

// While the store does not answer, a clean-up goes on past the TTL; once
// it answers, the late command is undone.
func TestUndoWhileTheStoreIsSilent(t *testing.T) {
	s := newStore()
	s.setSilent(true)
	q := NewQueue(s.sweep, second)
	defer q.Close()
	const ttl = 300 * time.Millisecond
	q.Add("frozen", "t1", ttl, time.Now())
	time.Sleep(3 * ttl)
	if n, running := q.Pending(); n != 1 || !running {
		t.Fatalf("after 3 TTLs without an answer, %d clean-ups pending (running %v), want 1", n, running)
	}
	s.set("frozen", "t1")
	s.setSilent(false)
	wait(t, q, 30*time.Second)
	if s.get("frozen") != "" {
		t.Fatal("the late command was not undone")
	}
}

// Undo's first compare-and-delete, within the caller's context, ends the
// clean-up when it deletes the key; otherwise the clean-up is queued.
func TestUndoFirstCall(t *testing.T) {
	s := newStore()
	q := NewQueue(s.sweep, second)
	defer q.Close()
	ctx := context.Background()
	q.Undo(ctx, "k", "t", time.Minute, time.Now(), func(context.Context) Outcome { return Done })
	if n, running := q.Pending(); n != 0 || running {
		t.Fatalf("after a first call that deleted the key: %d pending, running %v", n, running)
	}
	q.Undo(ctx, "k", "t", time.Minute, time.Now(), func(context.Context) Outcome { return Answered })
	if n, _ := q.Pending(); n != 1 {
		t.Fatalf("after a first call that found nothing: %d pending, want 1", n)
	}
	expired, cancel := context.WithCancel(ctx)
	cancel()
	called := false
	q.Undo(expired, "k2", "t", time.Minute, time.Now(), func(context.Context) Outcome { called = true; return Done })
	if called {
		t.Fatal("the first call was made on a context that had ended")
	}
}

// Horizon bounds a clean-up whose store never answers.
func TestUndoHorizon(t *testing.T) {
	s := newStore()
	s.setSilent(true)
	q := NewQueue(s.sweep, second)
	defer q.Close()
	q.Add("k", "t", 10*time.Millisecond, time.Now().Add(-Horizon))
	wait(t, q, 30*time.Second)
}

// Close ends the clean-ups at once, pending or not; those added after it
// get no goroutine.
func TestCloseEndsTheUndos(t *testing.T) {
	s := newStore()
	s.setSilent(true)
	q := NewQueue(s.sweep, second)
	q.Add("k", "t", time.Minute, time.Now())
	q.Close()
	if n, running := q.Pending(); n != 0 || running {
		t.Fatalf("after Close: %d clean-ups pending, goroutine running %v", n, running)
	}
	q.Add("k", "t2", time.Minute, time.Now())
	if n, running := q.Pending(); n != 0 || running {
		t.Fatalf("a clean-up added after Close: %d pending, goroutine running %v", n, running)
	}
}

// At most MaxPending clean-ups are pending: beyond, the oldest (tried the
// most) is dropped for the newest.
func TestUndosAreBounded(t *testing.T) {
	s := newStore()
	s.setSilent(true)
	q := NewQueue(s.sweep, second)
	defer q.Close()
	for i := 0; i <= MaxPending; i++ {
		q.Add("bounded", fmt.Sprint(i), time.Hour, time.Now())
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.pending); n != MaxPending {
		t.Fatalf("%d clean-ups pending, want at most %d", n, MaxPending)
	}
	if q.pending[0].Token != "1" || q.pending[MaxPending-1].Token != fmt.Sprint(MaxPending) {
		t.Fatal("the oldest clean-up was not the one dropped")
	}
}

// Without a timeout, a round has no deadline of its own, and Close cuts it.
func TestRoundWithoutTimeout(t *testing.T) {
	started := make(chan bool, 1)
	q := NewQueue(func(ctx context.Context, batch []*Attempt) []Outcome {
		_, ok := ctx.Deadline()
		started <- ok
		<-ctx.Done()
		return nil
	}, nil)
	q.Add("k", "t", time.Minute, time.Now())
	if <-started {
		t.Error("a round of a queue without a timeout has a deadline")
	}
	q.Close() // returns once the round is cut
	if n, running := q.Pending(); n != 0 || running {
		t.Fatalf("after Close: %d clean-ups pending, goroutine running %v", n, running)
	}
}
