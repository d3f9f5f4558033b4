package sqlstore

import (
	"embed"
	"strings"
)

// migrations holds the DDL of the tables, files per dialect, written for
// DefaultTable: the lock table (and on PostgreSQL its fencing sequence),
// then the share table.
//
//go:embed migrations/postgresql.sql migrations/mysql.sql migrations/postgresql_share.sql migrations/mysql_share.sql
var migrations embed.FS

// The suffixes of the names of the fencing sequence (PostgreSQL) and the
// share table, after the lock table's name: at most 6 bytes, for
// maxTableLen.
const (
	fenceSuffix = "_fence"
	shareSuffix = "_share"
)

// migrationFiles returns the paths of d's migrations in this module, in
// the order to run them.
func (d Dialect) migrationFiles() []string {
	if d == PostgreSQL {
		return []string{"migrations/postgresql.sql", "migrations/postgresql_share.sql"}
	}
	return []string{"migrations/mysql.sql", "migrations/mysql_share.sql"}
}

// migrationFile names d's migrations for an error message.
func (d Dialect) migrationFile() string {
	return strings.Join(d.migrationFiles(), " and ")
}

// migration returns d's DDL for table: the embedded files, one after the
// other, with the names replaced (and quoted) when table is not
// DefaultTable.
func (d Dialect) migration(table string) string {
	var parts []string
	for _, f := range d.migrationFiles() {
		b, err := migrations.ReadFile(f)
		if err != nil {
			panic("sqlstore: " + err.Error()) // embedded: cannot happen
		}
		parts = append(parts, string(b))
	}
	text := strings.Join(parts, "\n")
	if table == DefaultTable {
		return text
	}
	return strings.NewReplacer( // the longer names first: they win at the same position
		DefaultTable+fenceSuffix, d.quote(table+fenceSuffix),
		DefaultTable+shareSuffix, d.quote(table+shareSuffix),
		DefaultTable, d.quote(table),
	).Replace(text)
}

// statements splits a migration into its statements: comment lines are
// dropped, and a statement ends with a line that ends with ';'.
func statements(ddl string) []string {
	var out []string
	var cur []string
	for _, line := range strings.Split(ddl, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(trimmed, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(strings.Join(cur, "\n")), ";")
			out = append(out, stmt)
			cur = nil
		}
	}
	return out
}

// quote quotes an identifier that WithTable accepted (no quotes inside).
func (d Dialect) quote(ident string) string {
	if d == MySQL {
		return "`" + ident + "`"
	}
	return `"` + ident + `"`
}

// queries are the statements of a Store, for its dialect and table. Each
// is one autocommit statement: one round trip, no state kept in the session
// between calls.
type queries struct {
	// acquire takes the key if it is free, expired or held by the token;
	// release frees it if the token holds it and it has not expired; extend
	// resets its TTL (and draws a fence) under the same condition; undo
	// frees it if the token holds it, expired or not (the clean-up of a
	// failed attempt); purge deletes the rows of locks that expired long
	// ago; check reads nothing but fails when a table is missing.
	acquire, release, extend, undo, purge, check string

	// The statements of shares (shares.go).
	shares shareQueries

	// The statements of the Inspector (inspect.go).
	inspect inspectQueries
}

// The PostgreSQL statements. Time is the database's: clock_timestamp(), the
// time of the call (now() would be the start of the transaction). The TTL is
// sent as a number of microseconds ($3), never as a time of the client. The
// key ($1) is sent as bytes: the name column is bytea.
//
// A fence is drawn from the table's sequence by RETURNING, which runs only
// for the row that the statement inserted or updated, after the row was
// written: the next holder of the key can write it only after this
// statement has committed, so its fence, drawn after its own write, is
// higher (the sequence hands out values in the order of the calls, CACHE
// 1). A fence drawn in VALUES would be drawn before the conflict is known,
// possibly before the previous holder's.
const (
	pgAcquire = `INSERT INTO %[1]s AS l (name, token, expires_at)
VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
SET token = excluded.token, expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE l.expires_at <= clock_timestamp() OR l.token = excluded.token
RETURNING CASE WHEN $4::boolean THEN nextval('%[2]s') ELSE 0 END`

	pgRelease = `DELETE FROM %[1]s WHERE name = $1 AND token = $2
RETURNING expires_at > clock_timestamp()`

	pgExtend = `UPDATE %[1]s SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
RETURNING CASE WHEN $4::boolean THEN nextval('%[2]s') ELSE 0 END`

	pgUndo = `DELETE FROM %[1]s WHERE name = $1 AND token = $2`

	// purge skips the rows that a transaction has locked (an acquire taking
	// an expired lock over, a share call): it never waits for one, so it
	// never joins a deadlock with an AcquireAll that locks rows in another
	// order.
	pgPurge = `DELETE FROM %[1]s WHERE name IN (
SELECT name FROM %[1]s WHERE expires_at <= clock_timestamp() - $1::bigint * interval '1 microsecond' FOR UPDATE SKIP LOCKED)`

	pgCheck = `SELECT 1 FROM %[1]s, %[3]s WHERE false`
)

// The MySQL statements. Time is the database's: UTC_TIMESTAMP(6), the
// statement's start in UTC whatever the session's time zone (NOW() is
// local time, which two sessions may not share). The TTL is sent as a
// number of microseconds, never as a time of the client.
//
// MySQL has no RETURNING on INSERT ... ON DUPLICATE KEY UPDATE, so the
// statements hand back their answer in the OK packet: LAST_INSERT_ID(expr)
// sets the insert id that the server reports for the statement (the table
// has no AUTO_INCREMENT column), which database/sql returns as
// Result.LastInsertId. acquire reports the new fence (> 0) when the key is
// now the token's, 0 when another holder has it.
//
// In ON DUPLICATE KEY UPDATE, assignments run from left to right and each
// sees the columns assigned before it: token is assigned first, taking the
// key when it has expired or already holds the token; after it, "token = the
// new token" holds exactly when the key was taken (a key that is not taken
// keeps another token), and the other columns follow that condition.
//
// The fence of a key is the larger of its last fence + 1 and the clock in
// microseconds since 1970 (mysqlNow): strictly increasing while the row
// lives, which is why a release keeps the row, and above the fences of a
// purged row as long as the clock has not gone back by the purge's age.
const (
	mysqlNow = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

	// Arguments: key, token, ttl, token, token, token, token, ttl.
	mysqlAcquire = `INSERT INTO %[1]s (name, token, expires_at, fence)
VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, LAST_INSERT_ID(GREATEST(1, ` + mysqlNow + `)))
ON DUPLICATE KEY UPDATE
token = IF(expires_at <= UTC_TIMESTAMP(6) OR token = ?, ?, token),
fence = IF(token = ?, LAST_INSERT_ID(GREATEST(fence + 1, ` + mysqlNow + `)), fence + LAST_INSERT_ID(0)),
expires_at = IF(token = ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)`

	// Arguments: key, token. A released row is free (empty token, expired
	// now) and keeps its fence.
	mysqlRelease = `UPDATE %[1]s SET token = '', expires_at = UTC_TIMESTAMP(6)
WHERE name = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`

	// Arguments: fenced, ttl, key, token. The insert id is the row's fence
	// (> 0) when the row matched, whether a new one was drawn or not.
	mysqlExtend = `UPDATE %[1]s SET fence = LAST_INSERT_ID(IF(?, GREATEST(fence + 1, ` + mysqlNow + `), fence)),
expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`

	// Arguments: key, token.
	mysqlUndo = `UPDATE %[1]s SET token = '', expires_at = LEAST(expires_at, UTC_TIMESTAMP(6))
WHERE name = ? AND token = ?`

	// Arguments: age.
	mysqlPurge = `DELETE FROM %[1]s WHERE expires_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`

	mysqlCheck = `SELECT 1 FROM %[1]s, %[2]s WHERE 1 = 0`
)
