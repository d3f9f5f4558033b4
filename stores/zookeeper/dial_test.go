package zkstore_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestDialLeavesASilentServer: a server that takes the connection and
// never answers the connect request (ZooKeeper 3.8.0 does so to a
// connection that arrives while it starts) is given up within
// go-zookeeper's read timeout, and the next dial finds a session. With
// go-zookeeper's own dialer the client waits ten times as long, 13 s here.
func TestDialLeavesASilentServer(t *testing.T) {
	leakCheck(t)
	// A listener that never accepts: the kernel completes the TCP
	// handshake, the connect request is taken, no answer ever comes.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	var dials atomic.Int32
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if dials.Add(1) == 1 {
			addr = silent.Addr().String()
		}
		return zkstore.Dial(network, addr, timeout)
	}
	const session = 2 * time.Second // read timeout 1.33 s, handshake 13.3 s without Dial
	conn, _, err := zk.Connect([]string{shared.Addr()}, session, zk.WithLogger(quiet{}), zk.WithLogInfo(false),
		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	start := time.Now()
	eventually(t, 10*time.Second, "no session: the client still waits for the silent server", func() bool {
		return conn.State() == zk.StateHasSession
	})
	t.Logf("session %v after the first dial, %d dials", time.Since(start).Round(time.Millisecond), dials.Load())
	if dials.Load() < 2 {
		t.Errorf("%d dials, want the silent server's and another", dials.Load())
	}
	if _, _, err := conn.Exists("/"); err != nil {
		t.Errorf("Exists: %v", err)
	}
}
