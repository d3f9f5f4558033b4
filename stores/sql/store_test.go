package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// call returns the context of one store call.
func call(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire takes k for tok and returns its fence.
func mustAcquire(t testing.TB, s *sqlstore.Store, k, tok string, ttl time.Duration, fenced bool) int64 {
	t.Helper()
	ok, fence, err := s.TryAcquire(call(t), k, tok, ttl, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquire(%q): ok %v, err %v; want the free key taken", k, ok, err)
	}
	return fence
}

// free reports whether k can be taken (and gives it back if so).
func free(t testing.TB, s *sqlstore.Store, k string) bool {
	t.Helper()
	tok := token()
	ok, _, err := s.TryAcquire(call(t), k, tok, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if _, err := s.Release(call(t), k, tok); err != nil {
			t.Fatal(err)
		}
	}
	return ok
}

func TestNew(t *testing.T) {
	pg := openDB(t, "pgx", pgURL)
	my := openDB(t, "mysql", myDSN)

	t.Run("detects the dialect", func(t *testing.T) {
		for _, c := range []struct {
			db   *sql.DB
			want sqlstore.Dialect
		}{{pg, sqlstore.PostgreSQL}, {my, sqlstore.MySQL}} {
			s := newStore(t, c.db)
			if s.Dialect() != c.want || s.Table() != sqlstore.DefaultTable {
				t.Errorf("New(%T): dialect %v, table %q; want %v, %q", c.db.Driver(), s.Dialect(), s.Table(), c.want, sqlstore.DefaultTable)
			}
		}
		s := newStore(t, my, sqlstore.WithDialect(sqlstore.MySQL), sqlstore.WithTable("app_locks"))
		if s.Dialect() != sqlstore.MySQL || s.Table() != "app_locks" {
			t.Errorf("dialect %v, table %q; want MySQL, app_locks", s.Dialect(), s.Table())
		}
	})

	t.Run("an unknown driver needs WithDialect", func(t *testing.T) {
		db := sql.OpenDB(fakeConnector{})
		defer db.Close()
		_, err := sqlstore.New(db)
		if err == nil || !strings.Contains(err.Error(), "WithDialect(sqlstore.PostgreSQL)") || !strings.Contains(err.Error(), "fakeDriver") {
			t.Fatalf("New with an unknown driver: %v; want an error that names the driver and WithDialect", err)
		}
		s := newStore(t, db, sqlstore.WithDialect(sqlstore.PostgreSQL))
		if s.Dialect() != sqlstore.PostgreSQL {
			t.Fatalf("dialect %v; want PostgreSQL", s.Dialect())
		}
	})

	bad := []struct {
		name string
		db   *sql.DB
		opts []sqlstore.Option
		want string
	}{
		{"nil db", nil, nil, "nil"},
		{"nil option", pg, []sqlstore.Option{nil}, "option 0 is nil"},
		{"dialect 0", pg, []sqlstore.Option{sqlstore.WithDialect(0)}, "unknown dialect"},
		{"dialect 3", pg, []sqlstore.Option{sqlstore.WithDialect(3)}, "Dialect(3)"},
		{"empty table", pg, []sqlstore.Option{sqlstore.WithTable("")}, "empty"},
		{"upper case", pg, []sqlstore.Option{sqlstore.WithTable("Locks")}, "lower-case identifier"},
		{"digit first", pg, []sqlstore.Option{sqlstore.WithTable("1locks")}, "lower-case identifier"},
		{"schema", pg, []sqlstore.Option{sqlstore.WithTable("app.locks")}, "lower-case identifier"},
		{"quote", pg, []sqlstore.Option{sqlstore.WithTable(`locks"; DROP TABLE x; --`)}, "lower-case identifier"},
		{"backtick", my, []sqlstore.Option{sqlstore.WithTable("locks`")}, "lower-case identifier"},
		{"space", my, []sqlstore.Option{sqlstore.WithTable("my locks")}, "lower-case identifier"},
		{"too long", my, []sqlstore.Option{sqlstore.WithTable(strings.Repeat("x", 58))}, "longer than 57"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			s, err := sqlstore.New(c.db, c.opts...)
			if err == nil || s != nil {
				t.Fatalf("New: %v, %v; want an error and no store", s, err)
			}
			if !strings.HasPrefix(err.Error(), "sqlstore: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v; want an error prefixed with sqlstore: and containing %q", err, c.want)
			}
		})
	}
	for _, name := range []string{"a", "_", "locks_2", strings.Repeat("x", 57)} {
		if _, err := sqlstore.New(pg, sqlstore.WithTable(name)); err != nil {
			t.Errorf("WithTable(%q): %v", name, err)
		}
	}
}

// fakeConnector is a database/sql driver that New cannot recognise; it is
// never connected.
type fakeConnector struct{}

type fakeDriver struct{}

func (fakeConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("fake: no database")
}
func (fakeConnector) Driver() driver.Driver { return fakeDriver{} }
func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake: no database")
}

func TestBadArguments(t *testing.T) {
	s := newStore(t, openDB(t, "pgx", pgURL))
	ctx := call(t)
	long := strings.Repeat("k", sqlstore.MaxKeyLen+1)
	for _, c := range []struct {
		key, token string
		ttl        time.Duration
	}{{"", "t", time.Second}, {long, "t", time.Second}, {"k", "", time.Second}, {"k", strings.Repeat("t", 256), time.Second}, {"k", "t", 0}, {"k", "t", -time.Second}} {
		if _, _, err := s.TryAcquire(ctx, c.key, c.token, c.ttl, false); err == nil || !strings.HasPrefix(err.Error(), "sqlstore: ") {
			t.Errorf("TryAcquire(key of %d bytes, token of %d, ttl %v): %v; want an error", len(c.key), len(c.token), c.ttl, err)
		}
	}
	if _, err := s.Release(ctx, long, "t"); err == nil {
		t.Error("Release of a key longer than MaxKeyLen: no error")
	}
	if _, _, err := s.Extend(ctx, "k", "t", 0, false); err == nil {
		t.Error("Extend with TTL 0: no error")
	}
	if _, err := s.Purge(ctx, -time.Second); err == nil {
		t.Error("Purge(-1s): no error")
	}
}

// TestMissingTable: a store whose table does not exist fails every call
// with an error that wraps ErrNoTable and names the migration; a Locker
// reports it as core.ErrStorage. CreateTable makes it work.
func TestMissingTable(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := tableName("missing")
		t.Cleanup(func() { dropTable(t, b, name) })
		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(name))
		ctx := call(t)
		k, tok := key(t), token()
		wantNoTable := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, sqlstore.ErrNoTable) {
				t.Fatalf("%s without the table: %v; want ErrNoTable", what, err)
			}
			for _, want := range []string{name, "migrations/", "CreateTable"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s without the table: %v; want the message to name %q", what, err, want)
				}
			}
		}
		_, _, err := s.TryAcquire(ctx, k, tok, time.Minute, true)
		wantNoTable("TryAcquire", err)
		_, err = s.Release(ctx, k, tok)
		wantNoTable("Release", err)
		_, _, err = s.Extend(ctx, k, tok, time.Minute, true)
		wantNoTable("Extend", err)
		_, err = s.Purge(ctx, time.Hour)
		wantNoTable("Purge", err)
		wantNoTable("Check", s.Check(ctx))
		_, _, _, err = s.TryAcquireShare(ctx, k, tok, time.Minute, core.Hold{N: 2}, true)
		wantNoTable("TryAcquireShare", err)
		_, err = s.ReleaseShare(ctx, k, tok)
		wantNoTable("ReleaseShare", err)
		_, _, err = s.ExtendShare(ctx, k, tok, time.Minute, true)
		wantNoTable("ExtendShare", err)
		_, _, err = s.TryAcquireWaiting(ctx, k, tok, time.Minute, time.Minute, true)
		wantNoTable("TryAcquireWaiting", err)
		_, _, err = s.TryAcquireAll(ctx, []string{k, k + "2"}, tok, time.Minute, true)
		wantNoTable("TryAcquireAll", err)

		l := core.NewWithStore(s, core.WithWait(0))
		defer l.Close()
		_, err = l.Acquire(ctx, "order:1")
		if !errors.Is(err, core.ErrStorage) || !errors.Is(err, sqlstore.ErrNoTable) {
			t.Fatalf("Locker.Acquire without the table: %v; want core.ErrStorage wrapping ErrNoTable", err)
		}

		if err := s.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); err != nil {
			t.Fatalf("Check after CreateTable: %v", err)
		}
		if fence := mustAcquire(t, s, k, tok, time.Minute, true); fence <= 0 {
			t.Fatalf("fence %d after CreateTable; want > 0", fence)
		}
	})
}

// TestMissingShareTable: where the lock table exists but the share table
// does not (an application that runs its migrations by hand and has not
// run the share migration yet), exclusive locks work, and every call that
// needs the share table fails with ErrNoTable naming both migrations,
// leaving nothing held; Check reports it.
func TestMissingShareTable(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := freshTable(t, b, "noshare")
		db := b.open(t, b.addr(), "")
		if _, err := db.Exec("DROP TABLE " + name + "_share"); err != nil {
			t.Fatal(err)
		}
		s := newStore(t, db, sqlstore.WithTable(name))
		ctx := call(t)
		wantNoTable := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, sqlstore.ErrNoTable) || !strings.Contains(err.Error(), name+"_share") || !strings.Contains(err.Error(), "_share.sql") {
				t.Fatalf("%s without the share table: %v; want ErrNoTable naming the table and its migration", what, err)
			}
		}
		wantNoTable("Check", s.Check(ctx))
		k, tok := key(t), token()
		mustAcquire(t, s, k, tok, time.Minute, true)
		if ok, err := s.Release(ctx, k, tok); !ok || err != nil {
			t.Fatalf("Release without the share table: %v, %v", ok, err)
		}
		_, _, _, err := s.TryAcquireShare(ctx, k, tok, time.Minute, core.Hold{}, false)
		wantNoTable("TryAcquireShare", err)
		_, _, err = s.TryAcquireWaiting(ctx, k, tok, time.Minute, time.Minute, false)
		wantNoTable("TryAcquireWaiting", err)
		if !free(t, s, k) {
			t.Fatal("a failed TryAcquireWaiting left the key held")
		}
		if err := s.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, _, err := s.TryAcquireShare(ctx, k, tok, time.Minute, core.Hold{}, false); !ok || err != nil {
			t.Fatalf("TryAcquireShare after CreateTable: %v, %v", ok, err)
		}
	})
}

// TestMissingSequence: on PostgreSQL a table without its fencing sequence
// fails every acquire and extend with ErrNoTable (the statements name the
// sequence), and Check reports it.
func TestMissingSequence(t *testing.T) {
	b := backends[0]
	name := freshTable(t, b, "noseq")
	db := b.open(t, b.addr(), "")
	if _, err := db.Exec("DROP SEQUENCE " + name + "_fence"); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, db, sqlstore.WithTable(name))
	ctx := call(t)
	if err := s.Check(ctx); !errors.Is(err, sqlstore.ErrNoTable) || !strings.Contains(err.Error(), name+"_fence") {
		t.Fatalf("Check without the sequence: %v; want ErrNoTable naming the sequence", err)
	}
	for _, fenced := range []bool{false, true} {
		if _, _, err := s.TryAcquire(ctx, key(t), token(), time.Minute, fenced); !errors.Is(err, sqlstore.ErrNoTable) {
			t.Fatalf("TryAcquire (fenced %v) without the sequence: %v; want ErrNoTable", fenced, err)
		}
	}
}

// TestCreateTable: CreateTable is idempotent, also from several sessions at
// once, and keeps what a table holds; its DDL is the embedded migration.
func TestCreateTable(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := tableName("create")
		t.Cleanup(func() { dropTable(t, b, name) })
		ctx := call(t)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := sqlstore.New(b.open(t, b.addr(), ""), sqlstore.WithTable(name))
				if err == nil {
					err = s.CreateTable(ctx)
					s.Close()
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("CreateTable from 4 sessions at once: %v", err)
			}
		}

		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(name))
		k, tok := key(t), token()
		first := mustAcquire(t, s, k, tok, time.Minute, true)
		if err := s.CreateTable(ctx); err != nil {
			t.Fatalf("CreateTable of a table that exists: %v", err)
		}
		if free(t, s, k) {
			t.Fatal("CreateTable of a table that exists freed a held lock")
		}
		if ok, fence, err := s.Extend(ctx, k, tok, time.Minute, true); err != nil || !ok || fence <= first {
			t.Fatalf("fenced Extend after CreateTable: %v, %d, %v; want a fence above %d", ok, fence, err, first)
		}

		ddl := s.Migration()
		if !strings.Contains(ddl, b.quote(name)) || strings.Contains(ddl, sqlstore.DefaultTable) {
			t.Errorf("Migration of table %s:\n%s\nwant the table's quoted name instead of %s", name, ddl, sqlstore.DefaultTable)
		}
	})
}

// quote quotes an identifier in b's dialect.
func (b backend) quote(name string) string {
	if b.dialect == sqlstore.MySQL {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// TestExpiryByDatabaseClock: a lock's expiry is the database's business.
// The statements carry the TTL as a number of microseconds and no time of
// the client, so that a client whose clock is wrong cannot shorten or
// lengthen another's lock; and two clients whose sessions have time zones a
// day apart (+14:00 or +13:00, and -12:00) see the same expiry (on MySQL,
// NOW() is local time: a store that used it would let the eastern client's
// lock outlive its TTL by a day for the western one).
func TestExpiryByDatabaseClock(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		east, west := "timezone=Pacific/Kiritimati", "timezone=Etc/GMT%2B12"
		if b.dialect == sqlstore.MySQL {
			east, west = "time_zone=%27%2B13%3A00%27", "time_zone=%27-12%3A00%27" // MariaDB's range
		}
		dbEast, dbWest := b.open(t, b.addr(), east), b.open(t, b.addr(), west)
		for db, want := range map[*sql.DB]string{dbEast: "+1", dbWest: "-12"} {
			var tz string
			q := "SELECT current_setting('TimeZone') || ' ' || to_char(now(), 'OF')"
			if b.dialect == sqlstore.MySQL {
				q = "SELECT @@time_zone"
			}
			if err := db.QueryRow(q).Scan(&tz); err != nil || !strings.Contains(tz, want) {
				t.Fatalf("session time zone %q, %v; want one %s... hours from UTC", tz, err, want)
			}
		}
		a, w := newStore(t, dbEast), newStore(t, dbWest)

		var mu sync.Mutex
		var sent [][]any
		sqlstore.SetTrace(a, func(_ string, args []any) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, args)
		})

		// The lock expires ttl after the Extend reached the database:
		// after extendSent + ttl, and soon after extended + ttl.
		const ttl = 600 * time.Millisecond
		k, tok := key(t), token()
		mustAcquire(t, a, k, tok, ttl, true)
		extendSent := time.Now()
		if ok, _, err := a.Extend(call(t), k, tok, ttl, true); err != nil || !ok {
			t.Fatalf("Extend by the holder: %v, %v", ok, err)
		}
		extended := time.Now()
		for {
			ok, _, err := w.TryAcquire(call(t), k, token(), time.Minute, false)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if elapsed := time.Since(extendSent); elapsed < ttl-5*time.Millisecond {
					t.Fatalf("the lock with TTL %v was free for a session a day west %v after its Extend", ttl, elapsed)
				}
				break
			}
			if elapsed := time.Since(extended); elapsed > ttl+20*time.Second {
				t.Fatalf("the lock with TTL %v was still held for a session a day west %v after its Extend: expiry depends on the session's time zone", ttl, elapsed)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if ok, _ := a.Release(call(t), k, tok); ok {
			t.Error("Release by the expired holder reported true")
		}

		mu.Lock()
		defer mu.Unlock()
		if len(sent) != 3 {
			t.Fatalf("%d statements for acquire, extend and release; want 3", len(sent))
		}
		for i, args := range sent {
			for _, arg := range args {
				switch v := arg.(type) {
				case string, []byte, bool:
				case int64:
					if v != ttl.Microseconds() {
						t.Errorf("statement %d sent the number %d; want only the TTL in µs (%d)", i, v, ttl.Microseconds())
					}
				default:
					t.Errorf("statement %d sent %T %v; want strings, flags and the TTL in µs only", i, arg, arg)
				}
			}
		}
	})
}

// TestFences: fences of a key strictly increase from holder to holder, on
// release, on expiry, on a fenced Extend, and (MySQL) after its row was
// purged; fenced calls on other keys in between do not matter.
func TestFences(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := freshTable(t, b, "fences")
		db := b.open(t, b.addr(), "")
		s1 := newStore(t, db, sqlstore.WithTable(name))
		s2 := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(name))
		ctx := call(t)
		k := key(t)
		var last int64
		next := func(what string, fence int64) {
			t.Helper()
			if fence <= last {
				t.Fatalf("%s drew fence %d after %d; want strictly increasing fences", what, fence, last)
			}
			last = fence
		}
		other := func() { // a fenced lock of another key, held meanwhile
			t.Helper()
			mustAcquire(t, s2, key(t), token(), time.Minute, true)
		}

		a := token()
		next("the first acquire", mustAcquire(t, s1, k, a, time.Minute, true))
		other()
		ok, fence, err := s1.Extend(ctx, k, a, time.Minute, true)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		next("a fenced Extend", fence)
		if ok, fence, _ := s1.Extend(ctx, k, a, time.Minute, false); !ok || fence != 0 {
			t.Fatalf("unfenced Extend: %v, fence %d; want true, 0", ok, fence)
		}
		if ok, _ := s1.Release(ctx, k, a); !ok {
			t.Fatal("Release by the holder reported false")
		}

		bTok := token()
		next("an acquire after a release", mustAcquire(t, s2, k, bTok, 50*time.Millisecond, true))
		other()
		time.Sleep(100 * time.Millisecond)
		c := token()
		next("an acquire of an expired lock", mustAcquire(t, s1, k, c, time.Minute, true))
		next("a re-sent acquire", mustAcquire(t, s1, k, c, time.Minute, true))
		if ok, _ := s1.Release(ctx, k, c); !ok {
			t.Fatal("Release by the holder reported false")
		}

		// Purged: on MySQL the row, with the key's last fence, is gone once
		// it is old enough.
		if b.dialect == sqlstore.MySQL {
			if _, err := db.ExecContext(ctx, "UPDATE "+name+" SET expires_at = expires_at - INTERVAL 2 HOUR WHERE name = ?", k); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s1.Purge(ctx, time.Hour); err != nil || (b.dialect == sqlstore.MySQL && n != 1) {
			t.Fatalf("Purge: %d, %v", n, err)
		}
		next("an acquire after a purge", mustAcquire(t, s2, k, token(), time.Minute, true))
	})
}

// TestFencesAcrossLockers: Lockers with fencing on three *sql.DB take one
// name in turn; inside each critical section, the lease's fence is above
// every fence seen before (Kleppmann's fencing tokens, as a storage
// service that checks them would see them), and no two overlap.
func TestFencesAcrossLockers(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		var o redistest.Overlap
		var mu sync.Mutex
		var last int64
		var errs []error
		name := "fences:" + token()[:8]
		var wg sync.WaitGroup
		for range 3 {
			l := core.NewWithStore(newStore(t, b.open(t, b.addr(), "")),
				core.WithFencing(), core.WithWait(30*time.Second), core.WithSpin(time.Millisecond, 3*time.Millisecond))
			t.Cleanup(func() { l.Close() })
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 10 {
						lease, err := l.Acquire(context.Background(), name)
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						exit := o.Enter()
						mu.Lock()
						if lease.Fence() <= last {
							errs = append(errs, errors.New("fence did not increase"))
						}
						last = lease.Fence()
						mu.Unlock()
						time.Sleep(time.Millisecond)
						exit()
						if err := lease.Release(context.Background()); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
					}
				}()
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if n := o.Overlaps(); n > 0 {
			t.Fatalf("%d critical sections overlapped", n)
		}
	})
}

// TestBinaryKeys: a key may hold any byte (a lock name taken from a request
// need not be valid UTF-8), and keys that differ in one byte are different
// locks.
func TestBinaryKeys(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		base := key(t)
		keys := []string{base, base + "\x00", base + "\x00\xff", base + "\xfe\xff", base + " "}
		toks := make([]string, len(keys))
		for i, k := range keys {
			toks[i] = token()
			mustAcquire(t, s, k, toks[i], time.Minute, true)
		}
		for i, k := range keys {
			if free(t, s, k) {
				t.Errorf("key %q is free while held", k)
			}
			if ok, err := s.Release(ctx, k, toks[i]); !ok || err != nil {
				t.Errorf("Release(%q): %v, %v", k, ok, err)
			}
		}
	})
}
