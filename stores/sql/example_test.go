package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL/MariaDB driver, registered as "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver, registered as "pgx"

	"github.com/reqlock/reqlock/core"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// Lock an order on PostgreSQL, with a fencing token for the writes the
// request makes to other services.
func Example() {
	db, err := sql.Open("pgx", pgURL) // "postgres://user@host/db"
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	store, err := sqlstore.New(db) // the dialect is told from the driver
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	// Once, when the service starts (or run store.Migration() with the
	// service's migrations instead).
	if err := store.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}

	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithFencing())
	defer locker.Close()
	lease, err := locker.Acquire(ctx, "order:42")
	if err != nil {
		log.Fatal(err) // core.ErrTimeout: busy; core.ErrStorage: the database failed
	}
	defer lease.Release(ctx)
	fmt.Println("locked", lease.Name(), "with a fence:", lease.Fence() > 0)
	// Output: locked order:42 with a fence: true
}

// The same on MySQL or MariaDB, in a table of another name.
func Example_mySQL() {
	db, err := sql.Open("mysql", myDSN) // "user:password@tcp(host:3306)/db"
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	store, err := sqlstore.New(db, sqlstore.WithDialect(sqlstore.MySQL), sqlstore.WithTable("app_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	if err := store.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}

	locker := core.NewWithStore(store, core.WithWait(100*time.Millisecond))
	defer locker.Close()
	first, err := locker.Acquire(ctx, "report:daily")
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)
	_, err = locker.Acquire(ctx, "report:daily")
	fmt.Println("second acquire:", err != nil)
	// Output: second acquire: true
}

// Shared holds, numbered permits and several names at once on
// PostgreSQL: reads share an order, writes exclude; a hot item's stock is
// sold from 2 segments at once; a transfer takes both orders or none.
func Example_shares() {
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := sqlstore.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	if err := store.CreateTable(ctx); err != nil { // the lock and share tables
		log.Fatal(err)
	}
	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithWait(100*time.Millisecond))
	defer locker.Close()

	r1, _ := locker.Acquire(ctx, "order:7", core.Shared())
	r2, _ := locker.Acquire(ctx, "order:7", core.Shared())
	_, err = locker.Acquire(ctx, "order:7") // a writer waits for the readers
	fmt.Println("two readers, writer refused:", r1 != nil && r2 != nil, err != nil)
	r1.Release(ctx)
	r2.Release(ctx)

	s0, _ := locker.Acquire(ctx, "stock:10001", core.Permits(2))
	s1, _ := locker.Acquire(ctx, "stock:10001", core.Permits(2))
	_, err = locker.Acquire(ctx, "stock:10001", core.Permits(2))
	fmt.Println("segments", s0.Slot(), s1.Slot(), "third refused:", err != nil)
	s0.Release(ctx)
	s1.Release(ctx)

	both, err := locker.AcquireAll(ctx, []string{"order:8", "order:7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("transfer holds", len(both.Names()), "orders")
	both.Release(ctx)
	// Output:
	// two readers, writer refused: true true
	// segments 0 1 third refused: true
	// transfer holds 2 orders
}

// The migrations of the lock and share tables on PostgreSQL, for a service
// whose database role may not create tables: the files
// migrations/postgresql.sql and migrations/postgresql_share.sql.
func ExampleStore_Migration() {
	db, _ := sql.Open("pgx", pgURL) // connects only when used
	defer db.Close()
	store, _ := sqlstore.New(db)
	fmt.Print(store.Migration())
	// Output:
	// -- The lock table of github.com/reqlock/reqlock/stores/sql on PostgreSQL
	// -- (9.5 or later). Store.CreateTable runs these statements; run them
	// -- yourself, or copy them into your migrations, where the application's
	// -- database role may not create tables. With WithTable, replace the names.
	// --
	// -- The fencing sequence hands out the fencing tokens of every lock of the
	// -- table. CACHE 1 (the default) keeps its values in the order of the calls of
	// -- nextval across all sessions, which strictly increasing fences need.
	// CREATE SEQUENCE IF NOT EXISTS reqlock_locks_fence CACHE 1;
	//
	// -- One row per held lock: its key (bytes: a key may hold any byte, which
	// -- text may not), the token of its holder and when it expires by the
	// -- database's clock. A release deletes the row; a lock whose holder never
	// -- released it stays until the next acquire of its key takes it over, or
	// -- Store.Purge deletes it. While shares hold a name, its row holds the
	// -- marker token '(shares)' (see postgresql_share.sql).
	// CREATE TABLE IF NOT EXISTS reqlock_locks (
	//     name       bytea       NOT NULL PRIMARY KEY,
	//     token      text        NOT NULL,
	//     expires_at timestamptz NOT NULL
	// );
	//
	// -- The share table of github.com/reqlock/reqlock/stores/sql on PostgreSQL,
	// -- beside the lock table of migrations/postgresql.sql: shared holds,
	// -- numbered permits and waiting exclusive holders (core.Shared,
	// -- core.Permits). Store.CreateTable runs this statement too; where you run
	// -- the migrations yourself, run this file once after postgresql.sql (it is
	// -- new in reqlock v0.2: an exclusive waiter's retries use it as well). With
	// -- WithTable, replace the names.
	// --
	// -- One row per share of a name: slot 0..n-1 for a permit of Permits(n),
	// -- 0, 1, 2... for shared holds (n = 0); the token of its holder and when it
	// -- expires by the database's clock. Slot -1 is the record of an exclusive
	// -- holder that waits for the shares to drain (n = -1): while it is live no
	// -- new share is taken. While a name has live shares, its row in the lock
	// -- table holds the marker token '(shares)' until the latest share expires,
	// -- so that exclusive holders see the name as held. Rows of shares whose
	// -- holder died are reused or deleted by the next share call of their name,
	// -- or by Store.Purge.
	// CREATE TABLE IF NOT EXISTS reqlock_locks_share (
	//     name       bytea       NOT NULL,
	//     slot       integer     NOT NULL,
	//     token      text        NOT NULL,
	//     n          integer     NOT NULL,
	//     expires_at timestamptz NOT NULL,
	//     PRIMARY KEY (name, slot)
	// );
}

// Delete the rows of locks that expired an hour ago or more, from a
// periodic job: a lock whose holder died is taken over by the next acquire
// of its name anyway, but a name that is never locked again keeps its row
// until then.
func ExampleStore_Purge() {
	db, _ := sql.Open("pgx", pgURL)
	defer db.Close()
	store, _ := sqlstore.New(db)
	defer store.Close()

	n, err := store.Purge(context.Background(), time.Hour)
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Println("purged:", n >= 0)
	// Output: purged: true
}
