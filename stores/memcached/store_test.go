package memcachedstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
)

// The conformance suite, through a proxy that Down cuts.
func TestConformance(t *testing.T) {
	proxy := redistest.NewProxy(t, shared.Addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		return newStore(t, proxy.Addr())
	}, storetest.Options{
		TTLResolution: time.Second,
		Down:          func(*testing.T) { proxy.Cut() },
		Up:            func(*testing.T) { proxy.Restore() },
	})
}

// A Release with another token leaves the holder's item untouched: same
// value, same CAS unique (nothing was written).
func TestReleaseByOtherTokenKeepsTheItem(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	if ok, _, err := s.TryAcquire(ctx(t), key, "holder", time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquire = %v, %v", ok, err)
	}
	before, err := admin.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Release(ctx(t), key, "other"); err != nil || ok {
		t.Fatalf("Release by another token = %v, %v; want false, nil", ok, err)
	}
	after, err := admin.Get(key)
	if err != nil {
		t.Fatalf("the item is gone after a Release by another token: %v", err)
	}
	if string(after.Value) != "holder" || after.CasID != before.CasID {
		t.Fatalf("after a Release by another token the item holds %q (CAS %d), want %q (CAS %d)", after.Value, after.CasID, "holder", before.CasID)
	}
	if ok, err := s.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release by the holder = %v, %v", ok, err)
	}
}

// A release frees the key at once on the real server: the cas with a
// negative expiration leaves an item that gets misses and add replaces.
func TestReleaseFreesAtOnce(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	if ok, _, err := s.TryAcquire(ctx(t), key, "holder", time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquire = %v, %v", ok, err)
	}
	if ok, err := s.Release(ctx(t), key, "holder"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if it, err := admin.Get(key); !errors.Is(err, memcache.ErrCacheMiss) {
		t.Fatalf("after Release, gets found %v, %v; want a miss", it, err)
	}
	if err := admin.Add(&memcache.Item{Key: key, Value: []byte("next"), Expiration: 60}); err != nil {
		t.Fatalf("after Release, add: %v", err)
	}
	if ok, err := s.Release(ctx(t), key, "holder"); err != nil || ok {
		t.Fatalf("a second Release = %v, %v; want false: the next holder's item", ok, err)
	}
	if it, err := admin.Get(key); err != nil || string(it.Value) != "next" {
		t.Fatalf("the next holder's item: %v, %v", it, err)
	}
}

// hookedClient is a client of addr that calls hook with each command it
// sends, before sending it.
func hookedClient(t *testing.T, addr string, hook func(cmd []byte)) *memcache.Client {
	c := newClient(t, addr)
	var d net.Dialer
	c.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &hookedConn{Conn: conn, hook: hook}, nil
	}
	return c
}

type hookedConn struct {
	net.Conn
	hook func([]byte)
}

func (c *hookedConn) Write(p []byte) (int, error) {
	c.hook(p)
	return c.Conn.Write(p)
}

// When the item changes between the gets of a Release and its cas (the
// lock expired and another holder took it), the cas fails and the other
// holder keeps the lock: a release never deletes what it did not read.
func TestReleaseAfterTheItemChangedKeepsTheNewHolder(t *testing.T) {
	leakCheck(t)
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	var once sync.Once
	client := hookedClient(t, shared.Addr(), func(cmd []byte) {
		if bytes.HasPrefix(cmd, []byte("cas "+key+" ")) {
			once.Do(func() { // another holder's item replaces ours, as after an expiry
				if err := admin.Set(&memcache.Item{Key: key, Value: []byte("next"), Expiration: 60}); err != nil {
					t.Error(err)
				}
			})
		}
	})
	s := storeOn(t, client)
	if ok, _, err := s.TryAcquire(ctx(t), key, "holder", time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquire = %v, %v", ok, err)
	}
	if ok, err := s.Release(ctx(t), key, "holder"); err != nil || ok {
		t.Fatalf("Release after another holder took the key = %v, %v; want false", ok, err)
	}
	if it, err := admin.Get(key); err != nil || string(it.Value) != "next" {
		t.Fatalf("the other holder's item after the Release: %v, %v", it, err)
	}
}

// Fences of one key strictly increase, across stores and tokens, for
// acquires and extends.
func TestFencesIncrease(t *testing.T) {
	leakCheck(t)
	a, b := newStore(t, shared.Addr()), newStore(t, shared.Addr())
	key := uniq(t)
	var last int64
	for i := range 20 {
		s := []*memcachedstore.Store{a, b}[i%2]
		tok := fmt.Sprint("token", i)
		ok, fence, err := s.TryAcquire(ctx(t), key, tok, time.Minute, true)
		if err != nil || !ok || fence <= last {
			t.Fatalf("fenced TryAcquire %d = %v, %d, %v; want a fence above %d", i, ok, fence, err, last)
		}
		last = fence
		ok, fence, err = s.Extend(ctx(t), key, tok, time.Minute, true)
		if err != nil || !ok || fence <= last {
			t.Fatalf("fenced Extend %d = %v, %d, %v; want a fence above %d", i, ok, fence, err, last)
		}
		last = fence
		if ok, err := s.Release(ctx(t), key, tok); err != nil || !ok {
			t.Fatalf("Release %d = %v, %v", i, ok, err)
		}
	}
}

// A fence counter that is lost (evicted, or with a restart of memcached)
// is created again from the clock: the fences after the loss are higher
// than those before, with the server's clock and with this process's.
func TestLostCounterStillGivesHigherFences(t *testing.T) {
	leakCheck(t)
	srv := servers.StartMemcached(t)
	for _, tc := range []struct {
		name string
		opts []memcachedstore.Option
	}{
		{"server clock", []memcachedstore.Option{memcachedstore.WithServerClock(srv.Addr())}},
		{"local clock", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := storeOn(t, newClient(t, srv.Addr()), tc.opts...)
			admin := newClient(t, srv.Addr())
			key := uniq(t)
			var last int64
			draw := func(what string) {
				t.Helper()
				// After a restart, the client's idle connections fail once
				// each (gomemcache does not retry): try again, with a new
				// token, as a Locker would.
				var ok bool
				var fence int64
				var err error
				var tok string
				for i := 0; i < 5 && (err != nil || i == 0); i++ {
					tok = fmt.Sprint(what, i)
					ok, fence, err = s.TryAcquire(ctx(t), key, tok, time.Minute, true)
				}
				if err != nil || !ok {
					t.Fatalf("%s: fenced TryAcquire = %v, %v", what, ok, err)
				}
				if fence <= last {
					t.Fatalf("%s: fence %d after %d: fences must increase across a lost counter", what, fence, last)
				}
				last = fence
				if ok, err := s.Release(ctx(t), key, tok); err != nil || !ok {
					t.Fatalf("%s: Release = %v, %v", what, ok, err)
				}
			}
			for range 5 {
				draw("before")
			}
			// The documented bound: the counter is lost in a later second of
			// the server's clock than the one it was created in.
			time.Sleep(1100 * time.Millisecond)
			if err := admin.Delete(key + ":fence"); err != nil { // as an eviction would
				t.Fatal(err)
			}
			draw("after an eviction")
			draw("after an eviction, again")
			time.Sleep(1100 * time.Millisecond)
			srv.Stop()
			srv.Restart(t)
			draw("after a restart")
			draw("after a restart, again")
		})
	}
}

// Keys that memcached cannot take (longer than 250 bytes, with a space or a
// control character) or that begin with the hashed form's prefix are
// stored under "reqlock-sha256:" and their SHA-256; others as they are.
func TestKeysAreHashedWhenNeeded(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	admin := newClient(t, shared.Addr())
	base := uniq(t)
	hashed := func(k string) string {
		sum := sha256.Sum256([]byte(k))
		return "reqlock-sha256:" + hex.EncodeToString(sum[:])
	}
	for _, tc := range []struct {
		key, item string
	}{
		{base, base},
		{base + strings.Repeat("x", 250), hashed(base + strings.Repeat("x", 250))},
		{base + strings.Repeat("y", 250), hashed(base + strings.Repeat("y", 250))}, // no collision with the one above
		{base + " with a space", hashed(base + " with a space")},
		{base + "\x01", hashed(base + "\x01")},
		{"reqlock-sha256:" + base, hashed("reqlock-sha256:" + base)},
	} {
		if ok, _, err := s.TryAcquire(ctx(t), tc.key, "holder:"+tc.key, time.Minute, true); err != nil || !ok {
			t.Fatalf("TryAcquire(%q) = %v, %v", tc.key, ok, err)
		}
		it, err := admin.Get(tc.item)
		if err != nil || string(it.Value) != "holder:"+tc.key {
			t.Fatalf("key %q: item %q: %v, %v; want the holder's token", tc.key, tc.item, it, err)
		}
		if ok, err := s.Release(ctx(t), tc.key, "holder:"+tc.key); err != nil || !ok {
			t.Fatalf("Release(%q) = %v, %v", tc.key, ok, err)
		}
	}
}

// A TTL is rounded up to whole seconds and one more: a lock never expires
// before its TTL, even a TTL of exactly one second, which memcached alone
// could end at once (its clock ticks once a second).
func TestTTLIsNeverCutShort(t *testing.T) {
	leakCheck(t)
	s := newStore(t, shared.Addr())
	for i := range 3 {
		key := uniq(t)
		sent := time.Now()
		if ok, _, err := s.TryAcquire(ctx(t), key, "holder", time.Second, false); err != nil || !ok {
			t.Fatalf("TryAcquire = %v, %v", ok, err)
		}
		for {
			ok, _, err := s.TryAcquire(ctx(t), key, "other", time.Minute, false)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if took := time.Since(sent); took < time.Second {
					t.Fatalf("round %d: a lock taken for 1s was free after %v", i, took)
				}
				_, _ = s.Release(ctx(t), key, "other")
				break
			}
			if time.Since(sent) > 10*time.Second {
				t.Fatalf("round %d: a lock taken for 1s was still held after 10s", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(i) * 300 * time.Millisecond) // another phase of the server's clock
	}
}

// New refuses bad arguments; TryAcquire and Extend refuse TTLs memcached
// cannot honour, without I/O.
func TestBadArguments(t *testing.T) {
	leakCheck(t)
	client := newClient(t, shared.Addr())
	for _, tc := range []struct {
		name   string
		client *memcache.Client
		opts   []memcachedstore.Option
	}{
		{"nil client", nil, nil},
		{"nil option", client, []memcachedstore.Option{nil}},
		{"bad clock address", client, []memcachedstore.Option{memcachedstore.WithServerClock("no port")}},
		{"empty clock address", client, []memcachedstore.Option{memcachedstore.WithServerClock("")}},
	} {
		s, err := memcachedstore.New(tc.client, tc.opts...)
		if err == nil || s != nil || !strings.HasPrefix(err.Error(), "memcachedstore: ") {
			t.Errorf("%s: New = %v, %v; want nil and an error of memcachedstore", tc.name, s, err)
		}
	}
	unreachable := storeOn(t, memcache.New("127.0.0.1:1"))
	for _, ttl := range []time.Duration{0, -time.Second, 31 * 24 * time.Hour} {
		if _, _, err := unreachable.TryAcquire(ctx(t), "k", "t", ttl, false); err == nil || !strings.Contains(err.Error(), "TTL") {
			t.Errorf("TryAcquire with TTL %v: %v; want an error about the TTL", ttl, err)
		}
		if _, _, err := unreachable.Extend(ctx(t), "k", "t", ttl, false); err == nil || !strings.Contains(err.Error(), "TTL") {
			t.Errorf("Extend with TTL %v: %v; want an error about the TTL", ttl, err)
		}
	}
}

// Round trips: an uncontended acquire is one (add), a release two (gets,
// cas); an attempt on a busy key two (add, gets); a fenced acquire one more
// (incr) once the counter exists.
func TestRoundTrips(t *testing.T) {
	leakCheck(t)
	client, n := counted(t, shared.Addr())
	s := storeOn(t, client, memcachedstore.WithServerClock(shared.Addr()))
	other := newStore(t, shared.Addr())
	key := uniq(t)
	measure := func(what string, want int64, f func()) {
		t.Helper()
		n.Store(0)
		f()
		if got := n.Load(); got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	must := func(ok bool, _ int64, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("got %v, %v", ok, err)
		}
	}
	measure("acquire and release", 3, func() {
		must(s.TryAcquire(ctx(t), key, "a", time.Minute, false))
		ok, err := s.Release(ctx(t), key, "a")
		must(ok, 0, err)
	})
	must(other.TryAcquire(ctx(t), key, "held", time.Minute, true)) // creates the counter
	measure("a busy attempt", 2, func() {
		if ok, _, err := s.TryAcquire(ctx(t), key, "b", time.Minute, false); ok || err != nil {
			t.Fatalf("TryAcquire of a held key = %v, %v", ok, err)
		}
	})
	ok, err := other.Release(ctx(t), key, "held")
	must(ok, 0, err)
	measure("fenced acquire and release", 4, func() {
		must(s.TryAcquire(ctx(t), key, "c", time.Minute, true))
		ok, err := s.Release(ctx(t), key, "c")
		must(ok, 0, err)
	})
}

// An attempt whose reply comes after the caller's deadline returns the
// context's error at once, and the add it sent is undone in the background
// well before its TTL: the key is free again.
func TestAttemptCutByTheDeadlineIsUndone(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, proxy.Addr())
	admin := newClient(t, shared.Addr())
	key := uniq(t)
	if ok, _, err := s.TryAcquire(ctx(t), "warm:"+key, "t", time.Second, false); err != nil || !ok { // a connection from before
		t.Fatalf("TryAcquire = %v, %v", ok, err)
	}
	proxy.SetDelay(100 * time.Millisecond)
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, _, err := s.TryAcquire(c, key, "cut", time.Minute, false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire past its deadline = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("TryAcquire returned %v after its deadline of 50ms", took)
	}
	proxy.SetDelay(0)
	time.Sleep(500 * time.Millisecond)           // the add, held 100ms by the proxy, has landed by now
	deadline := time.Now().Add(10 * time.Second) // well within the TTL of a minute
	for {
		_, err := admin.Get(key)
		if errors.Is(err, memcache.ErrCacheMiss) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attempt cut by its deadline left %s held: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
