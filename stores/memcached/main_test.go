package memcachedstore_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
)

// shared is the memcached server most tests use; each test locks keys of
// its own. Tests that restart memcached start a server of their own.
var shared *servers.Process

// memcachedAddr is the address the examples connect to.
var memcachedAddr = "127.0.0.1:11211"

func TestMain(m *testing.M) {
	testmain.Run(m, func() (func(), error) {
		var err error
		if shared, err = servers.Launch(servers.MemcachedSpec("-m", "64")); err != nil {
			return nil, err
		}
		memcachedAddr = shared.Addr()
		return shared.Close, nil
	})
}

// leakCheck fails the test if it leaves goroutines behind. Call it first,
// so that it runs after the test's other clean-ups.
func leakCheck(t *testing.T) {
	testmain.LeakCheck(t)
}

var seq atomic.Int64

// uniq returns a key of the test's own, fresh on every run.
func uniq(t testing.TB) string {
	return fmt.Sprintf("test:{%s#%d:%d}", t.Name(), seq.Add(1), time.Now().UnixNano())
}

// newClient returns a client of the server at addr, closed when the test
// ends. Its I/O timeout is seconds (gomemcache's default is 500 ms): the
// tests expect their calls to succeed, and a loaded machine may answer
// late; the tests that take the server away cut its connections, which
// fails calls at once.
func newClient(t testing.TB, addr string) *memcache.Client {
	c := memcache.New(addr)
	c.Timeout = 5 * time.Second
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a Store on its own client of the server at addr, timed
// by that server's clock and told its address (for List and Inspect),
// closed when the test ends.
func newStore(t testing.TB, addr string, opts ...memcachedstore.Option) *memcachedstore.Store {
	t.Helper()
	return storeOn(t, newClient(t, addr), append([]memcachedstore.Option{memcachedstore.WithServerClock(addr), memcachedstore.WithServers(addr)}, opts...)...)
}

// storeOn returns a Store on client, closed when the test ends.
func storeOn(t testing.TB, client *memcache.Client, opts ...memcachedstore.Option) *memcachedstore.Store {
	t.Helper()
	s, err := memcachedstore.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// counted is a client of addr that counts its round trips: each command
// gomemcache sends is one write (it flushes once per command).
func counted(t testing.TB, addr string) (*memcache.Client, *atomic.Int64) {
	var n atomic.Int64
	c := newClient(t, addr)
	var d net.Dialer
	c.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: &n}, nil
	}
	return c, &n
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// ctx returns a context for one call.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}
