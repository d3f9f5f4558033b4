package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"testing"
)

// pgError is shaped like pgx's *pgconn.PgError and lib/pq's *pq.Error.
type pgError struct{ code string }

func (e *pgError) Error() string    { return "ERROR (SQLSTATE " + e.code + ")" }
func (e *pgError) SQLState() string { return e.code }

// myError is shaped like go-sql-driver/mysql's *MySQLError.
type myError struct {
	Number   uint16
	SQLState [5]byte
	Message  string
}

func (e *myError) Error() string { return fmt.Sprintf("Error %d: %s", e.Number, e.Message) }

func TestServerErrors(t *testing.T) {
	noTable := &myError{Number: 1146, SQLState: [5]byte{'4', '2', 'S', '0', '2'}}
	for _, c := range []struct {
		err              error
		noTable, applied bool
	}{
		{&pgError{"42P01"}, true, false},
		{fmt.Errorf("wrapped: %w", &pgError{"42P01"}), true, false},
		{&pgError{"23505"}, false, false},
		{noTable, true, false},
		{fmt.Errorf("wrapped: %w", noTable), true, false},
		{&myError{Number: 1062}, false, false},
		{driver.ErrBadConn, false, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false, false},
		{&net.OpError{Op: "read", Err: errors.New("connection reset")}, false, true},
		{context.DeadlineExceeded, false, true},
		{errors.New("unexpected EOF"), false, true},
		{notSent{errors.New("unexpected EOF")}, false, false},
	} {
		if got := undefinedTable(c.err); got != c.noTable {
			t.Errorf("undefinedTable(%v) = %v; want %v", c.err, got, c.noTable)
		}
		if got := mayHaveApplied(c.err); got != c.applied {
			t.Errorf("mayHaveApplied(%v) = %v; want %v", c.err, got, c.applied)
		}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false}, {&pgError{"40001"}, true}, {&pgError{"40P01"}, true}, {&myError{Number: 1213}, true},
		{&pgError{"42P01"}, false}, {&myError{Number: 1146}, false}, {context.DeadlineExceeded, false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v; want %v", c.err, got, c.want)
		}
	}
	if !raceOnCreate(&pgError{"23505"}) || !raceOnCreate(&myError{Number: 1050}) || raceOnCreate(&pgError{"42P01"}) {
		t.Error("raceOnCreate: wrong answer")
	}
}

// TestFailKeepsContextError: a driver that reports the end of the context
// as an error of its own still gives the caller the context's error.
func TestFailKeepsContextError(t *testing.T) {
	s := &Store{dialect: PostgreSQL, table: DefaultTable}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	driverErr := errors.New("driver: canceling statement due to user request")
	err := s.fail(ctx, "acquire k", driverErr)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, driverErr) {
		t.Fatalf("fail: %v; want context.Canceled and the driver's error", err)
	}
	if err := s.fail(context.Background(), "acquire k", driverErr); errors.Is(err, context.Canceled) {
		t.Fatalf("fail with a live context: %v; want no context error", err)
	}
}
