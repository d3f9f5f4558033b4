package zkstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// shared is the ZooKeeper server most tests use; each test locks keys of
// its own. zkAddr is its address, for the examples.
var (
	shared *servers.Process
	zkAddr = "127.0.0.1:2181"
)

func TestMain(m *testing.M) {
	testmain.Run(m, func() (func(), error) {
		var err error
		shared, err = servers.Launch(servers.ZooKeeperSpec())
		if err != nil {
			return nil, err
		}
		zkAddr = shared.Addr()
		return shared.Close, nil
	})
}

// leakCheck fails the test if it leaves goroutines behind. Call it first, so
// that it runs after the test's other clean-ups (stores, connections).
func leakCheck(t *testing.T) {
	testmain.LeakCheck(t)
}

// quiet drops go-zookeeper's log lines (reconnections while a test has cut
// the server off); the tests check the errors that reach the caller.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// sessionTimeout is the session timeout of the tests' connections, unless
// a test asks for another.
const sessionTimeout = 4 * time.Second

// dial returns a connection to addr (the shared server when empty) with
// the given session timeout (sessionTimeout when 0), once it has a
// session; it is closed when the test ends. It reconnects as the package
// documentation recommends, through a zkstore.HostProvider.
func dial(t testing.TB, addr string, timeout time.Duration) *zk.Conn {
	t.Helper()
	return dialVia(t, addr, timeout, nil)
}

// dialVia is dial with dialer making the connection's TCP connections
// (nil: zkstore.Dial).
func dialVia(t testing.TB, addr string, timeout time.Duration, dialer zk.Dialer) *zk.Conn {
	t.Helper()
	if addr == "" {
		addr = shared.Addr()
	}
	if timeout == 0 {
		timeout = sessionTimeout
	}
	var conn *zk.Conn
	var err error
	if dialer == nil {
		dialer = zkstore.Dial
	}
	conn, _, err = zk.Connect([]string{addr}, timeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false),
		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.Now().Add(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no ZooKeeper session with %s within 10s (state %v)", addr, conn.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return conn
}

// newStore returns a Store on conn, closed when the test ends (before
// conn).
func newStore(t testing.TB, conn *zk.Conn, opts ...zkstore.Option) *zkstore.Store {
	t.Helper()
	s, err := zkstore.New(conn, opts...)
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
