package rueidisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
)

const inspectTTL = time.Minute

// listAll pages through List of prefix with limit and returns every key
// it handed out, failing t on an error or a page over limit.
func listAll(t *testing.T, in lockstore.Inspector, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for range 100000 {
		keys, next, err := in.List(context.Background(), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %d) returned %d keys", prefix, limit, len(keys))
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

// sameSet fails t unless got holds want's keys, each once, and no other.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: listed %q, want %q", what, g, w)
	}
}

func lockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// recording is a rueidis client that records the name of every command it
// sends.
type recording struct {
	rueidis.Client
	mu    sync.Mutex
	names []string
}

func (c *recording) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *recording) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		c.record(cmd)
	}
	return c.Client.DoMulti(ctx, cmds...)
}

func (c *recording) record(cmd rueidis.Completed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, strings.ToUpper(cmd.Commands()[0]))
}

func (c *recording) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.names {
		if m == name {
			n++
		}
	}
	return n
}

// List hands out the held lock keys under a prefix, each once across
// pages of every size, by SCAN (never KEYS), and never a companion key, a
// released key or a key of another type; Inspect is one read-only script.
func TestListAndInspect(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	rec := &recording{Client: newClient(t, shared.Addr())}
	s := newStore(t, rec)
	prefix := "insp:" + uniq(t) + ":"
	var want []string
	for i := range 9 {
		k := lockKey(prefix, fmt.Sprint(i))
		if ok, _, err := s.TryAcquire(ctx, k, "tok", inspectTTL, i%2 == 0); !ok || err != nil {
			t.Fatal(k, ok, err)
		}
		want = append(want, k)
	}
	pk := lockKey(prefix, "permits")
	p2 := lockstore.Hold{N: 2}
	if ok, _, _, err := s.TryAcquireShare(ctx, pk, "a", inspectTTL, p2, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _, fb, err := s.TryAcquireShare(ctx, pk, "b", 2*inspectTTL, p2, true); !ok || err != nil || fb == 0 {
		t.Fatal(ok, err)
	}
	if ok, _, err := s.TryAcquireWaiting(ctx, pk, "writer", inspectTTL, inspectTTL, false); ok || err != nil {
		t.Fatal(ok, err)
	}
	qk := lockKey(prefix, "queue")
	for i, w := range []string{"head", "w1", "w2"} {
		if g, err := s.Enqueue(ctx, qk, w, time.Duration(i+1)*10*time.Second, 30*time.Second, true); g.OK != (i == 0) || err != nil {
			t.Fatal(w, g, err)
		}
	}
	gone := lockKey(prefix, "gone")
	if ok, _, err := s.TryAcquire(ctx, gone, "g", inspectTTL, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := s.Release(ctx, gone, "g"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	want = append(want, pk, qk)
	for _, limit := range []int{1, 3, lockstore.MaxListLimit} {
		sameSet(t, fmt.Sprintf("limit %d", limit), listAll(t, s, prefix, limit), want)
	}
	if rec.count("SCAN") == 0 || rec.count("KEYS") != 0 {
		t.Fatalf("List sent %d SCAN and %d KEYS; want SCAN only", rec.count("SCAN"), rec.count("KEYS"))
	}

	st, err := s.Inspect(ctx, pk)
	if err != nil || len(st.Holders) != 2 || st.Writer != "writer" || st.Fence == 0 {
		t.Fatalf("Inspect(permits) = %+v, %v", st, err)
	}
	for i, h := range st.Holders {
		if h.Slot != i || h.Hold != p2 || h.Exclusive || h.Fence == 0 || h.TTL <= 0 || h.TTL > 2*inspectTTL {
			t.Fatalf("share %d = %+v", i, h)
		}
	}
	st, err = s.Inspect(ctx, qk)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "head" || !st.Holders[0].Exclusive || len(st.Waiters) != 2 {
		t.Fatalf("Inspect(queue) = %+v, %v", st, err)
	}
	for i, w := range st.Waiters {
		if w.Token != fmt.Sprint("w", i+1) || w.TTL != time.Duration(i+2)*10*time.Second || w.Patience <= 0 || w.Patience > 30*time.Second {
			t.Fatalf("waiter %d = %+v", i, w)
		}
	}
	before := rec.count("EVAL_RO") + rec.count("EVALSHA_RO")
	evals := rec.count("EVAL") + rec.count("EVALSHA")
	if _, err := s.Inspect(ctx, qk); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("EVAL_RO") + rec.count("EVALSHA_RO") - before; n != 1 || rec.count("EVAL")+rec.count("EVALSHA") != evals {
		t.Fatalf("Inspect sent %d read-only scripts, and other scripts; want 1 read-only", n)
	}

	if _, _, err := s.List(ctx, prefix, "", 0); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Fatalf("List with limit 0 = %v; want ErrInvalidOption", err)
	}
	if _, _, err := s.List(ctx, prefix, "nonsense", 10); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Fatalf("List with a foreign cursor = %v; want ErrInvalidOption", err)
	}
}

// A server without EVAL_RO (before Redis 7.0; here renamed away) has
// Inspect run its script by EVAL.
func TestInspectWithoutEvalRO(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	srv := redistest.Start(t, "--rename-command", "EVAL_RO", "eval-ro-renamed", "--rename-command", "EVALSHA_RO", "evalsha-ro-renamed")
	s := newStore(t, newClient(t, srv.Addr()))
	k := lockKey("ro:", "a")
	if ok, _, err := s.TryAcquire(ctx, k, "tok", inspectTTL, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for range 2 {
		st, err := s.Inspect(ctx, k)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "tok" || st.Fence == 0 {
			t.Fatalf("Inspect = %+v, %v", st, err)
		}
	}
}

// On a Cluster of three masters List walks every master: keys of many
// hash tags, spread over the three, come in pages of every size, each
// once.
func TestListClusterEveryMaster(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3, 0)
	s := newStore(t, newClient(t, cluster.Addrs()...))
	prefix := "cl:" + uniq(t) + ":"
	var want []string
	masters := make(map[string]bool)
	for i := range 30 {
		k := lockKey(prefix, fmt.Sprint(i))
		if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, i%3 == 0); !ok || err != nil {
			t.Fatal(k, ok, err)
		}
		m, err := cluster.MasterOf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()] = true
		want = append(want, k)
	}
	if len(masters) != 3 {
		t.Fatalf("the keys live on %d masters, want 3", len(masters))
	}
	for _, limit := range []int{1, 4, lockstore.MaxListLimit} {
		sameSet(t, fmt.Sprintf("limit %d", limit), listAll(t, s, prefix, limit), want)
	}
	st, err := s.Inspect(ctx, want[0])
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "t" || st.Fence == 0 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}

	// a key without a hash tag: its companion keys hash apart, and the
	// scripts are refused with an error (rueidis would panic)
	plain := "plain:" + uniq(t)
	if redisscript.OneSlot(redisscript.InspectKeys(plain)) {
		t.Fatalf("%s and its companion keys share a slot", plain)
	}
	if _, err := s.Inspect(ctx, plain); err == nil || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("Inspect(%s) = %v; want an error about the hash tag", plain, err)
	}
	if _, err := s.Release(ctx, plain, "t"); err == nil || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("Release(%s) = %v; want an error about the hash tag", plain, err)
	}
}

// On a Sentinel-managed master List and Inspect see the master's locks.
func TestInspectSentinel(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	d := redistest.StartSentinel(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{d.Sentinel.Addr()},
		Sentinel:     rueidis.SentinelOption{MasterSet: d.MasterName},
		DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := newStore(t, c)
	k := lockKey("sent:", "a")
	if ok, _, err := s.TryAcquire(ctx, k, "tok", inspectTTL, false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	sameSet(t, "sentinel", listAll(t, s, "sent:", 10), []string{k})
	st, err := s.Inspect(ctx, k)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "tok" {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
}
