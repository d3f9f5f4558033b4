//go:build linux

package zkstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
)

// freezer returns how to stop (SIGSTOP) and resume (SIGCONT) the
// ZooKeeper server srv, as a stalled host would: its connections stay
// open, the kernel keeps what clients send, and the server runs it when it
// resumes. The server's process is the one whose command line names its
// configuration file. It resumes the server when the test ends.
func freezer(t *testing.T, srv *servers.Process) (freeze, thaw func()) {
	t.Helper()
	cfg := filepath.Join(srv.Dir(), "zoo.cfg")
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	pid := 0
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), cfg) {
			pid = n
			break
		}
	}
	if pid == 0 {
		t.Fatalf("no process runs the ZooKeeper server of %s", cfg)
	}
	signal := func(sig syscall.Signal) {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Errorf("signal %v to ZooKeeper (pid %d): %v", sig, pid, err)
		}
	}
	t.Cleanup(func() { signal(syscall.SIGCONT) })
	return func() { signal(syscall.SIGSTOP) }, func() { signal(syscall.SIGCONT) }
}

// TestStalledServerLateExtendIsUndone: the server stalls (SIGSTOP) while a
// lease with a watchdog holds a name. The watchdog's renewal, sent into the
// stall, gets no reply: the lease gives up (Done closes) and its Release
// fails. When the server resumes it runs the renewal, late, which writes
// the node again for a whole TTL; the store (a core.Undoer) must delete it
// then, so that the name is free soon after the resume, not a TTL later.
// The session timeout (20 s) outlasts the stall, so that the session, and
// the node with it, survive it.
func TestStalledServerLateExtendIsUndone(t *testing.T) {
	leakCheck(t)
	srv := servers.StartZooKeeper(t)
	freeze, thaw := freezer(t, srv)
	const ttl = 4 * time.Second
	holder := newStore(t, dial(t, srv.Addr(), 20*time.Second))
	other := newStore(t, dial(t, srv.Addr(), 20*time.Second))
	locker := core.NewWithStore(holder, core.WithTTL(ttl), core.WithWatchdog())
	t.Cleanup(func() { _ = locker.Close() })
	name := uniq(t)
	key, err := locker.Key(name)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locker.Acquire(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	freeze()
	select {
	case <-lease.Done():
	case <-time.After(ttl + 30*time.Second):
		t.Fatal("the lease did not end while the server was stalled")
	}
	if err := lease.Release(context.Background()); !errors.Is(err, core.ErrStorage) {
		t.Fatalf("Release on a stalled server: %v; want ErrStorage", err)
	}
	thaw()
	resumed := time.Now()
	eventually(t, ttl+30*time.Second, "the name was never free again", func() bool {
		ok, _, err := other.TryAcquire(ctx(t), key, "next", time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	took := time.Since(resumed)
	if took > ttl/2 {
		t.Errorf("the name was free only %v after the server resumed (TTL %v): the late renewal's node was left to its TTL", took.Round(time.Millisecond), ttl)
	} else {
		t.Logf("the name was free %v after the server resumed", took.Round(time.Millisecond))
	}
	if ok, err := other.Release(ctx(t), key, "next"); !ok || err != nil {
		t.Errorf("Release: %v, %v", ok, err)
	}
}
