package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"reflect"
)

// ErrNoTable is wrapped by the error of a call made while the lock table,
// the share table or on PostgreSQL the fencing sequence does not exist.
// The message names the migrations to run; CreateTable creates them.
var ErrNoTable = errors.New("sqlstore: the lock table does not exist")

// fail wraps err, the error of op, so that its kind is kept: ErrNoTable for
// a missing table, ctx's error when ctx has ended (a driver may report the
// end of ctx as an I/O error of its own), the driver's error otherwise.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if undefinedTable(err) {
		return fmt.Errorf("sqlstore: %s: %w: %s (create the tables with Store.CreateTable, or run the migrations %s of github.com/reqlock/reqlock/stores/sql, Store.Migration): %w",
			op, ErrNoTable, s.table, s.dialect.migrationFile(), err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlstore: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("sqlstore: %s: %w", op, err)
}

// The SQLSTATE codes and MySQL error numbers the store tells apart.
const (
	pgUndefinedTable       = "42P01" // a table or sequence that does not exist
	pgUniqueViolation      = "23505" // concurrent CREATE ... IF NOT EXISTS
	pgDuplicateTable       = "42P07"
	pgDuplicateObject      = "42710"
	pgSerializationFailure = "40001"
	pgDeadlock             = "40P01"
	mysqlDeadlock          = 1213 // ER_LOCK_DEADLOCK
	mysqlCheckRead         = 1020 // ER_CHECKREAD: MariaDB's innodb_snapshot_isolation
	mysqlNoSuchTable       = 1146 // ER_NO_SUCH_TABLE, SQLSTATE 42S02
	mysqlStateNoTable      = "42S02"
	mysqlTableExists       = 1050 // ER_TABLE_EXISTS_ERROR
	mysqlStateConflict     = "42S01"
)

// serverError describes an error reply of the database: its SQLSTATE and,
// for MySQL, its error number. ok is false for any other error (I/O,
// context, the driver's own).
//
// The drivers are not imported: pgx's *pgconn.PgError and lib/pq's
// *pq.Error have a SQLState method; go-sql-driver/mysql's *MySQLError has
// the fields Number and SQLState.
func serverError(err error) (state string, number int, ok bool) {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		return st.SQLState(), 0, true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			continue
		}
		num := v.FieldByName("Number")
		if !num.IsValid() || num.Kind() != reflect.Uint16 {
			continue
		}
		if sqlState := v.FieldByName("SQLState"); sqlState.IsValid() && sqlState.Kind() == reflect.Array && sqlState.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, sqlState.Len())
			for i := range b {
				b[i] = byte(sqlState.Index(i).Uint())
			}
			state = string(b)
		}
		return state, int(num.Uint()), true
	}
	return "", 0, false
}

// retryable reports an error of a statement that the database rolled back
// for a conflict with a concurrent statement, which running it again
// settles: PostgreSQL's serialization failure (an upsert racing another for
// the same row under REPEATABLE READ or SERIALIZABLE, which a database may
// set as the default), deadlocks (InnoDB's, between concurrent upserts of
// a new key, or locks that an isolation level stricter than the store's
// statements assume takes) and MariaDB's "record has changed since last
// read" (innodb_snapshot_isolation).
func retryable(err error) bool {
	if err == nil {
		return false
	}
	state, number, ok := serverError(err)
	return ok && (state == pgSerializationFailure || state == pgDeadlock || number == mysqlDeadlock || number == mysqlCheckRead)
}

// serializationFailure reports PostgreSQL's serialization failure.
func serializationFailure(err error) bool {
	state, _, ok := serverError(err)
	return ok && state == pgSerializationFailure
}

// undefinedTable reports the database's answer that the table (or the
// sequence) does not exist.
func undefinedTable(err error) bool {
	state, number, ok := serverError(err)
	return ok && (state == pgUndefinedTable || number == mysqlNoSuchTable || (number == 0 && state == mysqlStateNoTable))
}

// raceOnCreate reports an error of CREATE ... IF NOT EXISTS that another
// session creating the same object at the same moment can cause.
func raceOnCreate(err error) bool {
	state, number, ok := serverError(err)
	return ok && (state == pgUniqueViolation || state == pgDuplicateTable || state == pgDuplicateObject ||
		number == mysqlTableExists || state == mysqlStateConflict)
}

// mayHaveApplied reports whether a statement that failed with err may have
// been run by the database all the same: when no answer came back (a
// connection lost or cut by the context after the statement was sent). An
// error reply means the statement was rolled back (every statement is
// atomic); a failure to connect, or database/sql's ErrBadConn (which a
// driver returns only when it sent nothing), or a failed preparation,
// means it was never sent.
func mayHaveApplied(err error) bool {
	var ns notSent
	if errors.As(err, &ns) {
		return false
	}
	if _, _, ok := serverError(err); ok {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}
