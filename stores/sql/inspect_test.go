package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/lockstore"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// listAll lists every held name under prefix with pages of limit names,
// and fails the test if a page holds more than limit names or the listing
// does not end.
func listAll(t *testing.T, s *sqlstore.Store, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for range 1000 {
		keys, next, err := s.List(call(t), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d names", prefix, cursor, limit, len(keys))
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

// inspect inspects k and fails the test on an error.
func inspect(t *testing.T, s *sqlstore.Store, k string) lockstore.KeyState {
	t.Helper()
	st, err := s.Inspect(call(t), k)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", k, err)
	}
	if st.Key != k {
		t.Fatalf("Inspect(%q).Key = %q", k, st.Key)
	}
	return st
}

// TestInspectExclusive: an exclusive holder is seen by another store with
// its token, the TTL left by the database's clock and, on MySQL, the
// fence it drew (PostgreSQL keeps no fence per name: 0); a released name
// and an expired one are free and not listed, though their rows stay.
func TestInspectExclusive(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		table := freshTable(t, b, "insp")
		a := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		op := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		const ttl = time.Minute
		tok := token()
		fence := mustAcquire(t, a, "orders:{42}", tok, ttl, true)
		st := inspect(t, op, "orders:{42}")
		if len(st.Holders) != 1 || st.Holders[0].Token != tok || !st.Holders[0].Exclusive || st.Writer != "" || len(st.Waiters) != 0 {
			t.Fatalf("Inspect = %+v; want the exclusive holder %s", st, tok)
		}
		if h := st.Holders[0]; h.TTL <= 0 || h.TTL > ttl {
			t.Fatalf("TTL %v; want within (0, %v]", h.TTL, ttl)
		}
		wantFence := fence
		if b.dialect == sqlstore.PostgreSQL {
			wantFence = 0
		}
		if st.Fence != wantFence || st.Holders[0].Fence != wantFence {
			t.Fatalf("fences %d, %d; want %d", st.Fence, st.Holders[0].Fence, wantFence)
		}
		if keys := listAll(t, op, "", 10); !slices.Equal(keys, []string{"orders:{42}"}) {
			t.Fatalf("List = %q", keys)
		}

		if ok, err := a.Release(call(t), "orders:{42}", tok); err != nil || !ok {
			t.Fatalf("Release: %v, %v", ok, err)
		}
		mustAcquire(t, a, "short", token(), time.Second, false)
		eventually(t, "the 1s lock expires", func() bool { return !inspect(t, op, "short").Held() })
		for _, k := range []string{"orders:{42}", "short", "never"} {
			if st := inspect(t, op, k); st.Held() || st.Writer != "" {
				t.Fatalf("Inspect(%q) = %+v; want free", k, st)
			}
		}
		for _, prefix := range []string{"", "orders:", "s"} {
			if keys := listAll(t, op, prefix, 10); len(keys) != 0 {
				t.Fatalf("List(%q) = %q; want none", prefix, keys)
			}
		}
		if b.dialect == sqlstore.MySQL { // the released row keeps its fence
			if st := inspect(t, op, "orders:{42}"); st.Fence != fence {
				t.Fatalf("fence of the released name %d; want %d", st.Fence, fence)
			}
		}
	})
}

// TestInspectShares: permits are the holders in slot order, with their
// mode, slot and TTL; shared holds with their mode; the name is listed
// while they hold it; the record of a waiting exclusive holder is Writer.
func TestInspectShares(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		table := freshTable(t, b, "insp")
		a := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		op := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		toks := []string{token(), token(), token()}
		for i, tok := range toks {
			if slot := mustShare(t, a, "permits", tok, permits(3)); slot != i {
				t.Fatalf("slot %d; want %d", slot, i)
			}
		}
		releaseShare(t, a, "permits", toks[0])
		toks[0] = token()
		mustShare(t, a, "permits", toks[0], permits(3))
		st := inspect(t, op, "permits")
		if len(st.Holders) != 3 {
			t.Fatalf("Holders = %+v", st.Holders)
		}
		for i, h := range st.Holders {
			if h.Token != toks[i] || h.Exclusive || h.Hold != permits(3) || h.Slot != i || h.TTL <= 0 || h.TTL > time.Minute || h.Fence != 0 {
				t.Fatalf("holder %d: %+v; want %s in slot %d", i, h, toks[i], i)
			}
		}

		s1, s2, w := token(), token(), token()
		mustShare(t, a, "shared", s1, shared)
		mustShare(t, a, "shared", s2, shared)
		if ok, _, err := a.TryAcquireWaiting(call(t), "shared", w, time.Minute, time.Minute, false); err != nil || ok {
			t.Fatalf("TryAcquireWaiting beside shares: %v, %v", ok, err)
		}
		st = inspect(t, op, "shared")
		if len(st.Holders) != 2 || st.Holders[0].Token != s1 || st.Holders[1].Token != s2 || st.Writer != w {
			t.Fatalf("Inspect = %+v; want %s, %s shared and the writer %s", st, s1, s2, w)
		}
		for _, h := range st.Holders {
			if h.Hold != shared || h.Slot != 0 || h.Exclusive {
				t.Fatalf("holder %+v; want a shared hold in slot 0", h)
			}
		}
		if keys := listAll(t, op, "", 1); !slices.Equal(keys, []string{"permits", "shared"}) {
			t.Fatalf("List = %q", keys)
		}
		releaseShare(t, a, "shared", s1)
		releaseShare(t, a, "shared", s2)
		if st := inspect(t, op, "shared"); st.Held() || st.Writer != w {
			t.Fatalf("after the shares: %+v; want free, the writer still waiting", st)
		}
		if keys := listAll(t, op, "", 1); !slices.Equal(keys, []string{"permits"}) {
			t.Fatalf("List = %q; a name with only a waiting writer is not held", keys)
		}
	})
}

// TestListPrefix: a prefix is a range of bytes, not a LIKE pattern: '%'
// and '_' match themselves only; a prefix that ends in 0xFF bytes, or is
// all of them, bounds the range right; names are listed in byte order.
func TestListPrefix(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		table := freshTable(t, b, "insp")
		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		names := []string{
			"a%{1}", "a%b", "ab{2}", "a_{3}", "aX{4}", "a", "a ", "a\\{5}",
			"q\xff", "q\xff\xff1", "q\xff\xff\xff", "r", "\xff", "\xff\xff", "é{6}", "ê",
		}
		for _, n := range names {
			mustAcquire(t, s, n, token(), time.Minute, false)
		}
		sorted := slices.Clone(names)
		slices.Sort(sorted)
		for _, limit := range []int{1, 3, lockstore.MaxListLimit} {
			if got := listAll(t, s, "", limit); !slices.Equal(got, sorted) {
				t.Fatalf("List(\"\", limit %d) = %q; want %q", limit, got, sorted)
			}
		}
		for prefix, want := range map[string][]string{
			"a%":        {"a%b", "a%{1}"},
			"a_":        {"a_{3}"},
			"a\\":       {"a\\{5}"},
			"a ":        {"a "},
			"a":         {"a", "a ", "a%b", "a%{1}", "aX{4}", "a\\{5}", "a_{3}", "ab{2}"},
			"q\xff":     {"q\xff", "q\xff\xff1", "q\xff\xff\xff"},
			"q\xff\xff": {"q\xff\xff1", "q\xff\xff\xff"},
			"\xff":      {"\xff", "\xff\xff"},
			"\xff\xff":  {"\xff\xff"},
			"é":         {"é{6}"},
			"%":         nil,
			"_":         nil,
		} {
			if got := listAll(t, s, prefix, 2); !slices.Equal(got, want) {
				t.Errorf("List(%q) = %q; want %q", prefix, got, want)
			}
		}
	})
}

// TestListBadInput: a limit out of range, a cursor of another store or of
// another prefix, and an empty or too long key are errors wrapping
// ErrInvalidOption; a cursor handed out goes on where its page ended.
func TestListBadInput(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		table := freshTable(t, b, "insp")
		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		for _, n := range []string{"x1", "x2", "x3", "y1"} {
			mustAcquire(t, s, n, token(), time.Minute, false)
		}
		keys, next, err := s.List(call(t), "x", "", 2)
		if err != nil || !slices.Equal(keys, []string{"x1", "x2"}) || next == "" {
			t.Fatalf("first page: %q, %q, %v", keys, next, err)
		}
		keys, next2, err := s.List(call(t), "x", next, 2)
		if err != nil || !slices.Equal(keys, []string{"x3"}) || next2 != "" {
			t.Fatalf("second page: %q, %q, %v; want the last", keys, next2, err)
		}
		for _, c := range []struct {
			prefix, cursor string
			limit          int
		}{
			{"x", "", 0},
			{"x", "", -1},
			{"x", "", lockstore.MaxListLimit + 1},
			{"x", "0", 10},         // Redis's SCAN cursor
			{"x", "x1", 10},        // a bare name
			{"x", "zk1:x1", 10},    // ZooKeeper's
			{"x", "sql1:", 10},     // no name
			{"x", "sql1:eDE=", 10}, // padded base64
			{"x", "sql1:e D", 10},  // not base64
			{"y", next, 10},        // a cursor of another prefix
			{"", "sql1:" + strings.Repeat("QUFB", 400), 10}, // longer than any name
		} {
			if _, _, err := s.List(call(t), c.prefix, c.cursor, c.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
				t.Errorf("List(%q, %q, %d): %v; want ErrInvalidOption", c.prefix, c.cursor, c.limit, err)
			}
		}
		for _, k := range []string{"", strings.Repeat("k", sqlstore.MaxKeyLen+1)} {
			if _, err := s.Inspect(call(t), k); !errors.Is(err, lockstore.ErrInvalidOption) {
				t.Errorf("Inspect of a key of %d bytes: %v; want ErrInvalidOption", len(k), err)
			}
		}
	})
}

// TestInspectMissingTable: without the tables, List and Inspect fail with
// ErrNoTable, as every other call does.
func TestInspectMissingTable(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(tableName("none")))
		if _, _, err := s.List(call(t), "", "", 10); !errors.Is(err, sqlstore.ErrNoTable) {
			t.Errorf("List: %v; want ErrNoTable", err)
		}
		if _, err := s.Inspect(call(t), "k"); !errors.Is(err, sqlstore.ErrNoTable) {
			t.Errorf("Inspect: %v; want ErrNoTable", err)
		}
	})
}

// TestInspectTakesNoLock: List and Inspect read without row locks: while a
// share transaction holds the name's rows locked (paused before its
// COMMIT), they answer at once with what was committed, and see the new
// share once it commits.
func TestInspectTakesNoLock(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		table := freshTable(t, b, "insp")
		a := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		w := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		op := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(table))
		first, second := token(), token()
		mustShare(t, a, "busy", first, shared)
		paused, resume := make(chan struct{}), make(chan struct{})
		sqlstore.SetBeforeCommit(w, func() { close(paused); <-resume })
		done := make(chan error, 1)
		long, cancel := context.WithTimeout(context.Background(), time.Minute) // outlasts the reads' 10 s
		defer cancel()
		go func() {
			ok, _, _, err := w.TryAcquireShare(long, "busy", second, time.Minute, shared, false)
			if err == nil && !ok {
				err = errors.New("the second share was refused")
			}
			done <- err
		}()
		<-paused
		st, err := op.Inspect(call(t), "busy")
		keys, _, lerr := op.List(call(t), "", "", 10)
		if lerr == nil { // a bounded range too
			var more []string
			more, _, lerr = op.List(call(t), "bu", "", 10)
			keys = append(keys, more...)
		}
		close(resume)
		if err != nil || lerr != nil {
			t.Fatalf("Inspect and List while a transaction holds the rows: %v, %v", err, lerr)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Token != first || !slices.Equal(keys, []string{"busy", "busy"}) {
			t.Fatalf("during the transaction: %+v, %q; want the committed share only", st, keys)
		}
		if st := inspect(t, op, "busy"); len(st.Holders) != 2 {
			t.Fatalf("after the commit: %+v; want both shares", st)
		}
	})
}
