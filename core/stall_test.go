package core_test

// Tests of a stalled Redis: a server frozen (SIGSTOP) answers nothing, but
// keeps what clients send and executes it, late, when it resumes.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// TestStorageErrorWithinTheIOTimeout: on a frozen server an Acquire fails
// with ErrStorage once its attempt has had the I/O timeout, not later: the
// clean-up of the attempt (which may still be executed when the server
// resumes) must not hold the caller up for a second I/O timeout.
func TestStorageErrorWithinTheIOTimeout(t *testing.T) {
	leakCheck(t)
	const ioTimeout = 200 * time.Millisecond
	srv := redistest.Start(t)
	for _, mode := range []string{"native", "fenced"} {
		opts := []core.Option{core.WithIOTimeout(ioTimeout), core.WithWait(5 * time.Second)}
		if mode == "fenced" {
			opts = append(opts, core.WithFencing())
		}
		e := newEnv(t, srv, opts...)
		t.Cleanup(func() { _ = e.locker.Close() })
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
		for i := 0; i < 5; i++ {
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
		if slowest >= ioTimeout*3/2 {
			t.Fatalf("%s: ErrStorage took %v with an I/O timeout of %v: the clean-up of the attempt held the caller up", mode, slowest.Round(time.Millisecond), ioTimeout)
		}
	}
}
