package sqlstore_test

import (
	"database/sql"
	"testing"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// TestConformance runs core's conformance suite on each database, every
// store on a *sql.DB of its own (as another process would have) through a
// proxy that the suite cuts to take the database down.
func TestConformance(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		conformance(t, b, nil)
	})
}

// TestConformanceFreshConnections runs the suite with a pool that keeps no
// idle connection: every call dials, runs its statement and hangs up, as
// behind a connection pooler that hands each call another server session
// (PgBouncer in transaction mode). The store keeps no state in a session
// between calls, so nothing changes.
func TestConformanceFreshConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	forEach(t, func(t *testing.T, b backend) {
		conformance(t, b, func(db *sql.DB) { db.SetMaxIdleConns(0) })
	})
}

func conformance(t *testing.T, b backend, tune func(*sql.DB)) {
	proxy := redistest.NewProxy(t, b.addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		db := b.open(t, proxy.Addr(), "")
		if tune != nil {
			tune(db)
		}
		s, err := sqlstore.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return s // closed by the suite
	}, storetest.Options{
		Down: func(*testing.T) { proxy.Cut() },
		Up:   func(*testing.T) { proxy.Restore() },
	})
}
