package zkstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/lockstore"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// listAll lists every held key under prefix with pages of limit keys, and
// fails the test if a page holds more than limit keys or the listing does
// not end.
func listAll(t *testing.T, s *zkstore.Store, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for range 1000 {
		keys, next, err := s.List(ctx(t), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(keys))
		}
		all = append(all, keys...)
		if next == "" {
			return all
		}
		cursor = next
	}
	t.Fatalf("List(%q) did not end", prefix)
	return nil
}

// TestInspectExclusive: a store that never wrote (an operator's) sees an
// exclusive holder taken by another store with its token, its TTL left and
// a fence no lower than the holder's; fair waiters behind it in their
// order of arrival, with their patience left; and after the release, the
// first waiter's poll makes it the holder.
func TestInspectExclusive(t *testing.T) {
	leakCheck(t)
	r := root(t)
	a := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	op := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	key := "orders:{42}"
	const ttl, patience = time.Minute, time.Minute
	ok, fence, err := a.TryAcquire(ctx(t), key, "holder", ttl, true)
	if err != nil || !ok {
		t.Fatalf("TryAcquire: %v, %v", ok, err)
	}
	st, err := op.Inspect(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Fence != fence || st.Fence != fence {
		t.Fatalf("Inspect of a key taken by one fenced TryAcquire: %+v; want the holder's fence %d, the key's too", st, fence)
	}
	mustEnqueue(t, a, key, "w1", ttl, patience)
	mustEnqueue(t, a, key, "w2", ttl, patience)

	st, err = op.Inspect(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != "holder" || !st.Holders[0].Exclusive {
		t.Fatalf("Holders = %+v; want the exclusive holder", st.Holders)
	}
	if h := st.Holders[0]; h.TTL <= 0 || h.TTL > ttl || h.Fence != 0 {
		t.Fatalf("holder %+v; want a TTL within (0, %v], and no fence once waiters came (the one it drew is not kept)", h, ttl)
	}
	if st.Fence <= fence || st.Key != key || st.Writer != "" {
		t.Fatalf("KeyState %+v; want a fence above %d (the waiters' nodes came after it)", st, fence)
	}
	if len(st.Waiters) != 2 || st.Waiters[0].Token != "w1" || st.Waiters[1].Token != "w2" {
		t.Fatalf("Waiters = %+v; want w1, w2", st.Waiters)
	}
	for _, w := range st.Waiters {
		if w.Patience <= 0 || w.Patience > patience || w.TTL != 0 {
			t.Fatalf("waiter %+v: want a patience within (0, %v], no TTL", w, patience)
		}
	}
	if keys := listAll(t, op, "orders:", 10); !slices.Equal(keys, []string{key}) {
		t.Fatalf("List = %q; want [%q]", keys, key)
	}

	if ok, err := a.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	g, err := a.Enqueue(ctx(t), key, "w1", ttl, patience, true)
	if err != nil || !g.OK {
		t.Fatalf("the first waiter's poll after the release: %+v, %v", g, err)
	}
	st, err = op.Inspect(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Token != "w1" || len(st.Waiters) != 1 || st.Waiters[0].Token != "w2" {
		t.Fatalf("after the hand-over: %+v; want w1 holding, w2 waiting", st)
	}
	if st.Fence < g.Fence {
		t.Fatalf("Fence %d below the grant's %d", st.Fence, g.Fence)
	}
	for _, tok := range []string{"w1", "w2"} {
		if err := a.Dequeue(ctx(t), key, tok); err != nil {
			t.Fatal(err)
		}
	}
	st, err = op.Inspect(ctx(t), key)
	if err != nil || st.Held() || len(st.Waiters) != 0 {
		t.Fatalf("after everybody left: %+v, %v; want free", st, err)
	}
	if keys := listAll(t, op, "", 10); len(keys) != 0 {
		t.Fatalf("List = %q after everybody left; want none", keys)
	}
}

// TestInspectReadsOnly: a holder whose TTL ran out holds nothing, and the
// fair waiters behind it do not hold the key until one of them polls: the
// key is not listed, Inspect shows no holder and both waiters; and neither
// call deleted the dead node, which the next contender does.
func TestInspectReadsOnly(t *testing.T) {
	leakCheck(t)
	r := root(t)
	conn := dial(t, "", 0)
	a := newStore(t, conn, zkstore.WithRoot(r))
	op := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	key := "k"
	ok, _, err := a.TryAcquire(ctx(t), key, "dying", time.Second, false)
	if err != nil || !ok {
		t.Fatalf("TryAcquire: %v, %v", ok, err)
	}
	mustEnqueue(t, a, key, "w1", time.Minute, time.Minute)
	mustEnqueue(t, a, key, "w2", time.Minute, time.Minute)
	var st lockstore.KeyState
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err = op.Inspect(ctx(t), key); err != nil {
			t.Fatal(err)
		}
		if !st.Held() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder of a 1s TTL still holds after 20s: %+v", st)
		}
	}
	if len(st.Waiters) != 2 || st.Waiters[0].Token != "w1" || st.Waiters[1].Token != "w2" {
		t.Fatalf("Waiters = %+v; want w1, w2", st.Waiters)
	}
	if keys := listAll(t, op, "", 10); len(keys) != 0 {
		t.Fatalf("List = %q; want none: a key held only by waiters is not held", keys)
	}
	names, _, err := conn.Children(r + "/k")
	if err != nil || len(names) != 3 {
		t.Fatalf("children after Inspect and List: %q, %v; want the dead holder's node and two waiters'", names, err)
	}
	g, err := a.Enqueue(ctx(t), key, "w1", time.Minute, time.Minute, false)
	if err != nil || !g.OK {
		t.Fatalf("the first waiter's poll past a dead holder: %+v, %v", g, err)
	}
	if keys := listAll(t, op, "", 10); !slices.Equal(keys, []string{key}) {
		t.Fatalf("List = %q; want [%q]", keys, key)
	}
	for _, tok := range []string{"w1", "w2"} {
		if err := a.Dequeue(ctx(t), key, tok); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspectShares: permits are listed in slot order with their mode and
// slot; shared holds with their mode; the exclusive waiter's record tells
// the token of the last attempt that wrote it, and holds nothing.
func TestInspectShares(t *testing.T) {
	leakCheck(t)
	r := root(t)
	a := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	op := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	h := core.Hold{N: 3}
	for i, tok := range []string{"p0", "p1", "p2"} {
		ok, slot, fence, err := a.TryAcquireShare(ctx(t), "permits", tok, time.Minute, h, i == 1)
		if err != nil || !ok || slot != i {
			t.Fatalf("TryAcquireShare(%s): %v, slot %d, %v", tok, ok, slot, err)
		}
		if i == 1 && fence <= 0 {
			t.Fatalf("a fenced share's fence: %d", fence)
		}
	}
	if ok, err := a.ReleaseShare(ctx(t), "permits", "p0"); err != nil || !ok {
		t.Fatalf("ReleaseShare: %v, %v", ok, err)
	}
	ok, slot, _, err := a.TryAcquireShare(ctx(t), "permits", "p0b", time.Minute, h, false)
	if err != nil || !ok || slot != 0 {
		t.Fatalf("TryAcquireShare in the freed slot: %v, %d, %v", ok, slot, err)
	}
	st, err := op.Inspect(ctx(t), "permits")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, hs := range st.Holders {
		got = append(got, hs.Token)
		if hs.Exclusive || hs.Hold != h || hs.Slot != i || hs.TTL <= 0 || hs.TTL > time.Minute {
			t.Fatalf("holder %d: %+v; want permits(3) in slot %d with a TTL", i, hs, i)
		}
		if (hs.Fence != 0) != (hs.Token == "p1") {
			t.Fatalf("holder %+v: only the fenced share has a fence", hs)
		}
	}
	if !slices.Equal(got, []string{"p0b", "p1", "p2"}) {
		t.Fatalf("holders %q; want p0b, p1, p2 in slot order", got)
	}

	for _, tok := range []string{"s1", "s2"} {
		if ok, _, _, err := a.TryAcquireShare(ctx(t), "shared", tok, time.Minute, core.Hold{}, false); err != nil || !ok {
			t.Fatalf("TryAcquireShare(%s): %v, %v", tok, ok, err)
		}
	}
	for _, w := range []string{"writer1", "writer2"} {
		if ok, _, err := a.TryAcquireWaiting(ctx(t), "shared", w, time.Minute, time.Minute, false); err != nil || ok {
			t.Fatalf("TryAcquireWaiting beside shares: %v, %v", ok, err)
		}
	}
	st, err = op.Inspect(ctx(t), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 2 || st.Holders[0].Token != "s1" || st.Holders[1].Token != "s2" || st.Holders[0].Hold != (core.Hold{}) || st.Writer != "writer2" || len(st.Waiters) != 0 {
		t.Fatalf("shared: %+v; want s1, s2 shared, writer2 waiting, no waiter in the queue", st)
	}
	for _, tok := range []string{"s1", "s2"} {
		if ok, err := a.ReleaseShare(ctx(t), "shared", tok); err != nil || !ok {
			t.Fatalf("ReleaseShare(%s): %v, %v", tok, ok, err)
		}
	}
	if st, err = op.Inspect(ctx(t), "shared"); err != nil || st.Held() || st.Writer != "writer2" {
		t.Fatalf("after the shares: %+v, %v; want free, writer2 waiting", st, err)
	}
	if keys := listAll(t, op, "s", 1); len(keys) != 0 {
		t.Fatalf("List = %q; a key with only a waiting writer's record is not held", keys)
	}
	if ok, _, err := a.TryAcquireWaiting(ctx(t), "shared", "writer3", time.Minute, time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquireWaiting once the shares are gone: %v, %v", ok, err)
	}
	if st, err = op.Inspect(ctx(t), "shared"); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "writer3" || st.Writer != "" {
		t.Fatalf("after the writer took it: %+v, %v; want writer3 holding, no writer waiting", st, err)
	}
	if keys := listAll(t, op, "", 1); !slices.Equal(keys, []string{"permits", "shared"}) {
		t.Fatalf("List = %q", keys)
	}
}

// TestInspectEscapedKeys: keys that escape to other node names ('/', '%',
// dots, bytes beyond ASCII) are listed as themselves, by prefixes that
// hold those characters, and inspected; nodes under the root that are no
// key's escape, and a key's companions that do not exist in ZooKeeper, are
// never listed.
func TestInspectEscapedKeys(t *testing.T) {
	leakCheck(t)
	r := root(t)
	conn := dial(t, "", 0)
	a := newStore(t, conn, zkstore.WithRoot(r))
	op := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	keys := []string{"a/b{1}", "a%{2}", "a%2F{3}", "..", "ü:{4}", "a/c", "a"}
	for _, k := range keys {
		if ok, _, err := a.TryAcquire(ctx(t), k, "t-"+k, time.Minute, false); err != nil || !ok {
			t.Fatalf("TryAcquire(%q): %v, %v", k, ok, err)
		}
	}
	// Nodes of something else under the root: not escapes of a key.
	for _, name := range []string{"%zz", "%", "a%2f"} {
		p, err := conn.Create(r+"/"+name, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Delete(p, -1) })
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for _, limit := range []int{1, 2, 1000} {
		if got := listAll(t, op, "", limit); !slices.Equal(got, sorted) {
			t.Fatalf("List(limit %d) = %q; want %q", limit, got, sorted)
		}
	}
	for prefix, want := range map[string][]string{
		"a/":  {"a/b{1}", "a/c"},
		"a%":  {"a%2F{3}", "a%{2}"},
		"a%2": {"a%2F{3}"},
		".":   {".."},
		"ü":   {"ü:{4}"},
		"a":   {"a", "a%2F{3}", "a%{2}", "a/b{1}", "a/c"},
		"b":   nil,
	} {
		if got := listAll(t, op, prefix, 2); !slices.Equal(got, want) {
			t.Fatalf("List(%q) = %q; want %q", prefix, got, want)
		}
	}
	for _, k := range keys {
		st, err := op.Inspect(ctx(t), k)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "t-"+k {
			t.Fatalf("Inspect(%q) = %+v, %v", k, st, err)
		}
	}
}

// TestListBadInput: a limit out of range, a cursor of another store or of
// another prefix, and an empty key are errors wrapping ErrInvalidOption.
func TestListBadInput(t *testing.T) {
	leakCheck(t)
	r := root(t)
	s := newStore(t, dial(t, "", 0), zkstore.WithRoot(r))
	for _, k := range []string{"x1", "x2", "y1"} {
		if ok, _, err := s.TryAcquire(ctx(t), k, "tok", time.Minute, false); err != nil || !ok {
			t.Fatalf("TryAcquire(%q): %v, %v", k, ok, err)
		}
	}
	_, next, err := s.List(ctx(t), "x", "", 1)
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	for _, c := range []struct {
		prefix, cursor string
		limit          int
	}{
		{"x", "", 0},
		{"x", "", lockstore.MaxListLimit + 1},
		{"x", "0", 10},                       // Redis's SCAN cursor
		{"x", "x1", 10},                      // a bare key
		{"x", "sql1:eDE", 10},                // the SQL store's
		{"x", "zk1:%zz", 10},                 // no escape's spelling
		{"y", next, 10},                      // a cursor of another prefix
		{"x", "zk1:" + "x%31", 10},           // "x1" spelled otherwise
		{"", "zk1:", lockstore.MaxListLimit}, // no key
	} {
		if _, _, err := s.List(ctx(t), c.prefix, c.cursor, c.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("List(%q, %q, %d): %v; want ErrInvalidOption", c.prefix, c.cursor, c.limit, err)
		}
	}
	if _, err := s.Inspect(ctx(t), ""); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Errorf("Inspect(\"\"): %v; want ErrInvalidOption", err)
	}
	if keys := listAll(t, s, "x", 1); !slices.Equal(keys, []string{"x1", "x2"}) {
		t.Fatalf("List(x) = %q", keys)
	}
}
