package etcdstore

import (
	"strconv"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/core"
)

// FuzzLockOf: lockOf gives back the lock key of each of its companion keys
// (a shared hold, a permit, the waiter record) and of the key itself, for
// lock keys and tokens without a NUL byte.
func FuzzLockOf(f *testing.F) {
	f.Add("reqlock:{order:42}", "TOKEN.abc", 3, 1)
	f.Add("/x/h/s/", "s/", 1, 0)
	f.Fuzz(func(t *testing.T, k, token string, n, slot int) {
		if k == "" || token == "" || strings.Contains(k+token, "\x00") {
			return
		}
		n = 1 + abs(n)%core.MaxPermits
		slot = abs(slot) % n
		for _, c := range []struct {
			ck     string
			waiter bool
		}{
			{k, false},
			{sharedKey(k, token), false},
			{permitsPrefix(k, n) + strconv.Itoa(slot), false},
			{waiterKey(k), true},
		} {
			if got, w := lockOf(c.ck); got != k || w != c.waiter {
				t.Fatalf("lockOf(%q) = %q, %v; want %q, %v", c.ck, got, w, k, c.waiter)
			}
		}
		hold, s, ok := parseShare(strings.TrimPrefix(permitsPrefix(k, n)+strconv.Itoa(slot), holders(k)))
		if !ok || hold.N != n || s != slot {
			t.Fatalf("parseShare of permit %d of %d: %v, %d, %v", slot, n, hold, s, ok)
		}
	})
}

func abs(i int) int {
	if i < 0 {
		if i == -i { // the smallest int
			return 0
		}
		return -i
	}
	return i
}

// TestParseShareRefuses: what is not a share key's end is no share.
func TestParseShareRefuses(t *testing.T) {
	for _, rest := range []string{"", "s/", "x/1", "p/", "p/3", "p/3/", "p/0/0", "p/3/3", "p/3/-1", "p/a/1", "p/3/b"} {
		if h, slot, ok := parseShare(rest); ok {
			t.Errorf("parseShare(%q) = %v, %d, true", rest, h, slot)
		}
	}
}
