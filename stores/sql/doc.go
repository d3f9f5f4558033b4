// Package sqlstore is a core.Store that keeps reqlock's locks in a table of
// PostgreSQL or MySQL/MariaDB, through database/sql: for services that have
// such a database and no Redis.
//
//	db, err := sql.Open("pgx", "postgres://app@db/app") // github.com/jackc/pgx/v5/stdlib
//	...
//	store, err := sqlstore.New(db) // or New(db, WithDialect(sqlstore.MySQL), WithTable("app_locks"))
//	...
//	err = store.CreateTable(ctx) // once at start-up, or run store.Migration() as a migration
//	locker := core.NewWithStore(store, core.WithTTL(10*time.Second), core.WithFencing())
//
// The application brings the driver: github.com/jackc/pgx/v5/stdlib for
// PostgreSQL, github.com/go-sql-driver/mysql for MySQL and MariaDB (the
// drivers the tests use). New tells the dialect from these drivers and from
// github.com/lib/pq; with another one, or a driver wrapped by a tracing
// package, pass WithDialect. On MySQL the driver must report the insert id
// of the server's OK packet as Result.LastInsertId (go-sql-driver/mysql
// does).
//
// # The table
//
// A Store never creates its table by itself: call CreateTable (idempotent:
// CREATE ... IF NOT EXISTS), or run the DDL that Migration returns, which is
// the file migrations/postgresql.sql or migrations/mysql.sql of this module,
// with the application's other migrations. Until then every call fails with
// an error that wraps ErrNoTable and names the migration; Check reports it
// up front. On PostgreSQL:
//
//	CREATE SEQUENCE IF NOT EXISTS reqlock_locks_fence CACHE 1;
//	CREATE TABLE IF NOT EXISTS reqlock_locks (
//	    name       bytea       NOT NULL PRIMARY KEY,
//	    token      text        NOT NULL,
//	    expires_at timestamptz NOT NULL
//	);
//
// On MySQL (8.0 or later) and MariaDB (10.3 or later; the tests run on
// MariaDB 10.11):
//
//	CREATE TABLE IF NOT EXISTS reqlock_locks (
//	    name       VARBINARY(1024) NOT NULL,
//	    token      VARBINARY(255)  NOT NULL,
//	    expires_at DATETIME(6)     NOT NULL,
//	    fence      BIGINT          NOT NULL,
//	    PRIMARY KEY (name)
//	) ENGINE = InnoDB;
//
// # How a call works
//
// Every call is one autocommit statement, so one round trip on a warm
// connection, and the store keeps nothing in a database session between
// calls: no advisory lock, no open transaction, no LISTEN. It works as well
// behind a connection pooler that gives each call another server session
// (PgBouncer in transaction mode, for instance).
//
//   - TryAcquire is an upsert that takes the key's row when the key is
//     free, its lock has expired, or it already holds the caller's token (a
//     re-sent attempt, which gets its full TTL again): on PostgreSQL INSERT
//     ... ON CONFLICT (name) DO UPDATE ... WHERE expires_at <=
//     clock_timestamp() OR token = $token, on MySQL INSERT ... ON DUPLICATE
//     KEY UPDATE with each column set by IF(taken, new value, old value).
//   - Release frees the key only if it holds the caller's token and has not
//     expired: PostgreSQL deletes the row, MySQL marks it free and keeps it
//     (see fencing below).
//   - Extend sets a new expiry under the same condition.
//
// A statement that the database rolls back for a conflict with a concurrent
// one (PostgreSQL's serialization failure, where the database's default
// isolation level is REPEATABLE READ or SERIALIZABLE; a deadlock) is run
// again, a few times at most: it answers the same question once the other
// has committed.
//
// Expiry is judged by the database's clock, never the client's: the
// statements carry the TTL as a number of microseconds and compute the
// expiry with clock_timestamp() on PostgreSQL (now() would be the start of
// the transaction) and UTC_TIMESTAMP(6) on MySQL (NOW() is the session's
// local time, which sessions need not share). TTLs count in microseconds,
// the resolution of both databases' timestamps.
//
// # Fencing
//
// Fencing tokens (Martin Kleppmann, "How to do distributed locking", 2016)
// strictly increase from one holder of a key to the next, and a fenced
// Extend draws a new, higher one; a re-sent attempt draws a new one too.
//
// On PostgreSQL they come from the table's sequence, drawn by the upsert's
// RETURNING clause, which runs only for the row it took, after writing it:
// the next holder can write the row only after this statement commits, so
// its draw comes later and is higher. A sequence is durable, so fences keep
// increasing across restarts.
//
// MySQL has neither sequences nor RETURNING (MariaDB has both, but no
// RETURNING on ON DUPLICATE KEY UPDATE). There the fence is a column of the
// key's row, the larger of its last fence + 1 and the database's clock in
// microseconds since 1970, drawn in the same statement, and the statement
// returns it as its insert id (LAST_INSERT_ID(expr) sets the id that the
// server's OK packet reports: Result.LastInsertId, without a second
// statement). That is why a release keeps the row: its fence is the floor
// of the next one. A row that is purged takes its fence with it; the next
// fence of the key, drawn from the clock, is above it unless the database's
// clock went back by more than the purge's age (see Purge, at least
// MinPurgeAge on MySQL).
//
// # Rows left behind
//
// The row of a lock whose holder never released it stays until the next
// acquire of its key takes it over (expired rows are taken, never waited
// for) or Purge deletes it; on MySQL so does the row of every key that was
// released. Run Purge from a periodic job where names are not reused (an
// order ID in the name): it deletes rows that expired long enough ago and
// never a held lock.
//
// # Round trips
//
// An uncontended acquire and release take two round trips (one statement
// each) on a connection that ran them before. Drivers add their own: the
// first use of a statement on a connection prepares it (pgx's statement
// cache; on MySQL the store prepares its statements through database/sql,
// as a statement with arguments would otherwise be prepared and run in two
// round trips), and pgx's database/sql driver pings a connection idle for
// more than a second before reusing it (stdlib.OptionShouldPing changes
// that). Behind PgBouncer in transaction mode before version 1.21, set
// pgx's default_query_exec_mode=exec or simple_protocol in the connection
// string (both one round trip), since its prepared statements would land on
// other server sessions.
//
// # Failures
//
// Errors keep their kind: a database that is down or unreachable is an
// error (core.ErrStorage through a Locker), never a busy lock; the end of
// the caller's context is the context's error. An acquire whose statement
// was sent but whose answer never came (a lost connection, the I/O
// timeout) may have taken the key: the store frees it again if the
// attempt's token holds it, at once and then in the background until the
// database has answered for the attempt's TTL (Close ends these
// clean-ups).
//
// A lock is as durable as the database's commits: it survives a restart of
// the database, and a failover to a synchronous replica. After a failover to
// an asynchronous replica that had not received the last commits, their
// locks are lost (another client may take the key while its holder still
// works) and, on PostgreSQL, fencing tokens drawn meanwhile may be drawn
// again; on MySQL a lost row's key restarts from the clock, above them.
//
// # No push wake-ups, no queue
//
// The store implements neither core.Notifier nor core.Queuer: PostgreSQL's
// LISTEN/NOTIFY holds a session open to receive notices, which a
// transaction-mode pooler cannot give, and MySQL has nothing like it. A
// waiting Locker retries after its random sleep (core.WithSpin); waiters
// are served in no particular order.
package sqlstore
