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

func TestIsSyntaxError(t *testing.T) {
	if !isSyntaxError(serverError("ERR syntax error")) {
		t.Error("ERR syntax error not recognised")
	}
	if isSyntaxError(errors.New("syntax error")) || isSyntaxError(serverError("WRONGTYPE")) {
		t.Error("a client error or another reply taken for a syntax error")
	}
}

// TestTryAcquireIsRetrySafe runs the backend on a real server, with SET ...
// NX GET and with the script used for servers before Redis 7.0: the same
// token twice (a retried transmission) is ours, another token is not.
func TestTryAcquireIsRetrySafe(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	for _, legacy := range []bool{false, true} {
		s := newRedisStore(client)
		s.noSetGet.Store(legacy)
		key := fmt.Sprintf("k:%v", legacy)
		for i, tc := range []struct {
			token string
			want  bool
		}{{"t1", true}, {"t1", true}, {"t2", false}} {
			got, err := s.tryAcquire(ctx, key, tc.token, 5*time.Second)
			if err != nil || got != tc.want {
				t.Fatalf("legacy=%v step %d: tryAcquire(%s) = %v, %v; want %v", legacy, i, tc.token, got, err, tc.want)
			}
		}
		if d := client.PTTL(ctx, key).Val(); d <= 4*time.Second || d > 5*time.Second {
			t.Fatalf("legacy=%v: PTTL = %v, want just under 5s", legacy, d)
		}
		if ok, err := s.release(ctx, key, "t2"); ok || err != nil {
			t.Fatalf("legacy=%v: release with a foreign token = %v, %v", legacy, ok, err)
		}
		if ok, err := s.release(ctx, key, "t1"); !ok || err != nil {
			t.Fatalf("legacy=%v: release = %v, %v", legacy, ok, err)
		}
		if ok, err := s.extend(ctx, key, "t1", time.Second); ok || err != nil {
			t.Fatalf("legacy=%v: extend after release = %v, %v", legacy, ok, err)
		}
	}
}
