package redisscript_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/lockstore"
)

// fakeScan is a deployment of masters whose SCAN returns more keys than
// COUNT asks for (as Redis may: a bucket's whole chain), so that List must
// keep what does not fit in its page.
type fakeScan struct {
	nodes map[string][]string // keys per master, in SCAN order
	held  map[string]bool     // the keys that hold a string
	over  int                 // extra keys per SCAN
	scans []string            // the masters scanned, in order
}

func (f *fakeScan) Nodes(context.Context) ([]string, error) {
	var addrs []string
	for a := range f.nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return addrs, nil
}

func (f *fakeScan) Scan(_ context.Context, node string, cursor uint64, match string, count int) ([]string, uint64, error) {
	f.scans = append(f.scans, node)
	keys, ok := f.nodes[node]
	if !ok {
		return nil, 0, fmt.Errorf("no node %q", node)
	}
	prefix := strings.TrimSuffix(match, "*")
	prefix = strings.NewReplacer(`\*`, `*`, `\?`, `?`, `\[`, `[`, `\]`, `]`, `\\`, `\`).Replace(prefix)
	end := min(int(cursor)+count+f.over, len(keys))
	var out []string
	for _, k := range keys[cursor:end] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	if end == len(keys) {
		return out, 0, nil
	}
	return out, uint64(end), nil
}

func (f *fakeScan) Strings(_ context.Context, keys []string) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = f.held[k]
	}
	return out, nil
}

// pageAll pages through List and returns every key handed out.
func pageAll(t *testing.T, sc redisscript.Scanner, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for range 10000 {
		keys, next, err := redisscript.List(context.Background(), sc, prefix, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > limit {
			t.Fatalf("a page of %d keys over a limit of %d", len(keys), limit)
		}
		all = append(all, keys...)
		if cursor = next; cursor == "" {
			return all
		}
	}
	t.Fatal("List did not end")
	return nil
}

// A SCAN that returns more keys than the page has room for leaves the rest
// in the cursor: none is lost, none comes twice; masters are walked in the
// order of their addresses; companion keys, keys that hold no string and
// keys outside the prefix are left out.
func TestListKeepsWhatDoesNotFit(t *testing.T) {
	f := &fakeScan{nodes: map[string][]string{}, held: map[string]bool{}, over: 5}
	var want []string
	for _, node := range []string{"c:3", "a:1", "b:2"} {
		for i := range 12 {
			k := fmt.Sprintf("p:{%s-%d}", node, i)
			f.nodes[node] = append(f.nodes[node], k, k+":fence", k+":queue", "q:{x}")
			f.held[k], f.held[k+":fence"], f.held["q:{x}"] = i%4 != 3, true, true
			if i%4 != 3 {
				want = append(want, k)
			}
		}
	}
	for _, limit := range []int{1, 2, 3, 10, 1000} {
		f.scans = nil
		got := pageAll(t, f, "p:", limit)
		g, w := slices.Clone(got), slices.Clone(want)
		slices.Sort(g)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Fatalf("limit %d: listed %q, want %q", limit, got, want)
		}
		if !slices.IsSorted(f.scans) || len(slices.Compact(slices.Clone(f.scans))) != 3 {
			t.Fatalf("limit %d: masters scanned in the order %q", limit, f.scans)
		}
	}
}

// A cursor whose master is gone (a failover) starts the walk over; a
// limit out of range or a cursor List did not hand out is an invalid
// option.
func TestListCursor(t *testing.T) {
	f := &fakeScan{nodes: map[string][]string{"a:1": {"p:{1}", "p:{2}"}, "b:2": {"p:{3}"}}, held: map[string]bool{"p:{1}": true, "p:{2}": true, "p:{3}": true}}
	ctx := context.Background()
	keys, next, err := redisscript.List(ctx, f, "p:", "", 2)
	if err != nil || len(keys) != 2 || next == "" {
		t.Fatalf("first page = %q, %q, %v", keys, next, err)
	}
	f.nodes["c:3"] = f.nodes["b:2"]
	delete(f.nodes, "b:2")
	keys, next, err = redisscript.List(ctx, f, "p:", next, 10)
	if err != nil || next != "" || len(keys) != 3 {
		t.Fatalf("after the master was replaced = %q, %q, %v; want every key again", keys, next, err)
	}
	_, next, _ = redisscript.List(ctx, f, "p:", "", 1)
	for _, tc := range []struct {
		prefix, cursor string
		limit          int
	}{{"p:", "", 0}, {"p:", "", lockstore.MaxListLimit + 1}, {"p:", "x", 1}, {"q:", next, 1}, {"p:", next + "x", 1}} {
		if _, _, err := redisscript.List(ctx, f, tc.prefix, tc.cursor, tc.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("List(%q, %q, %d) = %v; want ErrInvalidOption", tc.prefix, tc.cursor, tc.limit, err)
		}
	}
}

// MatchPattern escapes the glob's special characters.
func TestMatchPattern(t *testing.T) {
	if got, want := redisscript.MatchPattern(`a*b?c[d]e\f{g}`), `a\*b\?c\[d\]e\\f{g}*`; got != want {
		t.Fatalf("MatchPattern = %q, want %q", got, want)
	}
}
