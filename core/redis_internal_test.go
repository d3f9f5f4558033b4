package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
)

// serverError stands for an error reply of Redis.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

func TestMayHaveApplied(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{fmt.Errorf("wrapped: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), false},
		{redis.ErrClosed, false},
		{redis.ErrPoolTimeout, false},
		{serverError("NOSCRIPT No matching script"), false},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{context.DeadlineExceeded, true},
		{errors.New("EOF"), true},
	} {
		if got := mayHaveApplied(tc.err); got != tc.want {
			t.Errorf("mayHaveApplied(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestSleepRange(t *testing.T) {
	client := redis.NewClient(&redis.Options{}) // never dialled
	defer client.Close()
	l := New(client, WithSpin(10, 5))
	seen := map[int64]bool{}
	for i := 0; i < 2000; i++ {
		d := l.sleep()
		if d < 10 || d >= 15 {
			t.Fatalf("sleep() = %v, outside [10ns, 15ns)", d)
		}
		seen[int64(d)] = true
	}
	if len(seen) != 5 {
		t.Fatalf("sleep() took %d distinct values, want all 5 of [10, 15)", len(seen))
	}
	fixed := New(client, WithSpin(7, 0))
	if d := fixed.sleep(); d != 7 {
		t.Fatalf("a zero random part gave %v, want 7ns", d)
	}
}

// TestTryAcquireIsRetrySafe runs the backend's acquire on a real server: the
// same token twice (a retried transmission) is ours, another token is not.
func TestTryAcquireIsRetrySafe(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	s := redisStore{client: client}
	for i, tc := range []struct {
		token string
		want  bool
	}{{"t1", true}, {"t1", true}, {"t2", false}} {
		got, err := s.tryAcquire(ctx, "k", tc.token, 5*time.Second)
		if err != nil || got != tc.want {
			t.Fatalf("step %d: tryAcquire(%s) = %v, %v; want %v", i, tc.token, got, err, tc.want)
		}
	}
	if d := client.PTTL(ctx, "k").Val(); d <= 4*time.Second || d > 5*time.Second {
		t.Fatalf("PTTL = %v, want just under 5s", d)
	}
	if ok, err := s.release(ctx, "k", "t2"); ok || err != nil {
		t.Fatalf("release with a foreign token = %v, %v", ok, err)
	}
	if ok, err := s.release(ctx, "k", "t1"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if ok, err := s.extend(ctx, "k", "t1", time.Second); ok || err != nil {
		t.Fatalf("extend after release = %v, %v", ok, err)
	}
}
