package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// TestErrorsKeepTheirKind: a database that does not answer, or is cut off,
// is an error, never a busy lock or a lost one; a context that ends is the
// context's error.
func TestErrorsKeepTheirKind(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		proxy := redistest.NewProxy(t, b.addr())
		s := newStore(t, b.open(t, proxy.Addr(), ""))
		k, tok := key(t), token()
		mustAcquire(t, s, k, tok, time.Minute, true)

		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := s.TryAcquire(cancelled, key(t), token(), time.Minute, false)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("TryAcquire with a cancelled context: %v; want context.Canceled", err)
		}

		proxy.Blackhole() // nothing answers: the calls run into their deadline
		short := func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}
		wantDeadline := func(what string, ok bool, err error) {
			t.Helper()
			if ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s while the database does not answer: %v, %v; want context.DeadlineExceeded", what, ok, err)
			}
		}
		ok, _, err := s.TryAcquire(short(), key(t), token(), time.Minute, false)
		wantDeadline("TryAcquire", ok, err)
		ok, _, err = s.Extend(short(), k, tok, time.Minute, true)
		wantDeadline("Extend", ok, err)
		ok, err = s.Release(short(), k, tok)
		wantDeadline("Release", ok, err)

		proxy.Cut() // connections reset and refused
		wantDown := func(what string, ok bool, err error) {
			t.Helper()
			if ok || err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sqlstore.ErrNoTable) {
				t.Errorf("%s while the database is cut off: %v, %v; want an error of the connection", what, ok, err)
			}
		}
		ok, _, err = s.TryAcquire(call(t), key(t), token(), time.Minute, false)
		wantDown("TryAcquire", ok, err)
		ok, _, err = s.Extend(call(t), k, tok, time.Minute, true)
		wantDown("Extend", ok, err)
		ok, err = s.Release(call(t), k, tok)
		wantDown("Release", ok, err)

		proxy.Restore()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, err := s.Release(call(t), k, tok)
			if err == nil {
				if !ok {
					t.Fatal("Release by the holder after the outage reported false")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Release after the outage: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestLostAnswerIsUndone: an acquire whose statement reached the database
// but whose answer came too late fails, and the store frees the key it may
// have taken (core.Store's contract) instead of leaving it locked for a
// whole TTL with no holder. Without the clean-up, the key stays taken: the
// statement did run.
func TestLostAnswerIsUndone(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		for _, undo := range []bool{true, false} {
			proxy := redistest.NewProxy(t, b.addr())
			s := newStore(t, b.open(t, proxy.Addr(), ""))
			if !undo {
				sqlstore.SetNoUndo(s)
			}
			directDB := b.open(t, b.addr(), "")
			direct := newStore(t, directDB)
			// A warm connection: statements prepared, and pgx's ping of a
			// connection's first reuse done.
			warm, tok := key(t), token()
			mustAcquire(t, s, warm, tok, time.Second, false)
			if ok, err := s.Release(call(t), warm, tok); !ok || err != nil {
				t.Fatal(ok, err)
			}

			// The statement reaches the database after a second; its answer
			// would come back a second later, half a second after the
			// deadline. (The deadline leaves the statement 1.5 s to set
			// out, and its answer cannot come back before it.)
			const delay = time.Second
			proxy.SetDelay(delay)
			ctx, cancel := context.WithTimeout(context.Background(), delay*3/2)
			k, tok := key(t), token()
			ok, _, err := s.TryAcquire(ctx, k, tok, time.Minute, true)
			cancel()
			proxy.SetDelay(0)
			if ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquire whose answer comes after the deadline: %v, %v; want context.DeadlineExceeded", ok, err)
			}
			start := time.Now()
			if !undo {
				// The statement takes the key when it runs, and nothing
				// frees it (its TTL is a minute). Its row is looked for
				// without taking the key, which would make the statement
				// find it busy.
				q := "SELECT count(*) FROM " + sqlstore.DefaultTable + " WHERE name = $1 AND token = $2"
				if b.dialect == sqlstore.MySQL {
					q = "SELECT count(*) FROM " + sqlstore.DefaultTable + " WHERE name = ? AND token = ?"
				}
				taken := func() bool {
					var n int
					if err := directDB.QueryRowContext(call(t), q, []byte(k), tok).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n > 0
				}
				for !taken() {
					if time.Since(start) > 20*time.Second {
						t.Fatalf("without the clean-up the key was free 20s after the deadline: the test did not make the statement run")
					}
					time.Sleep(20 * time.Millisecond)
				}
				continue
			}
			time.Sleep(delay) // the statement has run by now, most likely (if not, the key is free all the same)
			for !free(t, direct, k) {
				if time.Since(start) > 20*time.Second {
					t.Fatalf("the key of an attempt whose answer was lost was still taken %v later (TTL 1m): not cleaned up", time.Since(start).Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: the key was freed %v after the deadline", b.name, time.Since(start).Round(time.Millisecond))
		}
	})
}

// TestLostCommitIsUndone: a share whose transaction's COMMIT reached the
// database but whose answer came too late fails, and the store releases
// the share it may have taken, as it frees the key of a lost acquire;
// without the clean-up the share holds the name for its whole TTL.
func TestLostCommitIsUndone(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		for _, undo := range []bool{true, false} {
			proxy := redistest.NewProxy(t, b.addr())
			s := newStore(t, b.open(t, proxy.Addr(), ""))
			if !undo {
				sqlstore.SetNoUndo(s)
			}
			directDB := b.open(t, b.addr(), "")
			direct := newStore(t, directDB)
			warm, tok := key(t), token()
			mustShare(t, s, warm, tok, shared)
			releaseShare(t, s, warm, tok)

			// The COMMIT reaches the database after a second, its answer
			// a second later: half a second after the deadline.
			const delay = time.Second
			sqlstore.SetBeforeCommit(s, func() { proxy.SetDelay(delay) })
			ctx, cancel := context.WithTimeout(context.Background(), delay*3/2)
			k, tok := key(t), token()
			ok, _, _, err := s.TryAcquireShare(ctx, k, tok, time.Minute, shared, true)
			cancel()
			sqlstore.SetBeforeCommit(s, nil)
			proxy.SetDelay(0)
			if ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquireShare whose COMMIT is answered after the deadline: %v, %v; want context.DeadlineExceeded", ok, err)
			}
			start := time.Now()
			if !undo {
				// The COMMIT takes the share when it runs, and nothing
				// releases it: the name stays held (TTL 1m).
				q := "SELECT count(*) FROM " + sqlstore.DefaultTable + "_share WHERE name = $1 AND token = $2"
				if b.dialect == sqlstore.MySQL {
					q = "SELECT count(*) FROM " + sqlstore.DefaultTable + "_share WHERE name = ? AND token = ?"
				}
				var arg any = []byte(k)
				if b.dialect == sqlstore.MySQL {
					arg = k
				}
				eventually(t, "without the clean-up, the share committed", func() bool {
					var n int
					if err := directDB.QueryRowContext(call(t), q, arg, tok).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n > 0
				})
				if free(t, direct, k) {
					t.Fatal("the name of the committed share is free without the clean-up")
				}
				continue
			}
			time.Sleep(delay) // the COMMIT has run by now, most likely
			eventually(t, "the name of the lost share freed", func() bool { return free(t, direct, k) })
			t.Logf("%s: the share was released %v after the deadline", b.name, time.Since(start).Round(time.Millisecond))
		}
	})
}

// TestPurge: Purge deletes the rows of locks that expired (or, on MySQL,
// were released) long enough ago, and no lock that is held.
func TestPurge(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := freshTable(t, b, "purge")
		db := b.open(t, b.addr(), "")
		s := newStore(t, db, sqlstore.WithTable(name))
		ctx := call(t)
		abandoned, held, released := key(t), key(t), key(t)
		mustAcquire(t, s, abandoned, token(), 10*time.Millisecond, true)
		mustAcquire(t, s, held, token(), time.Minute, true)
		tok := token()
		mustAcquire(t, s, released, tok, time.Minute, true)
		if ok, _ := s.Release(ctx, released, tok); !ok {
			t.Fatal("Release by the holder reported false")
		}
		time.Sleep(50 * time.Millisecond)
		rows := func() int {
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		purge := func(olderThan time.Duration, want int64) {
			t.Helper()
			n, err := s.Purge(ctx, olderThan)
			if err != nil || n != want {
				t.Fatalf("Purge(%v): %d, %v; want %d rows deleted", olderThan, n, err, want)
			}
		}

		switch b.dialect {
		case sqlstore.PostgreSQL: // a release deletes its row
			if n := rows(); n != 2 {
				t.Fatalf("%d rows; want 2 (the held lock and the abandoned one)", n)
			}
			purge(time.Hour, 0)
			purge(0, 1)
		case sqlstore.MySQL: // a release keeps its row; young rows are kept
			if n := rows(); n != 3 {
				t.Fatalf("%d rows; want 3", n)
			}
			purge(0, 0)
			if _, err := db.ExecContext(ctx, "UPDATE "+name+" SET expires_at = expires_at - INTERVAL 2 HOUR WHERE name IN (?, ?)", abandoned, released); err != nil {
				t.Fatal(err)
			}
			purge(3*time.Hour, 0)
			purge(time.Hour, 2)
		}
		if n := rows(); n != 1 {
			t.Fatalf("%d rows after Purge; want 1, the held lock", n)
		}
		if free(t, s, held) {
			t.Fatal("Purge freed a held lock")
		}
		for _, k := range []string{abandoned, released} {
			if !free(t, s, k) {
				t.Fatalf("%s is not free after Purge", k)
			}
		}
	})
}
