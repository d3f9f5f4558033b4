package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
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
