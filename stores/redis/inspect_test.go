package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

const inspectTTL = time.Minute

// listAll pages through List of prefix with limit and returns every key
// it handed out, in order, failing t on an error or a page over limit.
func listAll(t *testing.T, in lockstore.Inspector, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatalf("List(%q) did not end", prefix)
		}
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

// lockKey is a key of the shape core.Locker gives a name.
func lockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// List hands out the held lock keys under a prefix, each once across
// pages of every size, and never a companion key (fence counter, queue and
// its entries, shares, slots, waiting writer), a released key, a key of
// another type or a key outside the prefix.
func TestListHeldLockKeysOnly(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	prefix := "insp:" + uniq(t) + ":"
	var want []string
	for i := range 7 {
		k := lockKey(prefix, fmt.Sprint("x", i))
		if ok, _, err := s.TryAcquire(ctx, k, "tok"+fmt.Sprint(i), inspectTTL, i%2 == 0); !ok || err != nil {
			t.Fatalf("TryAcquire(%s) = %v, %v", k, ok, err)
		}
		want = append(want, k)
	}
	// shares, and a waiting writer: :shares, :slots, :writer
	sk := lockKey(prefix, "shared")
	share(t, s, sk, "r1", permits2, true, true)
	if ok, _, err := s.TryAcquireWaiting(ctx, sk, "w1", inspectTTL, inspectTTL, false); ok || err != nil {
		t.Fatalf("TryAcquireWaiting = %v, %v", ok, err)
	}
	want = append(want, sk)
	// a fair queue: :queue, :waiters
	qk := lockKey(prefix, "queued")
	if g, err := s.Enqueue(ctx, qk, "q0", inspectTTL, inspectTTL, true); !g.OK || err != nil {
		t.Fatalf("Enqueue = %v, %v", g, err)
	}
	if g, err := s.Enqueue(ctx, qk, "q1", inspectTTL, inspectTTL, true); g.OK || err != nil {
		t.Fatalf("Enqueue = %v, %v", g, err)
	}
	want = append(want, qk)
	// released: its fence counter lives on for a grace
	gone := lockKey(prefix, "gone")
	if ok, _, err := s.TryAcquire(ctx, gone, "g", inspectTTL, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := s.Release(ctx, gone, "g"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// a key of another type, and a key beside the prefix
	if err := c.HSet(ctx, lockKey(prefix, "hash"), "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, strings.TrimSuffix(prefix, ":")+"{beside}", "v", inspectTTL).Err(); err != nil {
		t.Fatal(err)
	}
	// every companion key is there to be left out
	for _, k := range []string{sk + ":fence", sk + ":shares", sk + ":slots", sk + ":writer", qk + ":fence", qk + ":queue", qk + ":waiters", want[0] + ":fence", gone + ":fence"} {
		if n, err := c.Exists(ctx, k).Result(); n != 1 || err != nil {
			t.Fatalf("EXISTS %s = %d, %v", k, n, err)
		}
	}
	for _, limit := range []int{1, 2, 3, 5, lockstore.MaxListLimit} {
		sameSet(t, fmt.Sprintf("limit %d", limit), listAll(t, s, prefix, limit), want)
	}
}

// A page that a SCAN overfills keeps the rest in its cursor: with limit 1
// and 40 keys, every page holds at most one key and none is lost.
func TestListPagesOfOne(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	prefix := "one:" + uniq(t) + ":"
	var want []string
	for i := range 40 {
		k := lockKey(prefix, fmt.Sprint(i))
		if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, false); !ok || err != nil {
			t.Fatal(ok, err)
		}
		want = append(want, k)
	}
	sameSet(t, "limit 1", listAll(t, s, prefix, 1), want)
}

// The glob's special characters in a prefix match themselves: a prefix
// with * ? [ ] \ lists its own keys, not those its unescaped pattern would
// match.
func TestListEscapesMatchPattern(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	base := "esc:" + uniq(t)
	prefix := base + `:a*b?c[d]e\f^g-h:`
	mine := []string{lockKey(prefix, "1"), lockKey(prefix, "2")}
	others := []string{
		lockKey(base+`:aXXbYc`+"d"+`e\f^g-h:`, "3"), // what a*b?c[d]e would match
		lockKey(base+`:a*b?c[d]ef^g-h:`, "4"),       // \f unescaped: "f"
		lockKey(base+`:a*b?c[d]e\f^g-h`, "5"),       // no trailing colon
	}
	for _, k := range append(slices.Clone(mine), others...) {
		if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, false); !ok || err != nil {
			t.Fatal(k, ok, err)
		}
	}
	sameSet(t, "escaped prefix", listAll(t, s, prefix, 10), mine)
}

// List refuses a limit out of 1..MaxListLimit and a cursor it did not hand
// out (garbage, or one of another prefix), with ErrInvalidOption.
func TestListRefusesBadInput(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	prefix := "bad:" + uniq(t) + ":"
	for i := range 3 {
		if ok, _, err := s.TryAcquire(ctx, lockKey(prefix, fmt.Sprint(i)), "t", inspectTTL, false); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	_, next, err := s.List(ctx, prefix, "", 1)
	if err != nil || next == "" {
		t.Fatalf("List = %q, %v; want a cursor", next, err)
	}
	for _, tc := range []struct {
		prefix, cursor string
		limit          int
	}{
		{prefix, "", 0}, {prefix, "", -1}, {prefix, "", lockstore.MaxListLimit + 1},
		{prefix, "garbage", 10}, {prefix, "rs1.!!", 10}, {prefix, "rs1.e30", 10},
		{"other:", next, 10},
	} {
		if _, _, err := s.List(ctx, tc.prefix, tc.cursor, tc.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("List(%q, %q, %d) = %v; want ErrInvalidOption", tc.prefix, tc.cursor, tc.limit, err)
		}
	}
}

// counter is a go-redis hook that counts the commands sent, by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *counter) add(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[strings.ToLower(cmd.Name())]++
}
func (c *counter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// List walks the keyspace with SCAN, never KEYS, and Inspect is one
// read-only script (EVAL_RO or EVALSHA_RO), one command per call.
func TestListScansAndInspectReadsOnly(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	var hook counter
	c.AddHook(&hook)
	s := redisstore.New(c)
	defer s.Close()
	prefix := "scan:" + uniq(t) + ":"
	k := lockKey(prefix, "a")
	if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	sameSet(t, "list", listAll(t, s, prefix, 10), []string{k})
	if hook.count("scan") == 0 || hook.count("keys") != 0 {
		t.Fatalf("List sent %d SCAN and %d KEYS; want SCAN only", hook.count("scan"), hook.count("keys"))
	}
	for i := range 2 {
		before := hook.count("eval_ro") + hook.count("evalsha_ro")
		all := hook.count("eval") + hook.count("evalsha")
		if _, err := s.Inspect(ctx, k); err != nil {
			t.Fatal(err)
		}
		if ro := hook.count("eval_ro") + hook.count("evalsha_ro") - before; ro != 1 || hook.count("eval")+hook.count("evalsha") != all {
			t.Fatalf("Inspect %d sent %d read-only scripts and %d others; want 1 and 0", i, ro, hook.count("eval")+hook.count("evalsha")-all)
		}
	}
}

// A server without EVAL_RO (before Redis 7.0; here renamed away) has
// Inspect run its script by EVAL.
func TestInspectWithoutEvalRO(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	srv := redistest.Start(t, "--rename-command", "EVAL_RO", "eval-ro-renamed", "--rename-command", "EVALSHA_RO", "evalsha-ro-renamed")
	s := redisstore.New(srv.Client(t))
	defer s.Close()
	k := lockKey("ro:", "a")
	if ok, _, err := s.TryAcquire(ctx, k, "tok", inspectTTL, true); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for range 2 {
		st, err := s.Inspect(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Token != "tok" || st.Fence == 0 {
			t.Fatalf("Inspect = %+v", st)
		}
	}
}

// checkTTL fails t unless d is in (0, max].
func checkTTL(t *testing.T, what string, d, max time.Duration) {
	t.Helper()
	if d <= 0 || d > max {
		t.Fatalf("%s: TTL %v, want in (0, %v]", what, d, max)
	}
}

// Inspect tells an exclusive holder (token, TTL, the key's fence), the
// shares of permits in slot order (with their TTLs and fences) and the
// writer that waits for them, and the live waiters of a fair queue, head
// first, with the TTL they asked for and their patience left.
func TestInspectTellsHoldersWaitersWriter(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	s := redisstore.New(shared.Client(t))
	defer s.Close()
	prefix := "state:" + uniq(t) + ":"

	free, err := s.Inspect(ctx, lockKey(prefix, "free"))
	if err != nil || free.Held() || len(free.Waiters) != 0 || free.Writer != "" || free.Fence != 0 || free.Key != lockKey(prefix, "free") {
		t.Fatalf("Inspect of a free key = %+v, %v", free, err)
	}

	ex := lockKey(prefix, "ex")
	ok, fence, err := s.TryAcquire(ctx, ex, "holder", inspectTTL, true)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	st, err := s.Inspect(ctx, ex)
	if err != nil || len(st.Holders) != 1 || st.Fence != fence {
		t.Fatalf("Inspect(exclusive) = %+v, %v; want fence %d", st, err, fence)
	}
	if h := st.Holders[0]; h.Token != "holder" || !h.Exclusive || h.Slot != 0 || h.Hold != (lockstore.Hold{}) {
		t.Fatalf("exclusive holder = %+v", h)
	}
	checkTTL(t, "exclusive", st.Holders[0].TTL, inspectTTL)

	// three permits, slots 0 and 1 taken, slot 0 released, then slot 0 again:
	// shares in slot order whatever their expiry
	pk := lockKey(prefix, "permits")
	p3 := lockstore.Hold{N: 3}
	share(t, s, pk, "a", p3, true, true)
	_, fb := share(t, s, pk, "b", p3, true, true)
	if ok, err := s.ReleaseShare(ctx, pk, "a"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _, _, err := s.TryAcquireShare(ctx, pk, "c", 2*inspectTTL, p3, false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _, err := s.TryAcquireWaiting(ctx, pk, "writer", inspectTTL, inspectTTL, false); ok || err != nil {
		t.Fatal(ok, err)
	}
	st, err = s.Inspect(ctx, pk)
	if err != nil || len(st.Holders) != 2 || st.Writer != "writer" || st.Fence < fb {
		t.Fatalf("Inspect(permits) = %+v, %v", st, err)
	}
	c, b := st.Holders[0], st.Holders[1]
	if c.Token != "c" || c.Slot != 0 || c.Exclusive || c.Hold != p3 || c.Fence != 0 {
		t.Fatalf("slot 0 = %+v", c)
	}
	if b.Token != "b" || b.Slot != 1 || b.Exclusive || b.Hold != p3 || b.Fence != fb {
		t.Fatalf("slot 1 = %+v; want fence %d", b, fb)
	}
	checkTTL(t, "share c", c.TTL, 2*inspectTTL)
	checkTTL(t, "share b", b.TTL, inspectTTL)

	// shared holds (N = 0)
	rk := lockKey(prefix, "readers")
	share(t, s, rk, "r1", shared0, false, true)
	share(t, s, rk, "r2", shared0, false, true)
	st, err = s.Inspect(ctx, rk)
	if err != nil || len(st.Holders) != 2 {
		t.Fatalf("Inspect(shared) = %+v, %v", st, err)
	}
	tokens := []string{st.Holders[0].Token, st.Holders[1].Token}
	sameSet(t, "readers", tokens, []string{"r1", "r2"})

	// a fair queue behind a holder
	qk := lockKey(prefix, "queue")
	if g, err := s.Enqueue(ctx, qk, "head", inspectTTL, inspectTTL, false); !g.OK || err != nil {
		t.Fatal(g, err)
	}
	for i, w := range []string{"w1", "w2", "w3"} {
		ttl := time.Duration(i+1) * 10 * time.Second
		if g, err := s.Enqueue(ctx, qk, w, ttl, 30*time.Second, false); g.OK || err != nil {
			t.Fatal(g, err)
		}
	}
	if err := s.Dequeue(ctx, qk, "w2"); err != nil {
		t.Fatal(err)
	}
	st, err = s.Inspect(ctx, qk)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "head" || len(st.Waiters) != 2 {
		t.Fatalf("Inspect(queue) = %+v, %v", st, err)
	}
	for i, want := range []struct {
		token string
		ttl   time.Duration
	}{{"w1", 10 * time.Second}, {"w3", 30 * time.Second}} {
		w := st.Waiters[i]
		if w.Token != want.token || w.TTL != want.ttl {
			t.Fatalf("waiter %d = %+v, want %s with TTL %v", i, w, want.token, want.ttl)
		}
		checkTTL(t, "patience of "+w.Token, w.Patience, 30*time.Second)
	}
}

// Inspect reports only the live shares and waiters, with the TTL and
// patience they have left (not what they asked for), on a state written
// by hand around the server's clock: a share and a waiter expired a second
// ago, a share and a waiter that live 5 s more.
func TestInspectLiveOnlyWithTimeLeft(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	s := redisstore.New(c)
	defer s.Close()
	key := lockKey("crafted:", uniq(t))
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, "reqlock:shares:2", 10*time.Second)
		p.ZAdd(ctx, key+":shares", redis.Z{Score: float64(ms - 1000), Member: "expired"}, redis.Z{Score: float64(ms + 5000), Member: "live"})
		p.HSet(ctx, key+":slots", "expired", "0 3", "live", "1 7")
		p.ZAdd(ctx, key+":queue", redis.Z{Score: 1, Member: "dead"}, redis.Z{Score: 2, Member: "alive"})
		p.HSet(ctx, key+":waiters", "dead", fmt.Sprintf("%d 10000 0 60000", ms-1000), "alive", fmt.Sprintf("%d 20000 1 60000", ms+5000))
		for _, k := range []string{key + ":shares", key + ":slots", key + ":queue", key + ":waiters"} {
			p.Expire(ctx, k, 10*time.Second)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || len(st.Waiters) != 1 {
		t.Fatalf("Inspect = %+v; want the live share and the live waiter only", st)
	}
	if h := st.Holders[0]; h.Token != "live" || h.Slot != 1 || h.Fence != 7 || h.Hold != permits2 || h.Exclusive {
		t.Fatalf("share = %+v", h)
	}
	checkTTL(t, "share", st.Holders[0].TTL, 5*time.Second)
	if w := st.Waiters[0]; w.Token != "alive" || w.TTL != 20*time.Second {
		t.Fatalf("waiter = %+v", w)
	}
	checkTTL(t, "patience", st.Waiters[0].Patience, 5*time.Second)
}
