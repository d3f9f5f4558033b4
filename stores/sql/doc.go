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
// # The tables
//
// A Store never creates its tables by itself: call CreateTable (idempotent:
// CREATE ... IF NOT EXISTS), or run the DDL that Migration returns, which is
// the files migrations/postgresql.sql and migrations/postgresql_share.sql,
// or migrations/mysql.sql and migrations/mysql_share.sql, of this module,
// with the application's other migrations. Until then every call fails with
// an error that wraps ErrNoTable and names the migrations; Check reports it
// up front. The share table is new in reqlock v0.2: where the migrations
// are run by hand, run the *_share.sql file once (CreateTable does it).
// Exclusive waiters use it too (TryAcquireWaiting), so a Locker needs it
// even without shared holds. On PostgreSQL:
//
//	CREATE SEQUENCE IF NOT EXISTS reqlock_locks_fence CACHE 1;
//	CREATE TABLE IF NOT EXISTS reqlock_locks (
//	    name       bytea       NOT NULL PRIMARY KEY,
//	    token      text        NOT NULL,
//	    expires_at timestamptz NOT NULL
//	);
//	CREATE TABLE IF NOT EXISTS reqlock_locks_share (
//	    name       bytea       NOT NULL,
//	    slot       integer     NOT NULL,
//	    token      text        NOT NULL,
//	    n          integer     NOT NULL,
//	    expires_at timestamptz NOT NULL,
//	    PRIMARY KEY (name, slot)
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
//	CREATE TABLE IF NOT EXISTS reqlock_locks_share (
//	    name       VARBINARY(1024) NOT NULL,
//	    slot       INT             NOT NULL,
//	    token      VARBINARY(255)  NOT NULL,
//	    n          INT             NOT NULL,
//	    expires_at DATETIME(6)     NOT NULL,
//	    PRIMARY KEY (name, slot)
//	) ENGINE = InnoDB;
//
// # How a call works
//
// Every call of an exclusive lock is one autocommit statement, so one
// round trip on a warm connection; shared holds, permits and AcquireAll
// take one transaction per call (see below). The store keeps nothing in a
// database session between calls: no advisory lock, no transaction left
// open, no LISTEN. It works as well behind a connection pooler that gives
// each call or transaction another server session (PgBouncer in
// transaction mode, for instance).
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
// has committed. On PostgreSQL, a statement that failed to serialize runs
// again in a READ COMMITTED transaction of its own, which waits for the
// other instead (two more round trips, there only): at those levels an
// upsert that waits for a row that another transaction changes fails
// again at each try, and share calls change a name's row often.
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
// released, and on both the share rows of a name, one per slot it used.
// Run Purge from a periodic job where names are not reused (an order ID in
// the name): it deletes rows that expired long enough ago and never a held
// lock or a live share (the share rows of a name go in a share call of
// their own, once no share or waiter of the name is live).
//
// # Round trips
//
// An uncontended acquire and release take two round trips (one statement
// each) on a connection that ran them before. A share call takes five on
// PostgreSQL (BEGIN, the lock of the name's row, the read, the write of
// the share and the marker in one statement, COMMIT), four when it is
// refused (ROLLBACK instead of the write); on MySQL seven and five (the
// isolation level is a statement of its own, and the share and the marker
// are written by two). TryAcquireWaiting takes one round trip when it
// takes the name on PostgreSQL (two on MySQL) and two when it fails on
// shares; TryAcquireAll of n keys takes n + 2 (n + 3 on MySQL).
// TestShareRoundTrips counts them. Drivers add their own: the
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
// clean-ups). So with a share whose COMMIT was sent without an answer: it
// is released in the background (UndoShare, core.ShareUndoer, which the
// Locker also calls for a share whose release failed); the keys of a
// failed TryAcquireAll are undone by the Locker. A transaction that fails
// before its COMMIT is sent has changed nothing.
//
// A lock is as durable as the database's commits: it survives a restart of
// the database, and a failover to a synchronous replica. After a failover to
// an asynchronous replica that had not received the last commits, their
// locks are lost (another client may take the key while its holder still
// works) and, on PostgreSQL, fencing tokens drawn meanwhile may be drawn
// again; on MySQL a lost row's key restarts from the clock, above them.
//
// # Shared holds and numbered permits
//
// The store is a core.Sharer: core.Shared (any number of shared holders,
// the read side of a read-write lock, as Curator's
// InterProcessReadWriteLock and Redisson's RReadWriteLock) and
// core.Permits(n) (at most n holders at once, each in a numbered slot, as
// Curator's InterProcessSemaphoreV2 with numbered leases). The shares of a
// name are rows of the share table, one per slot: slots 0..n-1 for
// Permits(n), 0, 1, 2... for shared holds, each with its holder's token,
// the mode n (0 for shared holds) and its own expiry. While a name has
// live shares, its row in the lock table holds the marker token
// '(shares)', which no Locker's token equals and which every call refuses
// as a token, expiring with the latest share: the exclusive statements
// above see the name held by another token and need no change (an
// exclusive acquire fails, a share's token releases or extends nothing
// there). Fences come from the same counter as exclusive holds (the
// sequence; the lock row's fence column on MySQL), so they increase
// across modes.
//
// Each share call (TryAcquireShare, ReleaseShare, ExtendShare) is one
// transaction at READ COMMITTED whatever the database's default:
//
//  1. lock the name's row of the lock table (an upsert that inserts it free
//     when it is missing): the calls of one name queue on that row, which
//     the exclusive statements lock too;
//  2. read the lock row and the name's share rows (a plain SELECT: at READ
//     COMMITTED each statement sees what the previous holders of the row
//     lock committed);
//  3. decide (held exclusively, a waiting writer, n permits live, another
//     mode: ErrModeMismatch) and write: the share in the lowest free slot
//     (a re-sent attempt keeps its slot), then the marker, its expiry the
//     later of the share's and the other live shares' latest, and the
//     fence; a release marks the share's row expired and sets the marker
//     to the latest remaining share, or frees the name after the last one;
//  4. commit, or roll back when nothing was written.
//
// Expired shares are not deleted: each is the row of its slot, reused by
// the next share of that slot (an expired share frees its slot at its TTL
// whatever the others do), and Purge deletes the rows of names that no
// share holds any more. Writing rows only by their primary key and never
// deleting them in a share call keeps InnoDB from locking the gaps between
// index records, which belong to no name: share calls of different names
// never wait for each other, and the tests see no deadlock, also under
// concurrency on neighbouring names. (At REPEATABLE READ, InnoDB's
// default, two share calls of neighbouring names inserting into one gap
// deadlocked.) On MySQL the transaction level is a statement of its own,
// which needs binlog_format ROW or MIXED where binary logging is on (the
// defaults of MySQL 8 and MariaDB).
//
// Writers do not starve: TryAcquireWaiting, an exclusive waiter's attempt
// after its first, is the acquire statement and, when it fails because
// shares hold the name, a second statement that records the waiter in the
// share table's slot -1 for its patience (renewed at each attempt, never
// shortened). While that record is live no new share is taken, also after
// the shares drained, until the waiter takes the name (the acquire ends
// the record: on PostgreSQL in the same statement, on MySQL in a second
// one) or gives up and the record expires.
//
// # Several names at once
//
// The store is a core.MultiAcquirer: TryAcquireAll takes every key or
// none in one transaction, running the acquire statement of each key in
// the order of their bytes and rolling back at the first that finds its
// key held (by a lock or by shares). Two calls that share keys lock their
// rows in one order, so they never deadlock, whatever order their callers
// list the names in (Redisson's RedissonMultiLock deadlocks there). The
// Locker undoes the keys of an attempt that failed with an error (a commit
// whose answer was lost may have taken them) through Undo.
//
// # Inspection
//
// The store is a lockstore.Inspector (core.Locker's List and Inspect, the
// reqlock command). List is one SELECT of a range of the primary key
// (from the prefix up to the first byte string past every name that
// begins with it: no LIKE, whose '%' and '_' a prefix would have to
// escape) of the rows held by a live token, an exclusive holder's or the
// marker of live shares, by the database's clock, ORDER BY name LIMIT n;
// the cursor is the last name of a full page. Inspect is one SELECT of the
// name's lock row and share rows. Both are plain reads, without FOR UPDATE
// or FOR SHARE: they never wait for a lock call nor make one wait. On
// MySQL a name's fence is its row's, the last one drawn; PostgreSQL draws
// the fences of every name of the table from one sequence, and Inspect
// reports 0 there.
//
// # No push wake-ups, no queue
//
// The store implements neither core.Notifier nor core.Queuer: PostgreSQL's
// LISTEN/NOTIFY holds a session open to receive notices, which a
// transaction-mode pooler cannot give, and MySQL has nothing like it. A
// waiting Locker retries after its random sleep (core.WithSpin); waiters
// are served in no particular order.
package sqlstore
