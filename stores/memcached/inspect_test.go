package memcachedstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/lockstore"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
)

// listAll pages through s.List(prefix) with limit and returns every key of
// every page, in order.
func listAll(t *testing.T, s *memcachedstore.Store, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for pages := 1; ; pages++ {
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
		if pages > 1000 {
			t.Fatalf("List(%q) pages on without end (cursor %q)", prefix, next)
		}
		cursor = next
	}
}

// hashedKey is the item key of a key memcached cannot take as it is.
func hashedKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "reqlock-sha256:" + hex.EncodeToString(sum[:])
}

// longToken is a token as long as a Locker's with holder identity (up to
// 241 bytes): the keys of its share items are too long for memcached, and
// hashed.
func longToken(name string) string { return name + "." + strings.Repeat("h", 230) }

// TestListPages: held keys (exclusive, shared, permits) are listed once
// each, in byte order, whatever the page size; their companion items
// (share items, short or hashed, the waiter record, the fence counter) are
// not; neither are a key whose only record is a waiter's, a released key,
// a list of shares that all expired, and keys outside the prefix.
func TestListPages(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	base := uniq(t)
	key := func(n string) string { return base + ":" + n }

	acquire(t, s, key("a"), "ta", time.Minute, true) // and its fence counter
	for i := range 4 {
		share(t, s, key("b"), fmt.Sprint("tb", i), sharedHold, false)
	}
	share(t, s, key("b"), longToken("tb"), sharedHold, true)
	share(t, s, key("c"), "tc0", permits3, false)
	share(t, s, key("c"), "tc1", permits3, false)
	acquire(t, s, key("d"), "td", time.Minute, false)
	share(t, s, key("e"), "te", sharedHold, false) // and a waiting writer
	if ok, _, err := s.TryAcquireWaiting(ctx(t), key("e"), "we", time.Minute, time.Minute, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	share(t, s, key("f"), "tf", sharedHold, false) // a waiter record alone
	if ok, _, err := s.TryAcquireWaiting(ctx(t), key("f"), "wf", time.Minute, time.Minute, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	unshare(t, s, key("f"), "tf")
	acquire(t, s, key("g"), "tg", time.Minute, false) // released
	release(t, s, key("g"), "tg")
	// h: a list of shares whose share item is gone, as if it expired.
	dead := "\x00reqlock-shares 0\n0 600 \"dead\"\n"
	if err := admin.Set(&memcache.Item{Key: key("h"), Value: []byte(dead), Expiration: 600}); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, base+"x", "outside", time.Minute, false) // not under base + ":"

	want := []string{key("a"), key("b"), key("c"), key("d"), key("e")}
	for _, limit := range []int{1, 2, 3, 7, lockstore.MaxListLimit} {
		if got := listAll(t, s, base+":", limit); !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q; want %q", limit, got, want)
		}
	}
	got := listAll(t, s, base, lockstore.MaxListLimit)
	if want := append(want, base+"x"); !slices.Equal(got, want) {
		t.Errorf("listed %q; want %q", got, want)
	}
	// The hashed item of b's long share is not a lock.
	if got := listAll(t, s, hashedKey(key("b")+":share:"+longToken("tb")), 10); len(got) != 0 {
		t.Errorf("List under the key of a hashed share item: %q; want none", got)
	}
}

// TestListHashedKeys: a key memcached cannot take as it is is listed by its
// item key ("reqlock-sha256:" and its hash), which Inspect takes; its
// companion items, hashed as well, are not listed.
func TestListHashedKeys(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	base := uniq(t)
	x, r := base+" exclusive", base+" shared"
	acquire(t, s, x, "tx", time.Minute, true)
	share(t, s, r, "r1", sharedHold, false)
	share(t, s, r, "r0", sharedHold, false)
	for _, c := range []struct {
		key    string
		tokens []string
	}{{x, []string{"tx"}}, {r, []string{"r1", "r0"}}} {
		hk := hashedKey(c.key)
		if got := listAll(t, s, hk, 10); !slices.Equal(got, []string{hk}) {
			t.Errorf("List(%q): %q; want the hashed key", hk, got)
		}
		st, err := s.Inspect(ctx(t), hk)
		if err != nil {
			t.Fatal(err)
		}
		var tokens []string
		for _, h := range st.Holders {
			tokens = append(tokens, h.Token)
		}
		if !slices.Equal(tokens, c.tokens) || st.Key != hk {
			t.Errorf("Inspect(%q): %+v; want holders %q", hk, st, c.tokens)
		}
	}
	for _, companion := range []string{x + ":fence", r + ":share:r1"} {
		if got := listAll(t, s, hashedKey(companion), 10); len(got) != 0 {
			t.Errorf("List lists the hashed companion %q: %q", companion, got)
		}
	}
	// The key itself, inspected by its name: the same holders, and its fence.
	st, err := s.Inspect(ctx(t), x)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "tx" || st.Fence <= 0 || st.Holders[0].TTL <= 0 {
		t.Errorf("Inspect(%q): %+v, %v", x, st, err)
	}
}

// TestListBadArguments: a limit out of range, a cursor the listing did
// not hand out, or a Store that does not know its servers is an error
// wrapping lockstore.ErrInvalidOption.
func TestListBadArguments(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	base := uniq(t)
	acquire(t, s, base+":a", "t", time.Minute, false)
	acquire(t, s, base+":b", "t", time.Minute, false)
	_, next, err := s.List(ctx(t), base+":", "", 1)
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
		if _, _, err := s.List(ctx(t), c.prefix, c.cursor, c.limit); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("List(%q, %q, %d): %v; want ErrInvalidOption", c.prefix, c.cursor, c.limit, err)
		}
	}
	blind := storeOn(t, newClient(t, shared.Addr()))
	if _, _, err := blind.List(ctx(t), base, "", 10); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Errorf("List of a Store without WithServers: %v; want ErrInvalidOption", err)
	}
	// Inspect works without them; the TTLs are unknown.
	if st, err := blind.Inspect(ctx(t), base+":a"); err != nil || len(st.Holders) != 1 || st.Holders[0].TTL != 0 {
		t.Errorf("Inspect of a Store without WithServers: %+v, %v", st, err)
	}
	for _, opt := range []memcachedstore.Option{memcachedstore.WithServers(), memcachedstore.WithServers("no port")} {
		if _, err := memcachedstore.New(newClient(t, shared.Addr()), opt); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("New with a bad WithServers: %v; want ErrInvalidOption", err)
		}
	}
}

// TestInspectHolders: Inspect reports an exclusive holder with its token
// and TTL, and the key's fence; shares in slot order, each with its own
// TTL; the token of a waiting writer; and nothing for a free key.
func TestInspectHolders(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	base := uniq(t)

	x := base + ":x"
	fence := acquire(t, s, x, "tx", 20*time.Second, true)
	st, err := s.Inspect(ctx(t), x)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Writer != "" || len(st.Waiters) != 0 || st.Key != x || st.Fence != fence {
		t.Fatalf("Inspect of an exclusive hold: %+v; want fence %d", st, fence)
	}
	// memcached's TTL less the store's two seconds: at most the TTL asked
	// for (memcached's clock ticks once a second: a second more).
	if h := st.Holders[0]; h.Token != "tx" || !h.Exclusive || h.TTL <= 0 || h.TTL > 21*time.Second {
		t.Errorf("Inspect: holder %+v; want tx, exclusive, a TTL within (0, 21s]", h)
	}

	p := base + ":p"
	share(t, s, p, "p0", permits3, false)
	share(t, s, p, "p1", permits3, false)
	share(t, s, p, longToken("p2"), permits3, false) // a hashed share item
	unshare(t, s, p, "p0")
	share(t, s, p, "p0b", permits3, false) // slot 0 again, listed last
	st, err = s.Inspect(ctx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, h := range st.Holders {
		got = append(got, fmt.Sprintf("%.3s@%d/%d", h.Token, h.Slot, h.Hold.N))
		if h.Exclusive || h.TTL <= 0 || h.TTL > 11*time.Second {
			t.Errorf("share %d: %+v; want a TTL within (0, 11s]", i, h)
		}
	}
	if want := []string{"p0b@0/3", "p1@1/3", "p2.@2/3"}; !slices.Equal(got, want) {
		t.Errorf("Inspect of permits: %q; want %q", got, want)
	}

	r := base + ":r"
	share(t, s, r, "r1", sharedHold, false)
	share(t, s, r, "r0", sharedHold, false)
	if ok, _, err := s.TryAcquireWaiting(ctx(t), r, "writer", time.Minute, time.Minute, false); err != nil || ok {
		t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
	}
	st, err = s.Inspect(ctx(t), r)
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

	st, err = s.Inspect(ctx(t), base+":free")
	if err != nil || st.Held() || st.Writer != "" || st.Fence != 0 {
		t.Errorf("Inspect of a free key: %+v, %v", st, err)
	}

	// A list whose share item is gone (as if it expired) beside a live one.
	d := base + ":dead"
	share(t, s, d, "live", sharedHold, false)
	it, err := newClient(t, shared.Addr()).Get(d)
	if err != nil {
		t.Fatal(err)
	}
	it.Value = append(it.Value, "0 600 \"dead\"\n"...)
	if err := newClient(t, shared.Addr()).CompareAndSwap(it); err != nil {
		t.Fatal(err)
	}
	st, err = s.Inspect(ctx(t), d)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "live" {
		t.Errorf("Inspect of a list with a dead share: %+v, %v; want the live share alone", st, err)
	}
}

// TestListSeesItemsThatMove: items that memcached moves from one LRU to
// another while List dumps them (a gets marks them active, and memcached's
// LRU maintainer moves them) are listed: the dump walks the hash table.
// (A dump of the LRUs, lru_crawler metadump all, missed some in about one
// round in ten.)
func TestListSeesItemsThatMove(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	base := uniq(t)
	var want []string
	for round := range 40 {
		for i := range 10 {
			k := fmt.Sprintf("%s:%02d:%d", base, round, i)
			acquire(t, s, k, "t", time.Minute, false)
			want = append(want, k)
		}
		if _, err := admin.GetMulti(want); err != nil {
			t.Fatal(err)
		}
		if got := listAll(t, s, base+":", lockstore.MaxListLimit); !slices.Equal(got, want) {
			t.Fatalf("round %d: listed %d keys; want %d (missing %q)", round, len(got), len(want), missing(want, got))
		}
	}
}

func missing(want, got []string) []string {
	var out []string
	for _, k := range want {
		if !slices.Contains(got, k) {
			out = append(out, k)
		}
	}
	return out
}

// TestInspectOnSeveralServers: a Store on two servers lists the keys of
// both, and finds each key's TTL on its own server.
func TestInspectOnSeveralServers(t *testing.T) {
	leakCheck(t)
	other := servers.StartMemcached(t, "-m", "16")
	addrs := []string{shared.Addr(), other.Addr()}
	c := memcache.New(addrs...)
	c.Timeout = 5 * time.Second
	t.Cleanup(func() { _ = c.Close() })
	s := storeOn(t, c, memcachedstore.WithServers(addrs...))
	one := newClient(t, other.Addr()) // the second server alone
	base := uniq(t)
	var want []string
	onOther := 0
	for i := range 16 {
		k := fmt.Sprintf("%s:%02d", base, i)
		acquire(t, s, k, "t"+k, time.Minute, false)
		want = append(want, k)
		if _, err := one.Get(k); err == nil {
			onOther++
		}
	}
	if onOther == 0 || onOther == len(want) {
		t.Fatalf("%d of %d keys on the second server: the test needs both", onOther, len(want))
	}
	for _, limit := range []int{3, 100} {
		if got := listAll(t, s, base, limit); !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q; want %q", limit, got, want)
		}
	}
	for _, k := range want {
		st, err := s.Inspect(ctx(t), k)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "t"+k || st.Holders[0].TTL <= 0 {
			t.Errorf("Inspect(%q): %+v, %v", k, st, err)
		}
	}
}

// TestInspectReadsOnly: List and Inspect change nothing: the holder's item
// keeps its value and CAS unique.
func TestInspectReadsOnly(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	acquire(t, s, key, "t", time.Minute, true)
	before, err := admin.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.List(ctx(t), key, "", 1); err != nil {
		t.Fatal(err)
	}
	after, err := admin.Get(key)
	if err != nil || after.CasID != before.CasID || string(after.Value) != "t" {
		t.Fatalf("the item after Inspect and List: %+v, %v; before %+v", after, err, before)
	}
	release(t, s, key, "t")
}

// TestListOfAStalledServerEndsWithItsContext: a server that stops
// answering (frozen) does not hold List or Inspect past their context: they
// return its error, and leave no goroutine behind.
func TestListOfAStalledServerEndsWithItsContext(t *testing.T) {
	leakCheck(t)
	srv := servers.StartMemcached(t)
	c := newClient(t, srv.Addr())
	c.Timeout = time.Hour // only the context can end the calls (a hang fails by go test -timeout)
	s := storeOn(t, c, memcachedstore.WithServers(srv.Addr()))
	key := uniq(t)
	acquire(t, s, key, "t", time.Minute, false)
	if err := srv.Freeze(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = srv.Thaw() })
	for _, cancelled := range []bool{false, true} {
		cx, cancel := context.WithTimeout(context.Background(), time.Second)
		want := context.DeadlineExceeded
		if cancelled {
			cx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			want = context.Canceled
		}
		_, _, err := s.List(cx, "", "", 10)
		if !errors.Is(err, want) {
			t.Errorf("List of a frozen server (cancelled: %v): %v; want %v", cancelled, err, want)
		}
		cancel()
	}
}

// TestListWithoutTheCrawler: a server whose LRU crawler is off fails List
// with an error that quotes its answer; Inspect does not need it.
func TestListWithoutTheCrawler(t *testing.T) {
	leakCheck(t)
	srv := servers.StartMemcached(t, "-o", "no_lru_crawler")
	s := newStore(t, srv.Addr())
	key := uniq(t)
	acquire(t, s, key, "t", time.Minute, false)
	_, _, err := s.List(ctx(t), "", "", 10)
	if err == nil || !strings.Contains(err.Error(), "lru crawler disabled") {
		t.Errorf("List of a server without its crawler: %v; want its answer quoted", err)
	}
	if st, err := s.Inspect(ctx(t), key); err != nil || len(st.Holders) != 1 {
		t.Errorf("Inspect: %+v, %v", st, err)
	}
}
