package etcdstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
)

// deadAddr returns a loopback address nothing listens on: a port below the
// kernel's ephemeral range that was free a moment ago.
func deadAddr(t *testing.T) string {
	t.Helper()
	port, err := servers.FreePort(nil)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// TestUnreachableEndpointIsNamed: a Locker on a store whose etcd refuses
// connections fails its first Acquire with ErrStorage when the I/O timeout
// ends, and the error names the endpoint and the cause; etcd's client alone
// says "context deadline exceeded", which the Locker reported as "no reply
// within the I/O timeout". The store's own call says the same.
func TestUnreachableEndpointIsNamed(t *testing.T) {
	leakCheck(t)
	const ioTimeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		cfg  func(addr string) clientv3.Config
	}{
		{"TestConfig", clientConfig},
		{"DocumentedConfig", func(addr string) clientv3.Config { // the package example's, without logging
			return clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadAddr(t)
			c, err := clientv3.New(tc.cfg(addr))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			s := newStore(t, c)
			l := core.NewWithStore(s, core.WithIOTimeout(ioTimeout))
			t.Cleanup(func() { _ = l.Close() })

			start := time.Now()
			lease, err := l.Acquire(context.Background(), uniq(t))
			took := time.Since(start)
			if err == nil {
				_ = lease.Release(context.Background())
				t.Fatal("Acquire on an endpoint that refuses connections succeeded")
			}
			t.Logf("Acquire failed after %v: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, core.ErrStorage) {
				t.Errorf("errors.Is(err, core.ErrStorage) = false for %v", err)
			}
			for _, want := range []string{"etcdstore: ", "no connection to etcd at " + addr, "connection refused"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			// The I/O timeout, and the store's question to its connection
			// (at once while it is in transient failure); the slack is
			// for a loaded machine.
			if took > ioTimeout+10*time.Second {
				t.Errorf("Acquire failed after %v; the I/O timeout is %v", took, ioTimeout)
			}

			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			_, _, err = s.TryAcquire(ctx, uniq(t), token(), 10*time.Second, false)
			cancel()
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "etcdstore: acquire ") ||
				!strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("TryAcquire on an endpoint that refuses connections: %v; want an etcdstore error naming %s and the refusal", err, addr)
			}
		})
	}
}
