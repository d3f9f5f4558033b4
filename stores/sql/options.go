package sqlstore

import (
	"database/sql/driver"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Dialect is the SQL dialect of a database: PostgreSQL or MySQL (which
// covers MariaDB).
type Dialect int

const (
	// PostgreSQL is PostgreSQL 9.5 or later (INSERT ... ON CONFLICT; the
	// tests run on PostgreSQL 15).
	PostgreSQL Dialect = iota + 1
	// MySQL is MySQL 8.0 or later and MariaDB 10.3 or later, with InnoDB
	// (the tests run on MariaDB 10.11).
	MySQL
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case PostgreSQL:
		return "PostgreSQL"
	case MySQL:
		return "MySQL"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// valid reports whether d is one of the dialects above.
func (d Dialect) valid() bool { return d == PostgreSQL || d == MySQL }

// DefaultTable is the name of the lock table unless WithTable says
// otherwise.
const DefaultTable = "reqlock_locks"

// maxTableLen leaves room for the suffixes of the PostgreSQL sequence
// ("_fence") and the share table ("_share") within PostgreSQL's 63-byte
// identifiers.
const maxTableLen = 57

// tableName is what WithTable accepts: a lower-case SQL identifier, the same
// unquoted or quoted in both dialects, without a schema (the connection's
// schema or database is used: PostgreSQL's search_path, MySQL's database in
// the DSN).
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Option configures a Store.
type Option func(*config) error

type config struct {
	dialect Dialect
	table   string
}

// WithDialect sets the SQL dialect of the database: PostgreSQL or MySQL
// (MySQL and MariaDB). Without it, New tells the dialect from the driver
// of the *sql.DB: github.com/jackc/pgx (v4 and v5, through its stdlib
// package), github.com/lib/pq and github.com/go-sql-driver/mysql are known;
// with another driver, or one wrapped by a tracing or metrics package, New
// fails and asks for this option.
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		if !d.valid() {
			return fmt.Errorf("sqlstore: WithDialect(%v): unknown dialect; use sqlstore.PostgreSQL or sqlstore.MySQL", d)
		}
		c.dialect = d
		return nil
	}
}

// WithTable sets the name of the lock table (default DefaultTable): a
// lower-case identifier of letters, digits and underscores that does not
// begin with a digit, at most 57 bytes long. On PostgreSQL the fencing
// sequence is named after it, with the suffix "_fence", and so is the share
// table, with the suffix "_share" (both dialects). The tables live in
// the connection's schema (PostgreSQL's search_path) or database (MySQL).
func WithTable(name string) Option {
	return func(c *config) error {
		switch {
		case name == "":
			return fmt.Errorf("sqlstore: WithTable(%q): the name is empty", name)
		case len(name) > maxTableLen:
			return fmt.Errorf("sqlstore: WithTable(%q): the name is longer than %d bytes", name, maxTableLen)
		case !tableName.MatchString(name):
			return fmt.Errorf("sqlstore: WithTable(%q): not a lower-case identifier (letters a-z, digits and '_', not beginning with a digit)", name)
		}
		c.table = name
		return nil
	}
}

// detect tells the dialect from the package of drv: the drivers the package
// doc names.
func detect(drv driver.Driver) (Dialect, error) {
	t := reflect.TypeOf(drv)
	if t == nil {
		return 0, fmt.Errorf("sqlstore: the *sql.DB has no driver; pass WithDialect")
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	switch {
	case strings.HasPrefix(pkg, "github.com/jackc/pgx/"), pkg == "github.com/lib/pq":
		return PostgreSQL, nil
	case pkg == "github.com/go-sql-driver/mysql":
		return MySQL, nil
	}
	return 0, fmt.Errorf("sqlstore: cannot tell the SQL dialect of the driver %T (package %q): pass WithDialect(sqlstore.PostgreSQL) or WithDialect(sqlstore.MySQL)", drv, pkg)
}
