package core

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

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
