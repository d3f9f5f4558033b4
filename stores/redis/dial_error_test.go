package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
)

// deadAddr returns a loopback address nothing listens on: a port below the
// kernel's ephemeral range (where a client redialling it cannot connect to
// itself) that was free a moment ago.
func deadAddr(t *testing.T) string {
	t.Helper()
	port, err := servers.FreePort(nil)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// checkRefused fails the test unless err is a storage error that names the
// refused connection: ErrStorage with the dial error in its chain, and
// neither a timeout nor a context error.
func checkRefused(t *testing.T, op string, err error) {
	t.Helper()
	t.Logf("%s: %v", op, err)
	if !errors.Is(err, core.ErrStorage) {
		t.Errorf("%s: errors.Is(err, ErrStorage) = false for %v", op, err)
	}
	if errors.Is(err, core.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("%s: a refused connection is reported as a timeout: %v", op, err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s: errors.Is(err, syscall.ECONNREFUSED) = false: the dial error is not in the chain of %v", op, err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("%s: the error does not say that the connection was refused: %v", op, err)
	}
}

// TestAcquireRefusedNamesTheDialError checks that an Acquire on a Redis that
// refuses connections reports the refusal, not a missing reply. go-redis
// retries a refused dial, with back-off sleeps, until the I/O timeout's
// deadline, and then returns the context's error alone: the Locker used to
// report "no reply within the I/O timeout", with the cause dropped.
func TestAcquireRefusedNamesTheDialError(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name    string
		timeout bool // ContextTimeoutEnabled
	}{
		{"ContextTimeoutEnabled", true},
		{"NoContextTimeout", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: deadAddr(t), ContextTimeoutEnabled: tc.timeout})
			t.Cleanup(func() { _ = c.Close() })
			// The default I/O timeout (1 s) is shorter than go-redis's
			// retries of a refused dial (at least 1.6 s of back-off).
			l := core.New(c, core.WithIOTimeout(time.Second))
			if err := l.Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			lease, err := l.Acquire(context.Background(), uniq(t))
			if err == nil {
				_ = lease.Release(context.Background())
				t.Fatal("Acquire on a refused connection succeeded")
			}
			checkRefused(t, "Acquire", err)
		})
	}
}

// TestReleaseRefusedNamesTheDialError: a Release after the server went away
// (its port now refuses connections) names the refusal too.
func TestReleaseRefusedNamesTheDialError(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	c := srv.Client(t)
	l := core.New(c, core.WithTTL(30*time.Second), core.WithIOTimeout(time.Second))
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // ends the background retries of the release
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	err = lease.Release(context.Background())
	if err == nil {
		t.Fatal("Release with the server stopped succeeded")
	}
	checkRefused(t, "Release", err)
}

// TestRedlockRefusedNamesTheDialError: a Redlock whose majority of nodes
// refuse connections reports each refusal, not "no reply in time".
func TestRedlockRefusedNamesTheDialError(t *testing.T) {
	leakCheck(t)
	live := shared.Client(t)
	var clients []redis.UniversalClient
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: deadAddr(t), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l := core.NewRedlock(append(clients, live), core.WithIOTimeout(time.Second))
	t.Cleanup(func() { _ = l.Close() })
	_, err := l.Acquire(context.Background(), uniq(t))
	checkRefused(t, "Redlock Acquire", err)
}
