package core_test

// Tests of a stalled Redis: a server frozen (SIGSTOP) answers nothing, but
// keeps what clients send and executes it, late, when it resumes.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// TestStorageErrorWithinTheIOTimeout: on a frozen server an Acquire fails
// with ErrStorage once its attempt has had the I/O timeout, not later: the
// clean-up of the attempt (which may still be executed when the server
// resumes) must not hold the caller up for a second I/O timeout.
//
// An Acquire that waited for a second I/O timeout would take two of them at
// least (a timer never fires early); one that did not takes one and what a
// loaded machine adds to it. The I/O timeout of a second leaves that 750 ms
// below the bound of 1.75 of it.
func TestStorageErrorWithinTheIOTimeout(t *testing.T) {
	leakCheck(t)
	const ioTimeout = time.Second
	srv := redistest.Start(t)
	for _, mode := range []string{"native", "fenced"} {
		opts := []core.Option{core.WithIOTimeout(ioTimeout), core.WithWait(5 * time.Second)}
		if mode == "fenced" {
			opts = append(opts, core.WithFencing())
		}
		e := newEnv(t, srv, opts...)
		ctx := context.Background()
		warm, err := e.locker.Acquire(ctx, uniq(t)) // scripts loaded, a connection in the pool
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		srv.Freeze(t)
		var slowest time.Duration
		for i := 0; i < 3; i++ {
			start := time.Now()
			_, err := e.locker.Acquire(ctx, uniq(t))
			took := time.Since(start)
			if !errors.Is(err, core.ErrStorage) {
				srv.Thaw(t)
				t.Fatalf("%s: Acquire on a frozen server = %v, want ErrStorage", mode, err)
			}
			slowest = max(slowest, took)
		}
		srv.Thaw(t)
		t.Logf("%s: Acquire on a frozen server: ErrStorage after at most %v (I/O timeout %v)", mode, slowest.Round(time.Millisecond), ioTimeout)
		if slowest >= ioTimeout*7/4 {
			t.Fatalf("%s: ErrStorage took %v with an I/O timeout of %v: the clean-up of the attempt held the caller up", mode, slowest.Round(time.Millisecond), ioTimeout)
		}
	}
}

// stalledAcquires freezes srv, makes n Acquires of names of their own with
// l (each fails with ErrStorage: its SET waits, unanswered, in the frozen
// server, and so may the compare-and-delete that undoes it), keeps srv
// frozen for freeze in all, thaws it and returns the names' keys and the
// time of the thaw.
func stalledAcquires(t *testing.T, srv *redistest.Server, l *core.Locker, n int, freeze time.Duration) ([]string, time.Time) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	srv.Freeze(t)
	keys := make([]string, n)
	for i := range keys {
		name := uniq(t)
		keys[i], _ = l.Key(name)
		if _, err := l.Acquire(ctx, name); !errors.Is(err, core.ErrStorage) {
			srv.Thaw(t)
			t.Fatalf("Acquire on a frozen server = %v, want ErrStorage", err)
		}
	}
	time.Sleep(freeze - time.Since(start))
	srv.Thaw(t)
	return keys, time.Now()
}

// freeAfter waits until none of keys exists, up to limit after thawed, and
// returns how long after thawed that was; limit (or more) if some key is
// still there then.
func freeAfter(t *testing.T, admin *redis.Client, keys []string, thawed time.Time, limit time.Duration) (time.Duration, []string) {
	t.Helper()
	ctx := context.Background()
	for {
		var held []string
		for _, k := range keys {
			if d := admin.PTTL(ctx, k).Val(); d > 0 {
				held = append(held, fmt.Sprintf("%s (PTTL %v)", k, d.Round(time.Millisecond)))
			}
		}
		took := time.Since(thawed)
		if len(held) == 0 || took >= limit {
			return took, held
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStallLeavesNoOrphanLock: attempts sent to a frozen server fail, and so
// do the compare-and-deletes that undo them; when the server resumes it
// executes the late SETs, in an order of its own. The names were held by
// nobody: they must be free again soon after the thaw, before the lock's
// TTL ends (the late SETs set it from the thaw), also when the server stayed
// frozen for longer than the TTL, and whether the attempt was fenced or not.
//
// The clean-ups retry every 250 ms, each round bounded by the I/O timeout
// (500 ms here): "soon" is checked as 5 s, or a second before the TTL ends,
// time for several rounds on a loaded machine. The stall longer than the
// TTL (4 s) lasts 7 s: the last of the three attempts, sent within the first
// 1.5 s (3 I/O timeouts) of it, plus what a loaded machine adds, is more
// than a TTL old at the thaw.
func TestStallLeavesNoOrphanLock(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, tc := range []struct {
		name        string
		ttl, freeze time.Duration
		fenced      bool
	}{
		{"short stall", 10 * time.Second, 1500 * time.Millisecond, false},
		{"short stall, fenced", 10 * time.Second, 1500 * time.Millisecond, true},
		{"stall longer than the TTL", 4 * time.Second, 7 * time.Second, false},
	} {
		opts := []core.Option{core.WithTTL(tc.ttl), core.WithIOTimeout(500 * time.Millisecond)}
		if tc.fenced {
			opts = append(opts, core.WithFencing())
		}
		e := newEnv(t, srv, opts...) // a new client: its pool has one connection, opened before the stall
		keys, thawed := stalledAcquires(t, srv, e.locker, 3, tc.freeze)
		limit := min(5*time.Second, tc.ttl-time.Second)
		took, held := freeAfter(t, admin, keys, thawed, limit)
		t.Logf("%s (TTL %v, frozen %v): the names held by nobody were free %v after the thaw", tc.name, tc.ttl, tc.freeze, took.Round(10*time.Millisecond))
		if len(held) > 0 {
			t.Fatalf("%s: %v after the stall healed, names that nobody holds are still locked: %v", tc.name, took.Round(time.Millisecond), held)
		}
		_ = e.locker.Close()
	}
}

// TestStallCloseEndsTheCleanUps: Close does not wait for the clean-ups of
// failed attempts to succeed (they may retry for as long as the server is
// frozen): it ends them within the I/O timeout, and leaves no goroutine
// behind. A Close that waited for them would wait for as long as the
// server stays frozen, which is until after Close here; the bound of two
// I/O timeouts (2 s) leaves a loaded machine over a second.
func TestStallCloseEndsTheCleanUps(t *testing.T) {
	leakCheck(t)
	const ioTimeout = time.Second
	srv := redistest.Start(t)
	e := newEnv(t, srv, core.WithIOTimeout(ioTimeout))
	srv.Freeze(t)
	t.Cleanup(func() { srv.Thaw(t) })
	for i := 0; i < 3; i++ {
		if _, err := e.locker.Acquire(context.Background(), uniq(t)); !errors.Is(err, core.ErrStorage) {
			t.Fatalf("Acquire on a frozen server = %v, want ErrStorage", err)
		}
	}
	time.Sleep(550 * time.Millisecond) // the clean-ups retry
	start := time.Now()
	_ = e.locker.Close()
	took := time.Since(start)
	t.Logf("Close with clean-ups retrying on a frozen server took %v (I/O timeout %v)", took.Round(time.Millisecond), ioTimeout)
	if took > 2*ioTimeout {
		t.Fatalf("Close took %v on a frozen server: it must end the clean-ups within the I/O timeout", took)
	}
}
