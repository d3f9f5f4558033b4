package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/servers"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// TestRestart: a lock and the fences of its key outlive a crash of the
// database (its process killed, then started again on the same data): the
// lock is still held by its token, and the next fence is higher.
func TestRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			var srv *servers.Process
			if b.dialect == sqlstore.PostgreSQL {
				srv = servers.StartPostgres(t)
			} else {
				srv = servers.StartMariaDB(t)
				root := openDB(t, "mysql", servers.MariaDBUser+"@tcp("+srv.Addr()+")/")
				if _, err := root.Exec("CREATE DATABASE " + myDatabase); err != nil {
					t.Fatal(err)
				}
			}
			s := newStore(t, b.open(t, srv.Addr(), ""))
			ctx := context.Background()
			if err := s.CreateTable(ctx); err != nil {
				t.Fatal(err)
			}
			k, tok := key(t), token()
			before := mustAcquire(t, s, k, tok, time.Minute, true)

			srv.Stop()
			if _, _, err := s.TryAcquire(call(t), k, token(), time.Minute, true); err == nil {
				t.Fatal("TryAcquire while the database is down: no error")
			}
			srv.Restart(t)

			deadline := time.Now().Add(20 * time.Second)
			for {
				ok, fence, err := s.Extend(call(t), k, tok, time.Minute, true)
				if err == nil {
					if !ok || fence <= before {
						t.Fatalf("fenced Extend by the holder after the restart: %v, fence %d; want true and a fence above %d", ok, fence, before)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Extend after the restart: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if free(t, s, k) {
				t.Fatal("the lock was lost in the restart")
			}
		})
	}
}
