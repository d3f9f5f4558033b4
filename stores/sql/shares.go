package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// This file holds shared holds and numbered permits (core.Sharer) and the
// atomic acquire of several keys (core.MultiAcquirer). See the package doc,
// "Shared holds and numbered permits", for the design; in short:
//
//   - the shares of a name are rows of the share table, one per slot;
//   - while shares are live, the name's row in the lock table holds the
//     marker token shareMarker, expiring with the latest share, so that the
//     exclusive statements (acquire, release, extend, undo) find the name
//     held by a token that is not theirs and need no change;
//   - every share call is one transaction that first locks the name's row
//     in the lock table (creating it free if it is missing), then reads the
//     name's shares and writes: the calls of one name are serialized by
//     that row lock, which the exclusive statements take too.

// shareMarker is the token of a lock row while shares hold its name: never
// a Locker's token (those are base32 text), and refused as a token by
// every call (checkArgs).
const shareMarker = "(shares)"

// waiterSlot is the slot of the row that records a waiting exclusive
// holder (TryAcquireWaiting) in the share table.
const waiterSlot = -1

// shareQueries are the statements of shares, for a dialect and table.
type shareQueries struct {
	// lockName locks the name's row of the lock table, inserting it free
	// if it is missing; state reads the lock row and the share rows of the
	// name; insertShare writes a share in a new row, updateShare in the
	// row of its slot; retireShare ends one (it expires now, and stays for
	// the next share of its slot); deleteShare deletes one (Purge); mark
	// sets the lock row to the marker and its expiry to the later of now +
	// a TTL and a floor (and draws a fence); freeName frees the lock row
	// if it holds the marker.
	//
	// On PostgreSQL, insertShare and updateShare mark the lock row in the
	// same statement, and retireMark and retireFree retire a share and
	// mark or free the lock row: one round trip each, where MySQL, which
	// cannot write two tables in one statement, takes two.
	lockName, state, insertShare, updateShare, retireShare, deleteShare, mark, freeName string
	retireMark, retireFree                                                              string
	// acquireWaiting (PostgreSQL) is acquire that also ends the waiter
	// record when it takes the key; clearWaiter (MySQL) ends it after the
	// acquire; recordWaiter sets or renews it if the name's lock row holds
	// a live marker.
	acquireWaiting, clearWaiter, recordWaiter string
	// purgeNames lists the names that have share rows that expired long
	// ago.
	purgeNames string
}

// The PostgreSQL statements of shares: %[1]s is the lock table, %[2]s the
// fencing sequence, %[3]s the share table. Inside a transaction,
// statement_timestamp() is the time of the statement (now() would be the
// start of the transaction), one value for all the rows it reads.
const (
	pgLockName = `INSERT INTO %[1]s AS l (name, token, expires_at) VALUES ($1, '', '-infinity')
ON CONFLICT (name) DO UPDATE SET token = l.token`

	pgState = `SELECT 'l', token, 0, 0, expires_at > statement_timestamp(), 0::bigint FROM %[1]s WHERE name = $1
UNION ALL
SELECT 's', token, slot, n, expires_at > statement_timestamp(), (extract(epoch FROM expires_at) * 1000000)::bigint FROM %[3]s WHERE name = $1`

	// Arguments: key, slot, token, n, ttl, floor (µs since 1970), fenced.
	// The share and the marker expire at the same now + ttl (or the
	// marker at floor, the latest other share's expiry, if later).
	pgInsertShare = `WITH s AS (
INSERT INTO %[3]s (name, slot, token, n, expires_at)
VALUES ($1, $2, $3, $4, statement_timestamp() + $5::bigint * interval '1 microsecond')
)
` + pgMarkAfterWrite

	// Arguments: key, slot, token, n, ttl, floor, fenced.
	pgUpdateShare = `WITH s AS (
UPDATE %[3]s SET token = $3, n = $4, expires_at = statement_timestamp() + $5::bigint * interval '1 microsecond'
WHERE name = $1 AND slot = $2
)
` + pgMarkAfterWrite

	pgMarkAfterWrite = `UPDATE %[1]s SET token = '` + shareMarker + `',
expires_at = GREATEST(statement_timestamp() + $5::bigint * interval '1 microsecond', 'epoch'::timestamptz + $6::bigint * interval '1 microsecond')
WHERE name = $1
RETURNING CASE WHEN $7::boolean THEN nextval('%[2]s') ELSE 0 END`

	pgRetireShare = `UPDATE %[3]s SET token = '', expires_at = statement_timestamp() WHERE name = $1 AND slot = $2`

	// Arguments: key, slot, floor: the marker then expires with the latest
	// remaining share.
	pgRetireMark = `WITH s AS (` + pgRetireShare + `)
UPDATE %[1]s SET expires_at = GREATEST(statement_timestamp(), 'epoch'::timestamptz + $3::bigint * interval '1 microsecond')
WHERE name = $1 AND token = '` + shareMarker + `'`

	// Arguments: key, slot: the last share, and key is free.
	pgRetireFree = `WITH s AS (` + pgRetireShare + `)
` + pgFreeName

	pgDeleteShare = `DELETE FROM %[3]s WHERE name = $1 AND slot = $2`

	pgFreeName = `DELETE FROM %[1]s WHERE name = $1 AND token IN ('` + shareMarker + `', '')`

	// acquire, and the end of the waiter record when it took the key, in
	// one statement: the upsert locks the lock row first.
	pgAcquireWaiting = `WITH a AS (
INSERT INTO %[1]s AS l (name, token, expires_at)
VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
SET token = excluded.token, expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE l.expires_at <= clock_timestamp() OR l.token = excluded.token
RETURNING CASE WHEN $4::boolean THEN nextval('%[2]s') ELSE 0 END AS fence
), w AS (
UPDATE %[3]s SET expires_at = LEAST(expires_at, clock_timestamp())
WHERE name = $1 AND slot = ` + waiterSlotText + ` AND EXISTS (SELECT 1 FROM a)
)
SELECT fence FROM a`

	// Arguments: key, token, patience. A waiter that renews the record
	// never shortens it: another may wait longer.
	pgRecordWaiter = `INSERT INTO %[3]s AS s (name, slot, token, n, expires_at)
SELECT name, ` + waiterSlotText + `, $2, ` + waiterSlotText + `, clock_timestamp() + $3::bigint * interval '1 microsecond' FROM %[1]s
WHERE name = $1 AND token = '` + shareMarker + `' AND expires_at > clock_timestamp()
ON CONFLICT (name, slot) DO UPDATE SET token = excluded.token, expires_at = GREATEST(s.expires_at, excluded.expires_at)`

	pgPurgeNames = `SELECT DISTINCT name FROM %[3]s WHERE expires_at <= clock_timestamp() - $1::bigint * interval '1 microsecond'`
)

// waiterSlotText is waiterSlot in the statements.
const waiterSlotText = "-1"

// pgShareQueries returns the PostgreSQL statements of shares, formatted by
// f with the table's names.
func pgShareQueries(f func(string) string) shareQueries {
	return shareQueries{
		lockName: f(pgLockName), state: f(pgState), insertShare: f(pgInsertShare), updateShare: f(pgUpdateShare),
		retireMark: f(pgRetireMark), retireFree: f(pgRetireFree), deleteShare: f(pgDeleteShare),
		freeName: f(pgFreeName), acquireWaiting: f(pgAcquireWaiting),
		recordWaiter: f(pgRecordWaiter), purgeNames: f(pgPurgeNames),
	}
}

// The MySQL statements of shares: %[1]s is the lock table, %[2]s the share
// table. UTC_TIMESTAMP(6) is the time of the statement.
//
// A share transaction runs at READ COMMITTED (see inTx): under InnoDB's
// REPEATABLE READ, the default, inserts and duplicate checks lock the gaps
// between index records, which belong to no name (the gap after a name's
// last share row is the gap before the next name's first one), so two
// transactions of neighbouring names inserting share rows into one gap
// deadlocked each other (InnoDB rolls one back; TestSharesConcurrent saw
// it). At READ COMMITTED InnoDB locks rows, not gaps, and each statement
// reads what has been committed when it starts, which the transaction's
// first statement, the lock of the name's lock row, has waited for. The
// transaction reads the shares with a plain SELECT (no lock) and writes
// rows by their whole primary key only. And it never deletes a row: a
// released share's row expires at once and is reused by the next share of
// its slot (a deleted row stays in the index until it is purged, and an
// insert of its key locks it with its gap). So share transactions of
// different names never wait for each other, and those of one name queue
// on its lock row. Only Purge deletes share rows, of names that no share
// holds.
const (
	mysqlLockName = `INSERT INTO %[1]s (name, token, expires_at, fence) VALUES (?, '', UTC_TIMESTAMP(6), 0)
ON DUPLICATE KEY UPDATE fence = fence`

	// Arguments: key, key.
	mysqlState = `SELECT 'l', token, 0, 0, expires_at > UTC_TIMESTAMP(6), 0 FROM %[1]s WHERE name = ?
UNION ALL
SELECT 's', token, slot, n, expires_at > UTC_TIMESTAMP(6), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) FROM %[2]s WHERE name = ?`

	// Arguments: key, slot, token, n, ttl. The transaction has read the
	// name's rows: a plain INSERT for a new slot, an UPDATE of the slot's
	// row otherwise (no ON DUPLICATE KEY UPDATE, whose duplicate check
	// locks a gap).
	mysqlInsertShare = `INSERT INTO %[2]s (name, slot, token, n, expires_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`

	// Arguments: token, n, ttl, key, slot.
	mysqlUpdateShare = `UPDATE %[2]s SET token = ?, n = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND slot = ?`

	mysqlRetireShare = `UPDATE %[2]s SET token = '', expires_at = UTC_TIMESTAMP(6) WHERE name = ? AND slot = ?`

	mysqlDeleteShare = `DELETE FROM %[2]s WHERE name = ? AND slot = ?`

	// Arguments: fenced, ttl, floor (µs since 1970), key. The insert id is
	// the row's fence, a new one when fenced.
	mysqlMark = `UPDATE %[1]s SET token = '` + shareMarker + `',
fence = LAST_INSERT_ID(IF(?, GREATEST(fence + 1, ` + mysqlNow + `), fence)),
expires_at = GREATEST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, TIMESTAMP'1970-01-01 00:00:00' + INTERVAL ? MICROSECOND)
WHERE name = ?`

	// A freed row keeps its fence, as after a release.
	mysqlFreeName = `UPDATE %[1]s SET token = '', expires_at = UTC_TIMESTAMP(6) WHERE name = ? AND token = '` + shareMarker + `'`

	mysqlClearWaiter = `UPDATE %[2]s SET expires_at = LEAST(expires_at, UTC_TIMESTAMP(6)) WHERE name = ? AND slot = ` + waiterSlotText

	// Arguments: token, patience, key. An autocommit statement: the
	// SELECT locks the lock row (shared) before the share table's row, the
	// order of the share transactions.
	mysqlRecordWaiter = `INSERT INTO %[2]s (name, slot, token, n, expires_at)
SELECT name, ` + waiterSlotText + `, ?, ` + waiterSlotText + `, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND FROM %[1]s
WHERE name = ? AND token = '` + shareMarker + `' AND expires_at > UTC_TIMESTAMP(6)
ON DUPLICATE KEY UPDATE token = VALUES(token), expires_at = GREATEST(%[2]s.expires_at, VALUES(expires_at))`

	mysqlPurgeNames = `SELECT DISTINCT name FROM %[2]s WHERE expires_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`
)

// mysqlShareQueries returns the MySQL statements of shares, formatted by f
// with the table's names.
func mysqlShareQueries(f func(string) string) shareQueries {
	return shareQueries{
		lockName: f(mysqlLockName), state: f(mysqlState), insertShare: f(mysqlInsertShare), updateShare: f(mysqlUpdateShare),
		retireShare: f(mysqlRetireShare), deleteShare: f(mysqlDeleteShare),
		mark: f(mysqlMark), freeName: f(mysqlFreeName), clearWaiter: f(mysqlClearWaiter),
		recordWaiter: f(mysqlRecordWaiter), purgeNames: f(mysqlPurgeNames),
	}
}

// TryAcquireShare takes a share of key for token, in mode h, for ttl (see
// core.Sharer), in one transaction: it locks key's row in the lock table,
// reads key's shares, and unless key is held exclusively, a waiting
// exclusive holder is recorded or (permits) h.N shares are live, writes the
// share in the lowest free slot and sets the lock row to the marker,
// expiring with the latest share. A token that holds a live share already
// keeps its slot and gets ttl again. Live shares of another mode are an
// error wrapping core.ErrModeMismatch. With fenced the fence is drawn in
// the same transaction, from the counter of exclusive holds.
//
// A transaction whose commit was sent but not answered may have taken the
// share: it is released again in the background, as TryAcquire does.
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := checkArgs(key, token, ttl); err != nil {
		return false, 0, 0, err
	}
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("sqlstore: acquire share of %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil { // nothing sent: nothing to undo
		return false, 0, 0, fmt.Errorf("sqlstore: acquire share of %q: %w", key, err)
	}
	var (
		ok       bool
		slot     int
		fence    int64
		mismatch *shareRow
	)
	sent := time.Now()
	unknown, err := s.inTx(ctx, func(t *txn) (bool, error) {
		ok, slot, fence, mismatch = false, 0, 0, nil
		st, err := t.lockState(key)
		if err != nil || st.heldExclusively() {
			return false, err
		}
		mine, others := st.split(token)
		for _, r := range append(others, mine...) {
			if r.n != h.N {
				mismatch = &r
				return false, nil
			}
		}
		if len(mine) > 0 { // a re-sent attempt
			slot = mine[0].slot
		} else {
			if st.waiting || (h.N > 0 && len(others) >= h.N) {
				return false, nil
			}
			slot = st.freeSlot()
		}
		if fence, err = t.writeShare(st, key, slot, token, h.N, ttl, latest(others), fenced); err != nil {
			return false, err
		}
		ok = true
		return true, nil
	})
	if err != nil {
		if unknown && !s.noUndo {
			s.UndoShare(ctx, key, token, ttl, sent)
		}
		return false, 0, 0, s.fail(ctx, "acquire share of "+strconv.Quote(key), err)
	}
	if mismatch != nil {
		return false, 0, 0, fmt.Errorf("sqlstore: acquire %v of %q: %w: it is held as %v", h, key, core.ErrModeMismatch, core.Hold{N: mismatch.n})
	}
	if h.Shared() {
		slot = 0
	}
	if !fenced {
		fence = 0
	}
	return ok, slot, fence, nil
}

// ReleaseShare removes token's share of key if it is live, and reports
// whether it was, in one transaction: the share's row expires at once (and
// stays, for the next share of its slot), and the lock row's marker
// expires with the latest remaining share; after the last one, key is
// free.
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	if err := checkArgs(key, token, time.Microsecond); err != nil {
		return false, err
	}
	ok, err := s.releaseShare(ctx, key, token)
	if err != nil {
		return false, s.fail(ctx, "release share of "+strconv.Quote(key), err)
	}
	return ok, nil
}

func (s *Store) releaseShare(ctx context.Context, key, token string) (bool, error) {
	var ok bool
	_, err := s.inTx(ctx, func(t *txn) (bool, error) {
		ok = false
		st, err := t.lockState(key)
		if err != nil || !st.marked() {
			return false, err
		}
		mine, others := st.split(token)
		if len(mine) == 0 {
			return false, nil
		}
		if err := t.endShare(key, mine[0].slot, others); err != nil {
			return false, err
		}
		ok = true
		return true, nil
	})
	return ok, err
}

// ExtendShare resets the TTL of token's share of key to ttl, from now by
// the database's clock, if it is live, and reports whether it was, in one
// transaction; the marker's expiry follows. With fenced it draws a new
// fence in the same transaction.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := checkArgs(key, token, ttl); err != nil {
		return false, 0, err
	}
	var ok bool
	var fence int64
	_, err := s.inTx(ctx, func(t *txn) (bool, error) {
		ok, fence = false, 0
		st, err := t.lockState(key)
		if err != nil || !st.marked() {
			return false, err
		}
		mine, others := st.split(token)
		if len(mine) == 0 {
			return false, nil
		}
		if fence, err = t.writeShare(st, key, mine[0].slot, token, mine[0].n, ttl, latest(others), fenced); err != nil {
			return false, err
		}
		ok = true
		return true, nil
	})
	if err != nil {
		return false, 0, s.fail(ctx, "extend share of "+strconv.Quote(key), err)
	}
	if !fenced {
		fence = 0
	}
	return ok, fence, nil
}

// TryAcquireWaiting is TryAcquire for an exclusive waiter that failed
// once (see core.Sharer). On PostgreSQL the acquire also ends the waiter
// record of key (it expires now) when it takes key, in the same
// statement; on MySQL a second statement ends it (and if that fails, key
// is given back and the call fails). When the acquire fails, a second
// statement records the waiter, for patience, if shares hold key (its
// lock row holds a live marker): the record is a row of the share table
// in slot -1, which no new share passes while it is live, and which a
// waiter that renews it never shortens.
func (s *Store) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	if err := checkArgs(key, token, ttl); err != nil {
		return false, 0, err
	}
	if patience <= 0 {
		return false, 0, fmt.Errorf("sqlstore: the patience %v is not positive", patience)
	}
	if err := ctx.Err(); err != nil { // nothing sent: nothing to undo
		return false, 0, fmt.Errorf("sqlstore: acquire %q: %w", key, err)
	}
	sent := time.Now()
	var ok bool
	var fence int64
	var err error
	if s.dialect == PostgreSQL {
		err = s.queryOne(ctx, &fence, s.q.shares.acquireWaiting, []byte(key), token, micros(ttl), fenced)
		ok = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
	} else if ok, fence, err = s.tryAcquire(ctx, key, token, ttl, fenced); ok && err == nil {
		if _, err = s.exec(ctx, s.q.shares.clearWaiter, key); err != nil {
			// key is taken but the record stays: give key back.
			if !s.noUndo {
				s.Undo(ctx, key, token, ttl, sent)
			}
			return false, 0, s.fail(ctx, "acquire "+strconv.Quote(key), err)
		}
	}
	if err != nil {
		if mayHaveApplied(err) && !s.noUndo {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, s.fail(ctx, "acquire "+strconv.Quote(key), err)
	}
	if ok {
		if !fenced {
			fence = 0
		}
		return true, fence, nil
	}
	var args []any
	if s.dialect == PostgreSQL {
		args = []any{[]byte(key), token, micros(patience)}
	} else {
		args = []any{token, micros(patience), key}
	}
	if _, err := s.exec(ctx, s.q.shares.recordWaiter, args...); err != nil {
		return false, 0, s.fail(ctx, "record a waiter of "+strconv.Quote(key), err)
	}
	return false, 0, nil
}

// TryAcquireAll takes every key for token for ttl, or none, in one
// transaction: the acquire statement of each key, in the order of their
// bytes (so that two calls with common keys lock their rows in one order
// and never deadlock), and a rollback as soon as one finds its key held.
// With fenced it returns the fence of each key, in the order of keys;
// without, zeros. Keys must be distinct.
//
// A transaction whose commit was sent but not answered may have taken the
// keys: the Locker undoes each key of an attempt that failed with an error
// (Undo, in the background), as the Redis stores leave it to do.
func (s *Store) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if len(keys) == 0 {
		return false, nil, errors.New("sqlstore: acquire all: no key")
	}
	for _, k := range keys {
		if err := checkArgs(k, token, ttl); err != nil {
			return false, nil, err
		}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare([]byte(keys[a]), []byte(keys[b])) })
	for i := 1; i < len(order); i++ {
		if keys[order[i]] == keys[order[i-1]] {
			return false, nil, fmt.Errorf("sqlstore: acquire all: the key %q is listed twice", keys[order[i]])
		}
	}
	if err := ctx.Err(); err != nil {
		return false, nil, fmt.Errorf("sqlstore: acquire all: %w", err)
	}
	fences := make([]int64, len(keys))
	var ok bool
	_, err := s.inTx(ctx, func(t *txn) (bool, error) {
		ok = false
		for _, i := range order {
			taken, fence, err := t.acquire(keys[i], token, ttl, fenced)
			if err != nil || !taken {
				return false, err
			}
			fences[i] = fence
		}
		ok = true
		return true, nil
	})
	if err != nil {
		return false, nil, s.fail(ctx, fmt.Sprintf("acquire all of %d keys", len(keys)), err)
	}
	if !ok {
		return false, nil, nil
	}
	if !fenced {
		clear(fences)
	}
	return true, fences, nil
}

// prune deletes the rows of key's expired shares and waiter record, and
// frees key's lock row if it holds the marker of shares that all expired,
// in one share transaction, if no share or waiter of key is live; it
// returns how many rows it deleted. Purge runs it for each name that has
// old rows. (The rows of a name in use are reused by its next shares.)
func (s *Store) prune(ctx context.Context, key string) (int64, error) {
	var n int64
	_, err := s.inTx(ctx, func(t *txn) (bool, error) {
		n = 0
		st, err := t.lockState(key)
		if err != nil || len(st.shares) > 0 || st.waiting {
			return false, err
		}
		for _, slot := range st.dead {
			if err := t.deleteShare(key, slot); err != nil {
				return false, err
			}
			n++
		}
		if len(st.shares) == 0 && st.token == shareMarker {
			return true, t.freeName(key)
		}
		return n > 0, nil
	})
	return n, err
}

// purgeShares prunes every name that has share rows that expired at least
// olderThan ago, and returns how many rows it deleted.
func (s *Store) purgeShares(ctx context.Context, olderThan time.Duration) (int64, error) {
	var names []string
	for try := 1; ; try++ {
		var err error
		names, err = s.shareNames(ctx, olderThan)
		if err == nil || try == maxTries || !retryable(err) || ctx.Err() != nil {
			if err != nil {
				return 0, err
			}
			break
		}
	}
	var total int64
	for _, name := range names {
		n, err := s.prune(ctx, name)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// shareNames lists the names of share rows that expired at least olderThan
// ago.
func (s *Store) shareNames(ctx context.Context, olderThan time.Duration) ([]string, error) {
	if s.trace != nil {
		s.trace(s.q.shares.purgeNames, []any{olderThan.Microseconds()})
	}
	rows, err := s.db.QueryContext(ctx, s.q.shares.purgeNames, olderThan.Microseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, string(name))
	}
	return names, rows.Err()
}

// UndoShare releases token's share of key in the background
// (core.ShareUndoer), as Undo frees a lock: ReleaseShare's transaction at
// once within ctx if ctx has time left, then again every 250 ms until it
// released the share, or the database has answered for ttl since sent, or
// the store is closed. It never holds the caller past ctx, and never
// removes another token's share. The store runs it for a share attempt
// whose COMMIT may have been applied without an answer; the Locker, for a
// share whose release failed.
func (s *Store) UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.shareUndos.Undo(ctx, key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		return undoOutcome(s.releaseShare(ctx, key, token))
	})
}

// newShareUndos returns the queue of the clean-ups of failed share
// attempts: each releases the attempt's share, a transaction of its own.
func newShareUndos(s *Store) *undo.Queue {
	return undo.NewQueue(func(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
		out := make([]undo.Outcome, len(batch))
		var wg sync.WaitGroup
		sem := make(chan struct{}, undoParallel)
		for i, a := range batch {
			sem <- struct{}{}
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				ctx, cancel := context.WithTimeout(ctx, core.DefaultIOTimeout)
				defer cancel()
				out[i] = undoOutcome(s.releaseShare(ctx, a.Key, a.Token))
			}()
		}
		wg.Wait()
		return out
	}, nil)
}

// shareRow is a live share of a name, as a share transaction read it.
type shareRow struct {
	slot    int
	token   string
	n       int
	expires int64 // µs since 1970, by the database's clock
}

// nameState is what a share transaction reads of a name after locking its
// lock row.
type nameState struct {
	token   string       // the lock row's token: "" when free (or just inserted)
	live    bool         // the lock row has not expired
	shares  []shareRow   // the live shares, slot >= 0
	dead    []int        // the slots of expired rows, the waiter record's included
	waiting bool         // a waiter record is live
	rows    map[int]bool // the slots that have a row, live or not
}

// heldExclusively reports whether an exclusive holder holds the name.
func (st *nameState) heldExclusively() bool { return st.live && st.token != shareMarker }

// marked reports whether the lock row holds a live marker: whether shares
// may be live.
func (st *nameState) marked() bool { return st.live && st.token == shareMarker }

// split returns token's live share (none or one) and the others.
func (st *nameState) split(token string) (mine, others []shareRow) {
	for _, r := range st.shares {
		if r.token == token && len(mine) == 0 {
			mine = append(mine, r)
		} else {
			others = append(others, r)
		}
	}
	return mine, others
}

// freeSlot returns the lowest slot that no live share has.
func (st *nameState) freeSlot() int {
	used := make(map[int]bool, len(st.shares))
	for _, r := range st.shares {
		used[r.slot] = true
	}
	slot := 0
	for used[slot] {
		slot++
	}
	return slot
}

// latest returns the latest expiry of rows, in µs since 1970 (0 for none).
func latest(rows []shareRow) int64 {
	var m int64
	for _, r := range rows {
		m = max(m, r.expires)
	}
	return m
}

// txn is a share transaction (or an AcquireAll's) in progress.
type txn struct {
	s   *Store
	tx  *sql.Tx
	ctx context.Context
}

// inTx runs f in a transaction, and commits it if f reports that it
// changed something, or rolls it back. A transaction that the database
// rolled back for a conflict with another (retryable: a deadlock, a
// serialization failure) is run again, a few times at most. unknown reports
// an error of the commit that may have been applied (no answer came back).
//
// The transaction is READ COMMITTED whatever the database's default: each
// statement sees what the transactions that held the name's lock row
// before have committed, and InnoDB takes no gap locks (see the MySQL
// statements). On PostgreSQL BEGIN carries the level; go-sql-driver/mysql
// sends it in a statement of its own before START TRANSACTION.
func (s *Store) inTx(ctx context.Context, f func(t *txn) (commit bool, err error)) (unknown bool, err error) {
	for try := 1; ; try++ {
		unknown, err = s.inTx1(ctx, f)
		if try == maxTries || !retryable(err) || ctx.Err() != nil {
			return unknown, err
		}
		s.retrying(err)
	}
}

func (s *Store) inTx1(ctx context.Context, f func(t *txn) (bool, error)) (bool, error) {
	if err := s.prepareTx(ctx); err != nil {
		return false, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	commit, err := f(&txn{s: s, tx: tx, ctx: ctx})
	if err != nil || !commit {
		// A failed rollback changes nothing: the server drops what a
		// transaction that never committed did.
		_ = s.end(ctx, tx.Rollback)
		return false, err
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := s.end(ctx, tx.Commit); err != nil {
		return mayHaveApplied(err), err
	}
	return false, nil
}

// end runs the COMMIT or ROLLBACK of a transaction, and returns within
// ctx. pgx's honour the context of the transaction; go-sql-driver/mysql's
// take none, and would wait for a stalled server as long as its connection
// lasts: so on MySQL end waits for it on a goroutine of its own, and gives
// up when ctx ends (a COMMIT that may have been applied is then undone as
// any lost answer is; database/sql does the same with its ROLLBACK when a
// transaction's context ends).
func (s *Store) end(ctx context.Context, f func() error) error {
	if s.dialect == PostgreSQL {
		return f()
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepareTx prepares the statements of transactions (MySQL), once per
// store, before a transaction holds a connection: preparing one through
// the *sql.DB inside a transaction would wait for a second connection,
// forever with a pool of one. Inside, a statement prepared here is
// prepared again on the transaction's connection if it was not yet
// (sql.Tx.StmtContext), which needs no other.
func (s *Store) prepareTx(ctx context.Context) error {
	if s.stmts == nil {
		return nil
	}
	q := &s.q.shares
	for _, query := range []string{
		q.lockName, q.state, q.insertShare, q.updateShare, q.retireShare, q.deleteShare, q.mark, q.freeName, s.q.acquire,
	} {
		if _, err := s.stmts.get(ctx, query); err != nil {
			return notSent{err}
		}
	}
	return nil
}

// key returns key as the statements take it: bytes for PostgreSQL's bytea.
func (t *txn) key(key string) any {
	if t.s.dialect == PostgreSQL {
		return []byte(key)
	}
	return key
}

// stmt returns query prepared on the transaction's connection (MySQL), or
// nil: then the query runs unprepared.
func (t *txn) stmt(query string) *sql.Stmt {
	if t.s.stmts == nil {
		return nil
	}
	st := t.s.stmts.cached(query) // prepared by prepareTx, or nil after Close
	if st == nil {
		return nil
	}
	return t.tx.StmtContext(t.ctx, st)
}

func (t *txn) exec(query string, args ...any) (sql.Result, error) {
	if t.s.trace != nil {
		t.s.trace(query, args)
	}
	if st := t.stmt(query); st != nil {
		return st.ExecContext(t.ctx, args...)
	}
	return t.tx.ExecContext(t.ctx, query, args...)
}

func (t *txn) query(query string, args ...any) (*sql.Rows, error) {
	if t.s.trace != nil {
		t.s.trace(query, args)
	}
	if st := t.stmt(query); st != nil {
		return st.QueryContext(t.ctx, args...)
	}
	return t.tx.QueryContext(t.ctx, query, args...)
}

// lockState locks key's lock row (inserting it free if it is missing) and
// reads the name's state.
func (t *txn) lockState(key string) (*nameState, error) {
	q := &t.s.q.shares
	if _, err := t.exec(q.lockName, t.key(key)); err != nil {
		return nil, err
	}
	args := []any{t.key(key)}
	if t.s.dialect == MySQL {
		args = append(args, key)
	}
	rows, err := t.query(q.state, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := &nameState{rows: make(map[int]bool)}
	for rows.Next() {
		var kind, token string
		var slot, n int
		var live bool
		var expires int64
		if err := rows.Scan(&kind, &token, &slot, &n, &live, &expires); err != nil {
			return nil, err
		}
		if kind == "s" {
			st.rows[slot] = true
		}
		switch {
		case kind == "l":
			st.token, st.live = token, live
		case !live:
			st.dead = append(st.dead, slot)
		case slot == waiterSlot:
			st.waiting = true
		default:
			st.shares = append(st.shares, shareRow{slot: slot, token: token, n: n, expires: expires})
		}
	}
	return st, rows.Err()
}

// writeShare writes the share of token in slot, in mode n, expiring ttl
// from now, in the slot's row if st has read one, else in a new row; and
// sets key's lock row to the marker, expiring at the later of the share's
// expiry and floor (µs since 1970), the latest of the other live shares'.
// With fenced it draws a fence and returns it.
func (t *txn) writeShare(st *nameState, key string, slot int, token string, n int, ttl time.Duration, floor int64, fenced bool) (int64, error) {
	q := &t.s.q.shares
	exists := st.rows[slot]
	if t.s.dialect == PostgreSQL {
		query := q.insertShare
		if exists {
			query = q.updateShare
		}
		return t.queryFence(query, []byte(key), int64(slot), token, int64(n), micros(ttl), floor, fenced)
	}
	var err error
	if exists {
		_, err = t.exec(q.updateShare, token, int64(n), micros(ttl), key, int64(slot))
	} else {
		_, err = t.exec(q.insertShare, key, int64(slot), token, int64(n), micros(ttl))
	}
	if err != nil {
		return 0, err
	}
	// The marker's now comes after the share's: it expires no earlier.
	res, err := t.exec(q.mark, fenced, micros(ttl), floor, key)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// endShare ends the share in key's slot (its row expires now); with
// others, key's marker then expires with the latest of them, without, key
// is free.
func (t *txn) endShare(key string, slot int, others []shareRow) error {
	q := &t.s.q.shares
	var err error
	switch {
	case t.s.dialect == PostgreSQL && len(others) > 0:
		_, err = t.exec(q.retireMark, []byte(key), int64(slot), latest(others))
	case t.s.dialect == PostgreSQL:
		_, err = t.exec(q.retireFree, []byte(key), int64(slot))
	default:
		if _, err = t.exec(q.retireShare, key, int64(slot)); err != nil {
			return err
		}
		if len(others) > 0 {
			_, err = t.exec(q.mark, false, int64(0), latest(others), key)
		} else {
			err = t.freeName(key)
		}
	}
	return err
}

// deleteShare deletes the row of key's slot.
func (t *txn) deleteShare(key string, slot int) error {
	_, err := t.exec(t.s.q.shares.deleteShare, t.key(key), int64(slot))
	return err
}

// queryFence runs a PostgreSQL statement that returns the fence of the
// lock row it marks.
func (t *txn) queryFence(query string, args ...any) (int64, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, errors.New("the lock row is gone") // locked by the transaction: cannot happen
	}
	var fence int64
	if err := rows.Scan(&fence); err != nil {
		return 0, err
	}
	return fence, rows.Close()
}

// freeName frees key's lock row if it holds the marker.
func (t *txn) freeName(key string) error {
	_, err := t.exec(t.s.q.shares.freeName, t.key(key))
	return err
}

// acquire runs the acquire statement of key in the transaction.
func (t *txn) acquire(key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	us := micros(ttl)
	if t.s.dialect == PostgreSQL {
		rows, err := t.query(t.s.q.acquire, []byte(key), token, us, fenced)
		if err != nil {
			return false, 0, err
		}
		defer rows.Close()
		if !rows.Next() {
			return false, 0, rows.Err()
		}
		var fence int64
		if err := rows.Scan(&fence); err != nil {
			return false, 0, err
		}
		return true, fence, rows.Close()
	}
	res, err := t.exec(t.s.q.acquire, key, token, us, token, token, token, token, us)
	if err != nil {
		return false, 0, err
	}
	fence, err := res.LastInsertId()
	return err == nil && fence > 0, fence, err
}
