package etcdstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// shared is the etcd server most tests use; each test locks keys of its
// own. etcdAddr is its client address, for the examples.
var (
	shared   *servers.Process
	etcdAddr = "127.0.0.1:2379"
)

func TestMain(m *testing.M) {
	testmain.Run(m, func() (func(), error) {
		var err error
		if shared, err = servers.Launch(servers.EtcdSpec()); err != nil {
			return nil, err
		}
		etcdAddr = shared.Addr()
		return shared.Close, nil
	})
}

// leakCheck fails the test if it leaves goroutines behind. Call it first, so
// that it runs after the test's other clean-ups.
func leakCheck(t *testing.T) {
	testmain.LeakCheck(t)
}

// clientConfig is the configuration of a test client of addr: a short dial
// timeout and a short reconnection backoff, so that a client finds a server
// that came back (a restored proxy) within a second; no logging.
func clientConfig(addr string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	}
}

// newClient returns a client of addr (the shared server when empty), closed
// when the test ends.
func newClient(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	if addr == "" {
		addr = shared.Addr()
	}
	c, err := clientv3.New(clientConfig(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a Store on c, closed when the test ends (before c).
func newStore(t testing.TB, c *clientv3.Client, opts ...etcdstore.Option) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var seq atomic.Int64

// uniq returns a key of the test's own, fresh on every run.
func uniq(t testing.TB) string {
	return fmt.Sprintf("test:{%s#%d-%d}", t.Name(), time.Now().UnixNano(), seq.Add(1))
}
