package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// The servers every test shares: one PostgreSQL, one MariaDB. Tests use
// fresh keys, or tables of their own (freshTable).
var (
	pgServer, myServer *servers.Process
	// pgURL and myDSN are for the examples.
	pgURL, myDSN string
)

// myDatabase is the database the tests use on MariaDB.
const myDatabase = "reqlock"

// quiet drops go-sql-driver/mysql's log lines (broken connections while a
// proxy is cut); the tests check the errors that reach the caller instead.
type quiet struct{}

func (quiet) Print(...any) {}

func TestMain(m *testing.M) {
	_ = mysql.SetLogger(quiet{})
	testmain.Run(m, start)
}

// start launches PostgreSQL and MariaDB, and makes the tests' database and
// table on both; stop stops both.
func start() (stop func(), err error) {
	defer func() {
		if err != nil {
			stopAll()
		}
	}()
	if pgServer, err = servers.Launch(servers.PostgresSpec()); err != nil {
		return nil, err
	}
	if myServer, err = servers.Launch(servers.MariaDBSpec()); err != nil {
		return nil, err
	}
	pgURL = servers.PostgresURL(pgServer.Addr())
	myDSN = mysqlDSN(myServer.Addr(), "")

	// The database of the MariaDB tests, and the default table of both.
	ctx := context.Background()
	root, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+myServer.Addr()+")/")
	if err != nil {
		return nil, err
	}
	_, err = root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+myDatabase)
	root.Close()
	if err != nil {
		return nil, err
	}
	for _, dsn := range []struct{ driver, dsn string }{{"pgx", pgURL}, {"mysql", myDSN}} {
		var db *sql.DB
		if db, err = sql.Open(dsn.driver, dsn.dsn); err != nil {
			return nil, err
		}
		var s *sqlstore.Store
		if s, err = sqlstore.New(db); err == nil {
			err = s.CreateTable(ctx)
			s.Close()
		}
		db.Close()
		if err != nil {
			return nil, err
		}
	}
	return stopAll, nil
}

// stopAll stops the servers that were launched.
func stopAll() {
	for _, p := range []*servers.Process{pgServer, myServer} {
		if p != nil {
			p.Close()
		}
	}
}

// mysqlDSN returns the DSN of the tests' database on the MariaDB server at
// addr, with the parameters params (none: "").
func mysqlDSN(addr, params string) string {
	if params != "" {
		params = "?" + params
	}
	return servers.MariaDBUser + "@tcp(" + addr + ")/" + myDatabase + params
}

// backend is one kind of database the tests run on.
type backend struct {
	name    string
	dialect sqlstore.Dialect
	// addr returns the server's address.
	addr func() string
	// open returns a new *sql.DB of the tests' database at addr (the
	// server's, or a proxy's), with the DSN parameters params ("key=value"
	// joined by '&', in the driver's syntax), closed when t ends.
	open func(t testing.TB, addr, params string) *sql.DB
	// connector returns a new *sql.DB of the tests' database at addr whose
	// connections are dialled by dial (on PostgreSQL, without pgx's ping of
	// a connection reused after a second: see noPing), closed when t ends.
	connector func(t testing.TB, addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *sql.DB
}

var backends = []backend{
	{
		name:    "postgres",
		dialect: sqlstore.PostgreSQL,
		addr:    func() string { return pgServer.Addr() },
		open: func(t testing.TB, addr, params string) *sql.DB {
			url := servers.PostgresURL(addr)
			if params != "" {
				url += "&" + params
			}
			return openDB(t, "pgx", url)
		},
		connector: func(t testing.TB, addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *sql.DB {
			cfg, err := pgx.ParseConfig(servers.PostgresURL(addr))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = dial
			db := stdlib.OpenDB(*cfg, noPing)
			t.Cleanup(func() { db.Close() })
			return db
		},
	},
	{
		name:    "mariadb",
		dialect: sqlstore.MySQL,
		addr:    func() string { return myServer.Addr() },
		open: func(t testing.TB, addr, params string) *sql.DB {
			return openDB(t, "mysql", mysqlDSN(addr, params))
		},
		connector: func(t testing.TB, addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *sql.DB {
			cfg, err := mysql.ParseDSN(mysqlDSN(addr, ""))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = dial
			conn, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(conn)
			t.Cleanup(func() { db.Close() })
			return db
		},
	},
}

// forEach runs f as a subtest per backend.
func forEach(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore returns a Store on db, closed when t ends.
func newStore(t testing.TB, db *sql.DB, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var tables atomic.Int64

// tableName returns a fresh table name, for a table of the test's own.
func tableName(what string) string {
	return fmt.Sprintf("t_%s_%d_%s", what, tables.Add(1), strings.ToLower(rand.Text()[:6]))
}

// freshTable creates a table of the test's own and returns its name; the
// table is dropped when t ends.
func freshTable(t testing.TB, b backend, what string) string {
	t.Helper()
	name := tableName(what)
	db := b.open(t, b.addr(), "")
	s := newStore(t, db, sqlstore.WithTable(name))
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTable(t, b, name) })
	return name
}

// dropTable drops a lock table, its share table and its sequence.
func dropTable(t testing.TB, b backend, name string) {
	db := b.open(t, b.addr(), "")
	ctx := context.Background()
	for _, table := range []string{name, name + "_share"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			t.Error(err)
		}
	}
	if b.dialect == sqlstore.PostgreSQL {
		if _, err := db.ExecContext(ctx, "DROP SEQUENCE IF EXISTS "+name+"_fence"); err != nil {
			t.Error(err)
		}
	}
}

// key returns a fresh key, shaped like a Locker's.
func key(t testing.TB) string {
	return "test:{" + t.Name() + ":" + rand.Text()[:8] + "}"
}

// token returns a fresh token, as a Locker draws one per attempt.
func token() string { return rand.Text() }

// noPing turns off the ping that pgx's database/sql driver sends before it
// reuses a connection idle for over a second: a round trip of the pool's,
// not of the store's, that a loaded machine's pauses would add to the
// round trips the tests count.
var noPing = stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false })
