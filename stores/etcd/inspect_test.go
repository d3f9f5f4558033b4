package etcdstore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/reqlock/reqlock/lockstore"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// listAll pages through s.List(prefix) with limit and returns every key of
// every page, in order, and the number of pages.
func listAll(t *testing.T, s *etcdstore.Store, prefix string, limit int) ([]string, int) {
	t.Helper()
	var all []string
	cursor, pages := "", 0
	for {
		keys, next, err := s.List(call(t), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(keys))
		}
		all = append(all, keys...)
		pages++
		if next == "" {
			return all, pages
		}
		if pages > 1000 {
			t.Fatalf("List(%q) pages on without end (cursor %q)", prefix, next)
		}
		cursor = next
	}
}

// TestListPages: held keys (exclusive, shared by several, permits) are
// listed once each, in key order, whatever the page size; their companion
// keys (shares, a waiter record) are not; a key whose only record is a
// waiter's is not held; keys outside the prefix are not listed.
func TestListPages(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	base := uniq(t)
	key := func(n string) string { return base + ":" + n }

	acquire(t, s, key("a"), "ta", 10*time.Second, false)
	for i := range 5 { // a lock with more shares than a page has room for
		share(t, s, key("b"), fmt.Sprint("tb", i), shared0, false)
	}
	share(t, s, key("c"), "tc0", permits3, false)
	share(t, s, key("c"), "tc1", permits3, false)
	acquire(t, s, key("d"), "td", 10*time.Second, false)
	// e: shares and a waiting writer; f: a waiter record alone (its share
	// released since).
	share(t, s, key("e"), "te", shared0, false)
	if ok, _, err := s.TryAcquireWaiting(call(t), key("e"), "we", 10*time.Second, 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	share(t, s, key("f"), "tf", shared0, false)
	if ok, _, err := s.TryAcquireWaiting(call(t), key("f"), "wf", 10*time.Second, 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	unshare(t, s, key("f"), "tf")
	acquire(t, s, key("g"), "tg", 10*time.Second, false)
	release(t, s, key("g"), "tg")
	acquire(t, s, base+"x", "outside", 10*time.Second, false) // not under base + ":"

	want := []string{key("a"), key("b"), key("c"), key("d"), key("e")}
	for _, limit := range []int{1, 2, 3, 7, lockstore.MaxListLimit} {
		got, pages := listAll(t, s, base+":", limit)
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q in %d pages; want %q", limit, got, pages, want)
		}
	}
	// A prefix that reaches into the keys of b's shares: b does not begin
	// with it.
	if got, _ := listAll(t, s, key("b")+"\x00h/", 10); len(got) != 0 {
		t.Errorf("List under the prefix of b's shares: %q; want none", got)
	}
	// The whole store: our keys are among them, once each.
	got, _ := listAll(t, s, "", lockstore.MaxListLimit)
	for _, k := range append(want, base+"x") {
		if n := count(got, k); n != 1 {
			t.Errorf("List of the whole store lists %q %d times", k, n)
		}
	}
}

func count(keys []string, k string) int {
	n := 0
	for _, x := range keys {
		if x == k {
			n++
		}
	}
	return n
}

// TestListBadArguments: a limit out of range, or a cursor the listing did
// not hand out, is an error wrapping lockstore.ErrInvalidOption.
func TestListBadArguments(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	base := uniq(t)
	acquire(t, s, base+":a", "t", 10*time.Second, false)
	acquire(t, s, base+":b", "t", 10*time.Second, false)
	_, next, err := s.List(call(t), base+":", "", 1)
	if err != nil || next == "" {
		t.Fatalf("List: next %q, %v", next, err)
	}
	for _, c := range []struct {
		prefix, cursor string
		limit          int
	}{
		{base + ":", "", 0},
		{base + ":", "", -1},
		{base + ":", "", lockstore.MaxListLimit + 1},
		{base + ":", "not base64!", 10},
		{base + ":", base + ":a", 10}, // a key, not a cursor
		{base + ":other", next, 10},   // a cursor of another prefix
	} {
		if _, _, err := s.List(call(t), c.prefix, c.cursor, c.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("List(%q, %q, %d): %v; want ErrInvalidOption", c.prefix, c.cursor, c.limit, err)
		}
	}
}

// TestInspectHolders: Inspect reports an exclusive holder with its token,
// TTL and fence; shares with their mode, in slot order; a waiting writer's
// token; and nothing for a free key.
func TestInspectHolders(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	base := uniq(t)

	x := base + ":x"
	fence := acquire(t, s, x, "tx", 10*time.Second, true)
	st, err := s.Inspect(call(t), x)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Writer != "" || len(st.Waiters) != 0 {
		t.Fatalf("Inspect of an exclusive hold: %+v", st)
	}
	h := st.Holders[0]
	if h.Token != "tx" || !h.Exclusive || h.Fence != fence || st.Fence != fence || st.Key != x {
		t.Errorf("Inspect: %+v (holder %+v); want token tx, exclusive, fence %d", st, h, fence)
	}
	if h.TTL <= 0 || h.TTL > 10*time.Second {
		t.Errorf("Inspect: TTL %v; want within (0, 10s]", h.TTL)
	}

	p := base + ":p"
	share(t, s, p, "p0", permits3, false)
	share(t, s, p, "p1", permits3, false)
	share(t, s, p, "p2", permits3, true)
	unshare(t, s, p, "p0")
	share(t, s, p, "p0b", permits3, false) // slot 0 again
	st, err = s.Inspect(call(t), p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, h := range st.Holders {
		got = append(got, fmt.Sprintf("%s@%d/%d", h.Token, h.Slot, h.Hold.N))
		if h.Exclusive || h.TTL <= 0 || h.Fence <= 0 {
			t.Errorf("share %d: %+v", i, h)
		}
	}
	if want := []string{"p0b@0/3", "p1@1/3", "p2@2/3"}; !slices.Equal(got, want) {
		t.Errorf("Inspect of permits: %q; want %q", got, want)
	}

	r := base + ":r"
	share(t, s, r, "r1", shared0, false)
	share(t, s, r, "r0", shared0, false)
	if ok, _, err := s.TryAcquireWaiting(call(t), r, "writer", 10*time.Second, 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	st, err = s.Inspect(call(t), r)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, h := range st.Holders {
		got = append(got, h.Token)
		if !h.Hold.Shared() || h.Exclusive {
			t.Errorf("shared hold: %+v", h)
		}
	}
	if want := []string{"r1", "r0"}; !slices.Equal(got, want) || st.Writer != "writer" {
		t.Errorf("Inspect of shares: holders %q, writer %q; want %q (in the order taken), writer", got, st.Writer, want)
	}

	st, err = s.Inspect(call(t), base+":free")
	if err != nil || st.Held() || st.Writer != "" || st.Fence != 0 {
		t.Errorf("Inspect of a free key: %+v, %v", st, err)
	}
}

// TestInspectLeavesOutExpired: a holder whose lease expired is not
// reported, also by a Store that took it (its own books say held).
func TestInspectLeavesOutExpired(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	key := uniq(t)
	acquire(t, s, key, "t", time.Second, false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.Inspect(call(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held after 30 s: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	keys, _, err := s.List(call(t), key, "", 10)
	if err != nil || len(keys) != 0 {
		t.Errorf("List of an expired key: %q, %v", keys, err)
	}
}

// TestInspectReadsOnly: List and Inspect change nothing: a lock inspected
// is still held by its token, and released by it.
func TestInspectReadsOnly(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	key := uniq(t)
	acquire(t, s, key, "t", 10*time.Second, false)
	if _, err := s.Inspect(call(t), key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.List(call(t), key, "", 1); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.TryAcquire(call(t), key, "other", 10*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire after Inspect: %v, %v", ok, err)
	}
	release(t, s, key, "t")
}
