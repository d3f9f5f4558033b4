package servers

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ZooKeeperEnsembleTick is the tickTime of the servers of the ensembles
// that LaunchZooKeeperEnsemble starts: longer than a standalone server's
// (ZooKeeperTick), as a follower that does not hear from its leader within
// syncLimit ticks drops out, and a loaded machine stalls JVMs for a while.
const ZooKeeperEnsembleTick = 100 * time.Millisecond

// ZooKeeperEnsemble is a ZooKeeper ensemble of several servers on
// loopback, each a Process with its client port first (Process.Addr), then
// its quorum and election ports.
type ZooKeeperEnsemble struct {
	Servers []*Process
}

// StartZooKeeperEnsemble launches an ensemble of n servers (see
// LaunchZooKeeperEnsemble) for the test and stops it when the test ends.
func StartZooKeeperEnsemble(tb testing.TB, n int) *ZooKeeperEnsemble {
	tb.Helper()
	e, err := LaunchZooKeeperEnsemble(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	return e
}

// LaunchZooKeeperEnsemble launches a ZooKeeper ensemble of n servers, with
// the settings of a standalone server (ZooKeeperSpec: no forced sync,
// sessions of 2 ticks to 60 s) and a tick of ZooKeeperEnsembleTick, and
// waits until each answers "ruok" and one of them leads. The servers start
// together. The caller must Close it.
func LaunchZooKeeperEnsemble(n int) (*ZooKeeperEnsemble, error) {
	var ports []int
	for range 3 * n {
		port, err := FreePort(ports)
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	var members []string
	for i := range n {
		members = append(members, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
	}
	e := &ZooKeeperEnsemble{Servers: make([]*Process, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		spec := ZooKeeperSpec()
		spec.Name = fmt.Sprintf("zookeeper-%d", i+1)
		spec.FixedPorts = ports[3*i : 3*i+3]
		spec.StartTimeout = 90 * time.Second
		spec.Setup = func(p *Process) error {
			if err := writeZooCfg(p); err != nil {
				return err
			}
			data := filepath.Join(p.Dir(), "data")
			if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o600); err != nil {
				return err
			}
			tick := ZooKeeperEnsembleTick.Milliseconds()
			cfg, err := os.ReadFile(filepath.Join(p.Dir(), "zoo.cfg"))
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(string(cfg)), "\n")
			for j, l := range lines {
				if strings.HasPrefix(l, "tickTime=") {
					lines[j] = fmt.Sprintf("tickTime=%d", tick)
				}
				if strings.HasPrefix(l, "minSessionTimeout=") {
					lines[j] = fmt.Sprintf("minSessionTimeout=%d", 2*tick)
				}
			}
			lines = append(lines, "initLimit=300", "syncLimit=30", "electionPortBindRetry=10")
			lines = append(lines, members...)
			return os.WriteFile(filepath.Join(p.Dir(), "zoo.cfg"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		}
		args := spec.Args
		spec.Args = func(p *Process) []string {
			a := args(p)
			// QuorumPeerMain reads the ensemble from the configuration.
			for j, s := range a {
				if s == "org.apache.zookeeper.server.ZooKeeperServerMain" {
					a[j] = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
				}
			}
			return a
		}
		wg.Go(func() { e.Servers[i], errs[i] = Launch(spec) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.WaitLeader(90 * time.Second); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Addrs returns the client addresses of the servers.
func (e *ZooKeeperEnsemble) Addrs() []string {
	var addrs []string
	for _, s := range e.Servers {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// Leader returns the server that says it leads ("Mode: leader" in its
// answer to the four-letter command "srvr").
func (e *ZooKeeperEnsemble) Leader() (*Process, error) {
	var errs []error
	for _, s := range e.Servers {
		mode, err := zooKeeperMode(s.Addr())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mode == "leader" {
			return s, nil
		}
	}
	return nil, fmt.Errorf("servers: no ZooKeeper server leads: %w", errors.Join(errs...))
}

// WaitLeader waits up to d until a server leads and every server serves
// (leads or follows).
func (e *ZooKeeperEnsemble) WaitLeader(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		leaders, serving := 0, 0
		var errs []error
		for _, s := range e.Servers {
			mode, err := zooKeeperMode(s.Addr())
			switch {
			case err != nil:
				errs = append(errs, err)
			case mode == "leader":
				leaders++
				serving++
			case mode == "follower":
				serving++
			}
		}
		if leaders == 1 && serving == len(e.Servers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: the ZooKeeper ensemble has %d leaders and %d of %d servers serving after %v: %w",
				leaders, serving, len(e.Servers), d, errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops every server and removes their directories.
func (e *ZooKeeperEnsemble) Close() {
	for _, s := range e.Servers {
		if s != nil {
			s.Close()
		}
	}
}

// zooKeeperMode returns the "Mode:" of the server at addr ("leader",
// "follower", "standalone"), from its answer to "srvr".
func zooKeeperMode(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	reply, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(reply), "\n") {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("servers: zookeeper at %s: no mode in its answer to srvr: %q", addr, strings.TrimSpace(string(reply)))
}
