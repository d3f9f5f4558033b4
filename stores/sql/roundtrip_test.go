package sqlstore_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/reqlock/reqlock/internal/servers"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// roundTrips counts the round trips of the connections it dials: a burst of
// writes after a read (or the first one) is one request that waits for its
// answer.
type roundTrips struct {
	mu sync.Mutex
	n  int
}

func (rt *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, rt: rt}, nil
}

func (rt *roundTrips) reset() {
	rt.mu.Lock()
	rt.n = 0
	rt.mu.Unlock()
}

func (rt *roundTrips) count() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.n
}

type countingConn struct {
	net.Conn
	rt      *roundTrips
	mu      sync.Mutex
	writing bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.writing {
		c.writing = true
		c.rt.mu.Lock()
		c.rt.n++
		c.rt.mu.Unlock()
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
	}
	return n, err
}

// TestRoundTrips: on a warm connection (its statements prepared by its
// first use), an uncontended TryAcquire and Release are one round trip
// each, as are a busy TryAcquire and a fenced Extend.
func TestRoundTrips(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		var rt roundTrips
		db := b.connector(t, b.addr(), rt.dial)
		db.SetMaxOpenConns(1) // one connection, warmed below
		s := newStore(t, db)
		ctx := call(t)
		held := key(t)
		cycle := func(fenced bool) {
			k, tok := key(t), token()
			mustAcquire(t, s, k, tok, time.Minute, fenced)
			if ok, _ := s.Release(ctx, k, tok); !ok {
				t.Fatal("Release by the holder reported false")
			}
		}
		holder := token()
		mustAcquire(t, s, held, holder, time.Minute, true)
		for range 2 { // prepares every statement on the connection
			cycle(false)
			cycle(true)
			if ok, _, _ := s.TryAcquire(ctx, held, token(), time.Minute, false); ok {
				t.Fatal("a held key was taken")
			}
			if ok, _, _ := s.Extend(ctx, held, holder, time.Minute, true); !ok {
				t.Fatal("Extend by the holder reported false")
			}
		}

		const n = 20
		measure := func(what string, want int, f func()) {
			t.Helper()
			rt.reset()
			for range n {
				f()
			}
			got := float64(rt.count()) / n
			t.Logf("%s, %s: %.2f round trips", b.name, what, got)
			if got != float64(want) {
				t.Errorf("%s: %.2f round trips; want %d", what, got, want)
			}
		}
		measure("uncontended acquire+release", 2, func() { cycle(false) })
		measure("fenced uncontended acquire+release", 2, func() { cycle(true) })
		measure("busy acquire", 1, func() { _, _, _ = s.TryAcquire(ctx, held, token(), time.Minute, true) })
		measure("fenced extend", 1, func() { _, _, _ = s.Extend(ctx, held, holder, time.Minute, true) })
	})
}

// BenchmarkAcquireRelease measures an uncontended TryAcquire and Release on
// loopback, with the round trips they take (roundtrips/op).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			var rt roundTrips
			db := be.connector(b, be.addr(), rt.dial)
			s := newStore(b, db)
			ctx := context.Background()
			k := key(b)
			rt.reset()
			b.ResetTimer()
			for range b.N {
				tok := token()
				ok, _, err := s.TryAcquire(ctx, k, tok, time.Minute, false)
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				if ok, err := s.Release(ctx, k, tok); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
			b.ReportMetric(float64(rt.count())/float64(b.N), "roundtrips/op")
		})
	}
}

// TestPostgresQueryModes: the modes of pgx that suit PgBouncer in
// transaction mode (no prepared statement kept on a server session) run
// each call in one round trip too.
func TestPostgresQueryModes(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			var rt roundTrips
			cfg, err := pgx.ParseConfig(servers.PostgresURL(pgServer.Addr()) + "&default_query_exec_mode=" + mode)
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = rt.dial
			db := stdlib.OpenDB(*cfg, noPing)
			t.Cleanup(func() { db.Close() })
			db.SetMaxOpenConns(1)
			s := newStore(t, db)
			ctx := call(t)
			cycle := func() {
				k, tok := key(t), token()
				if fence := mustAcquire(t, s, k, tok, time.Minute, true); fence <= 0 {
					t.Fatalf("fence %d; want > 0", fence)
				}
				if ok, _, err := s.Extend(ctx, k, tok, time.Minute, true); !ok || err != nil {
					t.Fatal(ok, err)
				}
				if ok, err := s.Release(ctx, k, tok); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			cycle()
			cycle()
			rt.reset()
			const n = 10
			for range n {
				cycle()
			}
			if got := float64(rt.count()) / n; got != 3 {
				t.Errorf("%.2f round trips per acquire, extend and release; want 3", got)
			}
		})
	}
}

// TestShareRoundTrips: the round trips of the share calls, of
// TryAcquireWaiting and of AcquireAll on a warm connection, as the package
// doc gives them: one transaction per call (BEGIN, the lock of the name's
// row, the read of its shares, the writes, COMMIT; on MySQL the isolation
// level in a statement of its own, and the writes of the share and of the
// lock row in two). On a pool of one connection: a transaction never waits
// for a second one (to prepare a statement, say).
func TestShareRoundTrips(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		var rt roundTrips
		db := b.connector(t, b.addr(), rt.dial)
		db.SetMaxOpenConns(1)
		s := newStore(t, db)
		ctx := call(t)
		held := key(t)
		holder := token()
		mustAcquire(t, s, held, holder, time.Minute, true)
		shareCycle := func() {
			k, tok := key(t), token()
			if ok, _, _ := share(t, s, k, tok, time.Minute, permits(2), true); !ok {
				t.Fatal("a share of a free name failed")
			}
			if ok, _, err := s.ExtendShare(ctx, k, tok, time.Minute, true); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if !releaseShare(t, s, k, tok) {
				t.Fatal("ReleaseShare by the holder reported false")
			}
		}
		allCycle := func() {
			keys := []string{key(t), key(t), key(t)}
			tok := token()
			if ok, _, err := s.TryAcquireAll(ctx, keys, tok, time.Minute, true); !ok || err != nil {
				t.Fatal(ok, err)
			}
			for _, k := range keys {
				s.Release(ctx, k, tok)
			}
		}
		busy := func() { share(t, s, held, token(), time.Minute, shared, false) }
		sharedName := key(t)
		mustShare(t, s, sharedName, token(), shared)
		waitShared := func() {
			if ok, _, err := s.TryAcquireWaiting(ctx, sharedName, token(), time.Minute, time.Minute, true); ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		waitFree := func() {
			k, tok := key(t), token()
			if ok, _, err := s.TryAcquireWaiting(ctx, k, tok, time.Minute, time.Minute, true); !ok || err != nil {
				t.Fatal(ok, err)
			}
			s.Release(ctx, k, tok)
		}
		for range 2 { // prepares every statement on the connection
			shareCycle()
			allCycle()
			busy()
			waitShared()
			waitFree()
		}

		const n = 10
		measure := func(what string, want int, f func()) {
			t.Helper()
			rt.reset()
			for range n {
				f()
			}
			got := float64(rt.count()) / n
			t.Logf("%s, %s: %.2f round trips", b.name, what, got)
			if got != float64(want) {
				t.Errorf("%s: %.2f round trips; want %d", what, got, want)
			}
		}
		tx := 0 // the extra round trip of a MySQL transaction
		if b.dialect == sqlstore.MySQL {
			tx = 1
		}
		measure("share acquire+extend+release", 3*(5+tx)+3*(b.dialectExtra()), shareCycle)
		measure("refused share", 4+tx, busy)
		measure("AcquireAll of 3 keys and 3 releases", 3+2+tx+3, allCycle)
		measure("waiting acquire of a shared name (and its record)", 2, waitShared)
		measure("waiting acquire of a free name (which clears a record) and release", 2+b.dialectExtra(), waitFree)
	})
}

// dialectExtra is the round trips a MySQL share call adds to a
// PostgreSQL one besides its transaction's: the share's write and the
// lock row's are two statements.
func (b backend) dialectExtra() int {
	if b.dialect == sqlstore.MySQL {
		return 1
	}
	return 0
}
