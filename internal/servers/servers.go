// Package servers starts the real store servers that the stores' tests and
// the benchmarks run against (etcd, ZooKeeper, PostgreSQL, MariaDB,
// Memcached): each on loopback, on random free ports, in a private temporary
// directory, without persistence beyond that directory, and stopped and
// removed when the test ends. Redis has its own package, internal/redistest.
//
// Each server has a file of its own here with a Spec and a Start function;
// Launch runs any Spec. A server that is not installed fails the test with a
// message that names its Debian package (the README's test command installs
// them). Tests take a store down with a redistest.Proxy in front of it (Cut,
// Restore) or with Process.Stop and Process.Restart.
package servers

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNotInstalled is wrapped by the error of Launch when a server's binary
// is not installed.
var ErrNotInstalled = errors.New("servers: not installed")

// Spec describes a server process.
type Spec struct {
	// Name names the server in messages ("etcd").
	Name string
	// Binary is the program: a name looked up in PATH, or an absolute path.
	// Candidates lists more paths tried in order when Binary is not found.
	Binary     string
	Candidates []string
	// Package is the Debian package that installs Binary.
	Package string
	// Ports is how many free loopback ports the server needs (default 1).
	// The first is the one Addr returns.
	Ports int
	// FixedPorts, when set, are the server's ports instead of free ones
	// chosen at launch (Ports is then their number): the members of a
	// cluster must know each other's ports before any of them starts (see
	// FreePort).
	FixedPorts []int
	// Setup prepares dir (owned by User, when set) before the first start:
	// initdb, a configuration file. It may be nil.
	Setup func(p *Process) error
	// Args returns the command line of the server.
	Args func(p *Process) []string
	// Env is added to the server's environment.
	Env []string
	// User runs the server as this system user when the tests run as root
	// (PostgreSQL refuses to run as root). Empty: the current user.
	User string
	// Ready reports whether the server answers on addr; Launch waits for it
	// (at most StartTimeout). Default: a TCP connection is accepted.
	Ready func(addr string) error
	// StartTimeout bounds the wait for Ready (default 30 s).
	StartTimeout time.Duration
}

// Process is one running server.
type Process struct {
	spec  Spec
	path  string
	dir   string
	ports []int
	cred  *syscall.Credential

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *logBuffer
}

// Start launches spec's server for the test and stops it when the test ends.
// It fails the test when the server cannot be started.
func Start(tb testing.TB, spec Spec) *Process {
	tb.Helper()
	p, err := Launch(spec)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Launch starts spec's server. The caller must Close it.
func Launch(spec Spec) (*Process, error) {
	path, err := find(spec)
	if err != nil {
		return nil, err
	}
	if len(spec.FixedPorts) > 0 {
		spec.Ports = len(spec.FixedPorts)
	}
	if spec.Ports <= 0 {
		spec.Ports = 1
	}
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = 30 * time.Second
	}
	p := &Process{spec: spec, path: path}
	if err := p.asUser(); err != nil {
		return nil, err
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind: try a few times, each in a fresh directory.
	for try := 0; try < 3; try++ {
		if err = p.prepare(); err != nil {
			break
		}
		if err = p.run(); err == nil {
			return p, nil
		}
		os.RemoveAll(p.dir)
	}
	return nil, err
}

func find(spec Spec) (string, error) {
	for _, c := range append([]string{spec.Binary}, spec.Candidates...) {
		if c == "" {
			continue
		}
		if path, err := exec.LookPath(c); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: %s (%s) was not found; install it (Debian/Ubuntu: apt-get install %s) or run ./scripts/test.sh, which does", ErrNotInstalled, spec.Name, spec.Binary, spec.Package)
}

// asUser looks up spec.User when running as root.
func (p *Process) asUser() error {
	if p.spec.User == "" || os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(p.spec.User)
	if err != nil {
		return fmt.Errorf("servers: %s must run as user %q: %w", p.spec.Name, p.spec.User, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}

// prepare makes the directory and takes the ports, then runs Setup.
func (p *Process) prepare() error {
	dir, err := os.MkdirTemp("", "reqlock-"+p.spec.Name+"-")
	if err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	p.dir = dir
	if p.cred != nil {
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("servers: %w", err)
		}
	}
	p.ports = append(p.ports[:0], p.spec.FixedPorts...)
	for i := len(p.ports); i < p.spec.Ports; i++ {
		port, err := FreePort(p.ports)
		if err != nil {
			return err
		}
		p.ports = append(p.ports, port)
	}
	if p.spec.Setup != nil {
		if err := p.spec.Setup(p); err != nil {
			return fmt.Errorf("servers: set up %s: %w", p.spec.Name, err)
		}
	}
	return nil
}

// Command returns a command that runs as the server's user, with the
// server's environment, for Setup (initdb, mysql_install_db).
func (p *Process) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.SysProcAttr = procAttr(p.cred)
	cmd.Dir = p.dir
	return cmd
}

// run starts the process and waits until it is ready.
func (p *Process) run() error {
	cmd := p.Command(p.path, p.spec.Args(p)...)
	log := new(logBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("servers: start %s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.log = cmd, exited, log
	p.mu.Unlock()

	ready := p.spec.Ready
	if ready == nil {
		ready = dial
	}
	deadline := time.Now().Add(p.spec.StartTimeout)
	for {
		err := ready(p.Addr())
		if err == nil {
			// What answered may be another program that took the port
			// between the probe and the server's bind (the server then
			// fails to bind, and exits, maybe later than this answer).
			if err = ListensOn(cmd.Process.Pid, p.Port(0)); err == nil {
				return nil
			}
			p.kill()
			return fmt.Errorf("servers: %s: %w", p.spec.Name, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("servers: %s exited on port %d: %s", p.spec.Name, p.Port(0), p.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("servers: %s on port %d was not ready within %v: %v\n%s", p.spec.Name, p.Port(0), p.spec.StartTimeout, err, p.Log())
		}
	}
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Addr returns the address of the server's first port: "127.0.0.1:port".
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.ports[0])) }

// Port returns the server's i-th port.
func (p *Process) Port(i int) int { return p.ports[i] }

// Dir returns the server's private directory.
func (p *Process) Dir() string { return p.dir }

// Stop kills the server with the processes it started (PostgreSQL's
// backends), keeping its directory, so that Restart can bring it back on
// the same ports: a backend that outlived its postmaster would keep the
// old server's shared memory in use, which a new postmaster refuses.
func (p *Process) Stop() { p.kill() }

// Restart starts a stopped server again on the same ports and directory and
// waits until it is ready.
func (p *Process) Restart(tb testing.TB) {
	tb.Helper()
	if err := p.run(); err != nil {
		tb.Fatal(err)
	}
}

// Relaunch is Restart without a testing.TB, for a goroutine of the test
// (the members of a cluster restart together: each waits for a quorum).
func (p *Process) Relaunch() error { return p.run() }

// Close stops the server and removes its directory.
func (p *Process) Close() {
	p.kill()
	os.RemoveAll(p.dir)
}

func (p *Process) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	killGroup(cmd.Process)
	<-exited
	waitGroupGone(cmd.Process.Pid)
}

// Log returns the last 4 KiB of what the server has written, for failure
// messages.
func (p *Process) Log() string {
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	if log == nil {
		return ""
	}
	text := log.String()
	if len(text) > 4096 {
		text = text[len(text)-4096:]
	}
	return strings.TrimSpace(text)
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreePort returns a free loopback port, other than those in taken, chosen
// at random below the kernel's range of ephemeral ports: a port in that
// range can be taken between this probe and the server's bind by any
// outgoing connection of the machine, and, while the server is stopped
// (Process.Stop), by a client of the test that dials it and, without a
// listener, connects to itself (TCP's simultaneous open), so that the
// restarted server cannot bind it and the client talks to itself.
func FreePort(taken []int) (int, error) {
	lo := ephemeralLow()
	var err error
	for try := 0; try < 100; try++ {
		port := minPort + rand.IntN(lo-minPort)
		if slices.Contains(taken, port) {
			continue
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("servers: no free port below %d: %w", lo, err)
}

// minPort is the lowest port FreePort takes: above the well-known ports
// and those that system services commonly use.
const minPort = 10000

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux's /proc/sys/net/ipv4/ip_local_port_range; 32768, Linux's default,
// elsewhere or when it cannot be read, or when it leaves too few ports).
func ephemeralLow() int {
	const def = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return def
	}
	fields := strings.Fields(string(data))
	if len(fields) < 1 {
		return def
	}
	lo, err := strconv.Atoi(fields[0])
	if err != nil || lo < minPort+1000 {
		return def
	}
	return lo
}
