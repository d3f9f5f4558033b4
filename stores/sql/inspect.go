package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/reqlock/reqlock/lockstore"
)

// This file is the Inspector: plain reads of the lock table and the share
// table, one autocommit statement per call, which take no row lock (no FOR
// UPDATE, no FOR SHARE: a consistent read, READ COMMITTED or the
// database's default, waits for no writer) and judge expiry by the
// database's clock, as the other statements do.

var _ lockstore.Inspector = (*Store)(nil)

// inspectQueries are the statements of the Inspector, for a dialect and
// table.
type inspectQueries struct {
	// list and listOpen return the held names from a lower bound (the
	// prefix), after a name (the cursor's, or empty), in byte order, at
	// most a number of them; list also below an upper bound (the first
	// byte string past every name that begins with the prefix), listOpen
	// without one (a prefix that is empty or all 0xFF bytes). state reads
	// the lock row and the share rows of a name.
	list, listOpen, state string
}

// The PostgreSQL statements of the Inspector: %[1]s is the lock table,
// %[3]s the share table. statement_timestamp() is one time for every row
// of the statement. The name's range is a range of bytea, compared byte by
// byte, which the primary key's index serves; no LIKE, whose '%' and '_'
// a prefix would have to escape.
const (
	pgList = `SELECT name FROM %[1]s
WHERE name >= $1 AND name > $2 AND name < $3 AND token <> '' AND expires_at > statement_timestamp()
ORDER BY name LIMIT $4`

	pgListOpen = `SELECT name FROM %[1]s
WHERE name >= $1 AND name > $2 AND token <> '' AND expires_at > statement_timestamp()
ORDER BY name LIMIT $3`

	// Columns: kind (0 the lock row, 1 a share row), token, slot, n, live,
	// µs left (0 unless live), fence (0: the sequence is the table's, not
	// the name's).
	pgInspectState = `SELECT 0, token, 0, 0, expires_at > statement_timestamp(),
CASE WHEN expires_at > statement_timestamp() THEN (extract(epoch FROM expires_at - statement_timestamp()) * 1000000)::bigint ELSE 0 END,
0::bigint FROM %[1]s WHERE name = $1
UNION ALL
SELECT 1, token, slot, n, expires_at > statement_timestamp(),
CASE WHEN expires_at > statement_timestamp() THEN (extract(epoch FROM expires_at - statement_timestamp()) * 1000000)::bigint ELSE 0 END,
0::bigint FROM %[3]s WHERE name = $1
ORDER BY 1, 3`
)

// pgInspectQueries returns the PostgreSQL statements of the Inspector,
// formatted by f with the table's names.
func pgInspectQueries(f func(string) string) inspectQueries {
	return inspectQueries{list: f(pgList), listOpen: f(pgListOpen), state: f(pgInspectState)}
}

// The MySQL statements of the Inspector: %[1]s is the lock table, %[2]s
// the share table. UTC_TIMESTAMP(6) is the statement's time. VARBINARY
// compares byte by byte.
const (
	mysqlList = `SELECT name FROM %[1]s
WHERE name >= ? AND name > ? AND name < ? AND token <> '' AND expires_at > UTC_TIMESTAMP(6)
ORDER BY name LIMIT ?`

	mysqlListOpen = `SELECT name FROM %[1]s
WHERE name >= ? AND name > ? AND token <> '' AND expires_at > UTC_TIMESTAMP(6)
ORDER BY name LIMIT ?`

	// Arguments: key, key. The columns of pgInspectState; the fence is the
	// lock row's, the last one drawn for the name.
	mysqlInspectState = `SELECT 0, token, 0, 0, expires_at > UTC_TIMESTAMP(6),
GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)), fence FROM %[1]s WHERE name = ?
UNION ALL
SELECT 1, token, slot, n, expires_at > UTC_TIMESTAMP(6),
GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)), 0 FROM %[2]s WHERE name = ?
ORDER BY 1, 3`
)

// mysqlInspectQueries returns the MySQL statements of the Inspector,
// formatted by f with the table's names.
func mysqlInspectQueries(f func(string) string) inspectQueries {
	return inspectQueries{list: f(mysqlList), listOpen: f(mysqlListOpen), state: f(mysqlInspectState)}
}

// cursorPrefix begins every cursor that List hands out; the last name of
// the page follows, in unpadded base64url (a name may hold any byte).
const cursorPrefix = "sql1:"

// List returns the names of the lock table that begin with prefix and are
// held now, in byte order, at most limit of them, and the cursor of the
// next page (lockstore.Inspector): one statement, a plain read of a range
// of the primary key (names from prefix up to the first byte string past
// every name that begins with it, after the cursor's name), without row
// locks. A name is held when its row holds a token and has not expired by
// the database's clock: an exclusive holder's, or the marker of live
// shares (a name held by shares only). Free rows (released on MySQL, or
// kept for their fence) and expired ones are not listed. The cursor is the
// last name of a full page; a page of fewer than limit names is the last.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("sqlstore: list: the limit %d is not within 1..%d: %w", limit, lockstore.MaxListLimit, lockstore.ErrInvalidOption)
	}
	var after string
	if cursor != "" {
		k, ok := parseCursor(cursor)
		if !ok || !strings.HasPrefix(k, prefix) {
			return nil, "", fmt.Errorf("sqlstore: list: the cursor %q is not one this store handed out for the prefix %q: %w", cursor, prefix, lockstore.ErrInvalidOption)
		}
		after = k
	}
	query := s.q.inspect.listOpen
	args := []any{[]byte(prefix), []byte(after)}
	if hi, ok := upperBound(prefix); ok {
		query = s.q.inspect.list
		args = append(args, []byte(hi))
	}
	args = append(args, int64(limit))
	var keys []string
	err := s.read(ctx, query, args, func(rows *sql.Rows) error {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return err
		}
		keys = append(keys, string(name))
		return nil
	})
	if err != nil {
		return nil, "", s.fail(ctx, "list", err)
	}
	next := ""
	if len(keys) == limit {
		next = cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(keys[limit-1]))
	}
	return keys, next, nil
}

// parseCursor returns the name of a cursor that List handed out; ok is
// false for any other string.
func parseCursor(cursor string) (string, bool) {
	enc, ok := strings.CutPrefix(cursor, cursorPrefix)
	if !ok || enc == "" {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(b) > MaxKeyLen {
		return "", false
	}
	return string(b), true
}

// upperBound returns the least byte string above every string that begins
// with prefix: prefix without its trailing 0xFF bytes, its last byte one
// higher. ok is false when there is none (prefix is empty or all 0xFF).
func upperBound(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// Inspect returns the state of key (lockstore.Inspector), read in one
// statement without row locks: key's row of the lock table and its rows of
// the share table, with what is left of each one's TTL by the database's
// clock.
//
//   - The row's token, if live and not the marker of shares, is the
//     exclusive holder; on MySQL its Fence is the row's fence column, the
//     last fence drawn for key, which is also the key's Fence.
//   - While the row holds a live marker, the live share rows are the
//     holders, in slot order (Slot is 0 for shared holds, whose rows are
//     numbered all the same).
//   - A live row of slot -1 is an exclusive holder waiting for the shares
//     to drain (TryAcquireWaiting): Writer.
//
// PostgreSQL draws every fence of the table from one sequence, so it
// keeps no fence per name: Fence is 0 there. The store has no fair queue
// (no Queuer): Waiters is empty.
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	st := lockstore.KeyState{Key: key}
	if key == "" || len(key) > MaxKeyLen {
		return st, fmt.Errorf("sqlstore: inspect: the key is empty or longer than %d bytes: %w", MaxKeyLen, lockstore.ErrInvalidOption)
	}
	args := []any{[]byte(key)}
	if s.dialect == MySQL {
		args = append(args, []byte(key))
	}
	var lockToken string
	var lockLive bool
	var lockLeft, lockFence int64
	var shares []lockstore.HolderState
	err := s.read(ctx, s.q.inspect.state, args, func(rows *sql.Rows) error {
		var kind, slot, n int
		var token []byte
		var live bool
		var left, fence int64
		if err := rows.Scan(&kind, &token, &slot, &n, &live, &left, &fence); err != nil {
			return err
		}
		switch {
		case kind == 0:
			lockToken, lockLive, lockLeft, lockFence = string(token), live, left, fence
		case !live || len(token) == 0:
		case slot == waiterSlot:
			st.Writer = string(token)
		default:
			h := lockstore.HolderState{Token: string(token), Hold: lockstore.Hold{N: n}, TTL: time.Duration(left) * time.Microsecond}
			if n > 0 {
				h.Slot = slot
			}
			shares = append(shares, h)
		}
		return nil
	})
	if err != nil {
		return lockstore.KeyState{}, s.fail(ctx, "inspect "+strconv.Quote(key), err)
	}
	st.Fence = lockFence
	switch {
	case !lockLive || lockToken == "":
	case lockToken != shareMarker:
		st.Holders = []lockstore.HolderState{{Token: lockToken, Exclusive: true, TTL: time.Duration(lockLeft) * time.Microsecond, Fence: lockFence}}
	default:
		st.Holders = shares // in slot order: the statement sorts them
	}
	return st, nil
}

// read runs a statement that reads rows, prepared once per connection on
// MySQL (one round trip), and calls f for each row.
func (s *Store) read(ctx context.Context, query string, args []any, f func(rows *sql.Rows) error) error {
	if s.trace != nil {
		s.trace(query, args)
	}
	var rows *sql.Rows
	var err error
	var stmt *sql.Stmt
	if s.stmts != nil {
		if stmt, err = s.stmts.get(ctx, query); err != nil {
			return err
		}
	}
	if stmt != nil {
		rows, err = stmt.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
