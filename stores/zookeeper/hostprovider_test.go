package zkstore_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/internal/redistest"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestHostProviderReconnects: a connection through a HostProvider whose
// link is cut (new connections refused) finds its session again once the
// link is back.
func TestHostProviderReconnects(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	conn := dial(t, proxy.Addr(), 0)
	session := conn.SessionID()
	proxy.Cut()
	eventually(t, 30*time.Second, "the connection did not see the cut", func() bool { return conn.State() != zk.StateHasSession })
	time.Sleep(time.Second) // a few failed rounds
	proxy.Restore()
	restored := time.Now()
	eventually(t, 30*time.Second, "no session after the link was restored", func() bool { return conn.State() == zk.StateHasSession })
	t.Logf("session again %v after the link was restored", time.Since(restored).Round(time.Millisecond))
	if conn.SessionID() != session {
		t.Errorf("session %#x after the cut, want %#x: the session should have lived on", conn.SessionID(), session)
	}
	if _, _, err := conn.Exists("/"); err != nil {
		t.Errorf("Exists after the reconnection: %v", err)
	}
}

// TestHostProviderNoServer: with no server to reach, a request through a
// HostProvider fails with zk.ErrNoServer rather than waiting for one, and
// a connection closed then stops (leakCheck: within testmain.LeakPatience;
// HostProvider gives go-zookeeper a chance to notice within about 3 s).
func TestHostProviderNoServer(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // dials are refused from now on
	conn, _, err := zk.Connect([]string{addr}, sessionTimeout,
		zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithHostProvider(zkstore.NewHostProvider()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	done := make(chan error, 1)
	go func() {
		_, _, err := conn.Exists("/")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, zk.ErrNoServer) {
			t.Errorf("Exists with no server: %v; want zk.ErrNoServer", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exists with no server did not return within 30 s")
	}
}
