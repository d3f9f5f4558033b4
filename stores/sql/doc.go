// Package sqlstore is a core.Store that keeps reqlock's locks in a table of
// PostgreSQL or MySQL/MariaDB, through database/sql.
package sqlstore
