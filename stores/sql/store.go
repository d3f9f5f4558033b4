package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// MaxKeyLen is the longest key the store accepts, in bytes (the width of
// the table's key column on MySQL). A Locker's key is its prefix and at most
// 130 bytes more (a name of up to core.MaxNameLen bytes, or the hash of a
// longer one, in braces): well below it with any reasonable prefix.
const MaxKeyLen = 1024

// maxTokenLen is the width of the token column on MySQL; a Locker's tokens
// are 26 bytes.
const maxTokenLen = 255

// Store is a core.Store on PostgreSQL or MySQL/MariaDB through database/sql,
// a core.Sharer and core.MultiAcquirer (shared holds, permits, AcquireAll)
// and a lockstore.Inspector (List and Inspect, inspect.go). Build it with
// New; it is safe for concurrent use. See the
// package doc for the tables and how each call works.
type Store struct {
	db      *sql.DB
	dialect Dialect
	table   string
	q       queries
	stmts   *stmtCache  // MySQL: prepared statements, one round trip per call
	undos   *undo.Queue // clean-ups of failed attempts
	// shareUndos are the clean-ups of failed share attempts (shares.go).
	shareUndos *undo.Queue

	// Set by the package's tests only: trace sees every statement the store
	// sends with its arguments; noUndo turns the clean-ups off.
	trace  func(query string, args []any)
	noUndo bool
	// onRetry, set by the package's tests only, sees the error of every
	// statement or transaction that is run again; beforeCommit runs just
	// before a transaction commits.
	onRetry      func(err error)
	beforeCommit func()
}

var (
	_ core.Store         = (*Store)(nil)
	_ core.Undoer        = (*Store)(nil)
	_ core.Sharer        = (*Store)(nil)
	_ core.MultiAcquirer = (*Store)(nil)
	_ core.ShareUndoer   = (*Store)(nil)
)

// New returns a Store that keeps its locks in tables of the database db,
// which it does not close. It sends nothing to the database: the tables
// must exist before the first lock is taken (see CreateTable and
// Migration), and a call made without them fails with an error that wraps
// ErrNoTable and names the migrations to run.
//
// The dialect is WithDialect's, or told from db's driver (see WithDialect).
// A nil db, an invalid option or a dialect that cannot be told returns an
// error and no Store.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: New: the *sql.DB is nil")
	}
	cfg := config{table: DefaultTable}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("sqlstore: New: option %d is nil", i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.dialect == 0 {
		d, err := detect(db.Driver())
		if err != nil {
			return nil, err
		}
		cfg.dialect = d
	}
	s := &Store{db: db, dialect: cfg.dialect, table: cfg.table}
	name := cfg.dialect.quote(cfg.table)
	switch cfg.dialect {
	case PostgreSQL:
		seq := cfg.dialect.quote(cfg.table + fenceSuffix)
		share := cfg.dialect.quote(cfg.table + shareSuffix)
		f := func(q string) string { return fmt.Sprintf(q, name, seq, share) }
		s.q = queries{
			acquire: f(pgAcquire), release: f(pgRelease), extend: f(pgExtend),
			undo: f(pgUndo), purge: f(pgPurge), check: f(pgCheck),
			shares: pgShareQueries(f), inspect: pgInspectQueries(f),
		}
	case MySQL:
		share := cfg.dialect.quote(cfg.table + shareSuffix)
		f := func(q string) string { return fmt.Sprintf(q, name, share) }
		s.q = queries{
			acquire: f(mysqlAcquire), release: f(mysqlRelease), extend: f(mysqlExtend),
			undo: f(mysqlUndo), purge: f(mysqlPurge), check: f(mysqlCheck),
			shares: mysqlShareQueries(f), inspect: mysqlInspectQueries(f),
		}
		s.stmts = &stmtCache{db: db, stmts: make(map[string]*sql.Stmt)}
	}
	s.undos = newUndos(s)
	s.shareUndos = newShareUndos(s)
	return s, nil
}

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// Table returns the name of the store's lock table.
func (s *Store) Table() string { return s.table }

// Migration returns the DDL of the store's lock table (on PostgreSQL with
// its fencing sequence) and share table: the files
// migrations/postgresql.sql and migrations/postgresql_share.sql, or
// migrations/mysql.sql and migrations/mysql_share.sql, of this module, one
// after the other, with the names of WithTable. It is what CreateTable
// runs, for the migration tool of an application whose database user may
// not create tables.
func (s *Store) Migration() string { return s.dialect.migration(s.table) }

// CreateTable creates the lock table, the share table and on PostgreSQL
// the fencing sequence if they do not exist, by running Migration's
// statements. It is idempotent, and safe to call from several processes at
// once; it changes nothing in a table that exists (a database that has the
// lock table of an earlier version gets the share table). A Store never
// creates its tables by itself: call CreateTable when the application
// starts, or run Migration with the application's migrations.
func (s *Store) CreateTable(ctx context.Context) error {
	for _, stmt := range statements(s.Migration()) {
		var err error
		for attempt := 0; ; attempt++ {
			_, err = s.db.ExecContext(ctx, stmt)
			// Two PostgreSQL sessions creating the same table at once may
			// collide on the catalog (unique_violation) despite IF NOT
			// EXISTS; the second attempt finds the table.
			if err == nil || attempt == 2 || !raceOnCreate(err) {
				break
			}
		}
		if err != nil {
			return s.fail(ctx, "create table "+s.table, err)
		}
	}
	return nil
}

// Check reports whether the lock table, the share table and on PostgreSQL
// the fencing sequence can be used: nil, an error that wraps ErrNoTable when one is
// missing, or the database's error. It changes nothing. An application may
// call it when it starts, to fail early rather than at its first lock.
func (s *Store) Check(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, s.q.check); err != nil {
		return s.fail(ctx, "check", err)
	}
	if s.dialect == PostgreSQL {
		var n int64
		q := "SELECT last_value FROM " + s.dialect.quote(s.table+"_fence")
		if err := s.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return s.fail(ctx, "check", err)
		}
	}
	return nil
}

// TryAcquire takes key for token for ttl if key is free, expired, or held
// by token already (a re-sent attempt, which then gets the full ttl again),
// in one statement: INSERT ... ON CONFLICT DO UPDATE ... WHERE on
// PostgreSQL, INSERT ... ON DUPLICATE KEY UPDATE on MySQL. With fenced it
// returns the fencing token drawn for the new holder in the same statement,
// also for a re-sent attempt (a new, higher one).
//
// An attempt that fails after its statement may have reached the database
// (no answer came back) is undone in the background: see Close.
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := checkArgs(key, token, ttl); err != nil {
		return false, 0, err
	}
	if err := ctx.Err(); err != nil { // nothing sent: nothing to undo
		return false, 0, fmt.Errorf("sqlstore: acquire %q: %w", key, err)
	}
	sent := time.Now()
	ok, fence, err := s.tryAcquire(ctx, key, token, ttl, fenced)
	if err != nil {
		if mayHaveApplied(err) && !s.noUndo {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, s.fail(ctx, "acquire "+strconv.Quote(key), err)
	}
	if !fenced {
		fence = 0
	}
	return ok, fence, nil
}

func (s *Store) tryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	us := micros(ttl)
	switch s.dialect {
	case PostgreSQL:
		var fence int64
		err := s.queryOne(ctx, &fence, s.q.acquire, []byte(key), token, us, fenced)
		if errors.Is(err, sql.ErrNoRows) {
			return false, 0, nil
		}
		return err == nil, fence, err
	default:
		res, err := s.exec(ctx, s.q.acquire, key, token, us, token, token, token, token, us)
		if err != nil {
			return false, 0, err
		}
		fence, err := res.LastInsertId()
		return err == nil && fence > 0, fence, err
	}
}

// Release frees key if token holds it and it has not expired, and reports
// whether it did. On PostgreSQL the row is deleted (also when it had
// expired and nobody took it: then Release reports false); on MySQL it is
// marked free and kept, with the key's last fence.
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	if err := checkArgs(key, token, time.Microsecond); err != nil {
		return false, err
	}
	var ok bool
	var err error
	switch s.dialect {
	case PostgreSQL:
		err = s.queryOne(ctx, &ok, s.q.release, []byte(key), token)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
	default:
		var res sql.Result
		if res, err = s.exec(ctx, s.q.release, key, token); err == nil {
			var n int64
			n, err = res.RowsAffected()
			ok = n > 0
		}
	}
	if err != nil {
		return false, s.fail(ctx, "release "+strconv.Quote(key), err)
	}
	return ok, nil
}

// Extend resets the TTL of key to ttl, from now by the database's clock, if
// token holds it and it has not expired, and reports whether it did. With
// fenced it draws a new, higher fencing token in the same statement.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := checkArgs(key, token, ttl); err != nil {
		return false, 0, err
	}
	us := micros(ttl)
	var ok bool
	var fence int64
	var err error
	switch s.dialect {
	case PostgreSQL:
		err = s.queryOne(ctx, &fence, s.q.extend, []byte(key), token, us, fenced)
		if errors.Is(err, sql.ErrNoRows) {
			return false, 0, nil
		}
		ok = err == nil
	default:
		var res sql.Result
		if res, err = s.exec(ctx, s.q.extend, fenced, us, key, token); err == nil {
			var n int64
			if fence, err = res.LastInsertId(); err == nil {
				n, err = res.RowsAffected()
			}
			ok = fence > 0 || n > 0
		}
	}
	if err != nil {
		return false, 0, s.fail(ctx, "extend "+strconv.Quote(key), err)
	}
	if !ok || !fenced {
		fence = 0
	}
	return ok, fence, nil
}

// Purge deletes the rows of locks that expired (or, on MySQL, were
// released) at least olderThan ago by the database's clock, and returns how
// many it deleted. Locks are never lost by it: a lock that expired is
// taken over by the next acquire of its key anyway; Purge only keeps the
// table from growing with keys that are not used again (a lock whose holder
// died, and on MySQL every key that was ever locked).
//
// On MySQL, olderThan counts as at least MinPurgeAge. A purged row takes
// the last fence of its key with it, and the key's next fence is then drawn
// from the database's clock: above the purged fence, unless an acquire read
// the clock before that fence was drawn and then stalled for longer than
// the purge's age before writing its row, which a minute rules out. On
// PostgreSQL fences come from a sequence and olderThan may be 0.
//
// Rows of the share table that expired at least olderThan ago go too:
// for each of their names, one share transaction (as ReleaseShare's)
// deletes the name's expired share rows and frees its lock row when it
// holds the marker of shares that all expired. The count includes them.
func (s *Store) Purge(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("sqlstore: Purge: olderThan %v is negative", olderThan)
	}
	if s.dialect == MySQL {
		olderThan = max(olderThan, MinPurgeAge)
	}
	shares, err := s.purgeShares(ctx, olderThan)
	if err != nil {
		return shares, s.fail(ctx, "purge", err)
	}
	res, err := s.exec(ctx, s.q.purge, olderThan.Microseconds())
	if err != nil {
		return shares, s.fail(ctx, "purge", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return shares, s.fail(ctx, "purge", err)
	}
	return shares + n, nil
}

// MinPurgeAge is the least age at which Purge deletes a row on MySQL.
const MinPurgeAge = time.Minute

// Close ends the clean-ups of failed attempts that are still retrying in
// the background (see TryAcquire; their locks expire with their TTL) and
// waits for their goroutine, and closes the prepared statements of the
// store (MySQL). It does not close the *sql.DB. The store still works after
// Close, without background clean-ups.
func (s *Store) Close() error {
	s.undos.Close()
	s.shareUndos.Close()
	if s.stmts != nil {
		return s.stmts.close()
	}
	return nil
}

// checkArgs rejects what the table cannot hold.
func checkArgs(key, token string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("sqlstore: the key is empty")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("sqlstore: the key is %d bytes long, more than MaxKeyLen (%d)", len(key), MaxKeyLen)
	case token == "":
		return errors.New("sqlstore: the token is empty")
	case len(token) > maxTokenLen:
		return fmt.Errorf("sqlstore: the token is %d bytes long, more than %d", len(token), maxTokenLen)
	case token == shareMarker:
		return fmt.Errorf("sqlstore: the token %q is reserved for the lock rows of shared names", token)
	case ttl <= 0:
		return fmt.Errorf("sqlstore: the TTL %v is not positive", ttl)
	}
	return nil
}

// micros returns ttl in whole microseconds, rounded up: the databases'
// resolution.
func micros(ttl time.Duration) int64 {
	return int64((ttl + time.Microsecond - 1) / time.Microsecond)
}

// maxTries bounds the runs of a statement that the database rolled back
// for a conflict with a concurrent one (see retryable).
const maxTries = 5

// queryOne runs a statement that returns at most one row and scans it into
// dest (sql.ErrNoRows: none).
//
// On PostgreSQL, a statement that failed for a serialization failure runs
// again in a READ COMMITTED transaction of its own (see readCommitted).
func (s *Store) queryOne(ctx context.Context, dest any, query string, args ...any) error {
	rc := false
	for try := 1; ; try++ {
		if s.trace != nil {
			s.trace(query, args)
		}
		var err error
		if rc {
			err = s.readCommitted(ctx, func(tx *sql.Tx) error {
				return tx.QueryRowContext(ctx, query, args...).Scan(dest)
			})
		} else {
			err = s.db.QueryRowContext(ctx, query, args...).Scan(dest)
		}
		if try == maxTries || !retryable(err) || ctx.Err() != nil {
			return err
		}
		s.retrying(err)
		rc = serializationFailure(err)
	}
}

// exec runs a statement, prepared once per connection on MySQL. On
// PostgreSQL, a statement that failed for a serialization failure runs
// again in a READ COMMITTED transaction of its own (see readCommitted).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	rc := false
	for try := 1; ; try++ {
		if s.trace != nil {
			s.trace(query, args)
		}
		var res sql.Result
		var err error
		if rc {
			err = s.readCommitted(ctx, func(tx *sql.Tx) error {
				res, err = tx.ExecContext(ctx, query, args...)
				return err
			})
		} else {
			res, err = s.exec1(ctx, query, args)
		}
		if try == maxTries || !retryable(err) || ctx.Err() != nil {
			return res, err
		}
		s.retrying(err)
		rc = serializationFailure(err)
	}
}

// retrying tells the tests' hook that a statement or transaction that
// failed with err runs again.
func (s *Store) retrying(err error) {
	if s.onRetry != nil {
		s.onRetry(err)
	}
}

// readCommitted runs f in a READ COMMITTED transaction, committed unless f
// fails (sql.ErrNoRows included: then the statement changed nothing).
//
// It is where a PostgreSQL statement goes after a serialization failure:
// a database whose default isolation level is REPEATABLE READ or
// SERIALIZABLE fails an autocommit upsert whose row a transaction that
// committed after the statement began has changed, such as a share call's
// on the name's lock row, and would fail it again whenever it waits for
// the next one. READ COMMITTED waits for the row and reads its last
// version instead; the extra round trips (BEGIN, COMMIT) are paid only
// there.
func (s *Store) readCommitted(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback() // the server drops what a transaction that never committed did
		return err
	}
	return tx.Commit()
}

func (s *Store) exec1(ctx context.Context, query string, args []any) (sql.Result, error) {
	if s.stmts != nil {
		stmt, err := s.stmts.get(ctx, query)
		if err != nil {
			return nil, notSent{err}
		}
		if stmt != nil {
			return stmt.ExecContext(ctx, args...)
		}
	}
	return s.db.ExecContext(ctx, query, args...)
}

// notSent wraps the error of a statement that was not sent: its
// preparation failed.
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// stmtCache prepares each statement once for the *sql.DB, which prepares it
// again on each connection it runs on: after that, a call is one round
// trip on MySQL (COM_STMT_EXECUTE), where a statement with arguments sent
// by db.ExecContext is two (prepare, execute) unless the DSN sets
// interpolateParams.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

// get returns the prepared statement of query, preparing it if needed;
// nil after close (the caller runs the query unprepared). A failed
// preparation (the database down, the table missing) is tried again by the
// next call.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[query]
	closed := c.closed
	c.mu.Unlock()
	if ok || closed {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok || c.closed { // prepared meanwhile, or closed
		_ = st.Close()
		return prev, nil
	}
	c.stmts[query] = st
	return st, nil
}

// cached returns the prepared statement of query if it has one, and
// prepares nothing.
func (c *stmtCache) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}
