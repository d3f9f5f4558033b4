// Package redistest starts real redis-server processes on loopback for tests:
// a random free port, no persistence, a private temporary directory, stopped
// and removed when the test ends.
//
// A single server (Start) can be killed and restarted empty (Stop,
// Restart) or frozen and resumed (Freeze, Thaw). Beyond a single server it
// builds the deployments the lock engine runs on: a Redis Cluster with
// optional replicas (StartCluster), N independent nodes for Redlock
// (StartNodes) and a Sentinel-managed master with a replica
// (StartSentinel), each with the faults a test needs (a master killed and
// failed over, a slot migrated). Proxy is a TCP proxy that
// adds latency, cuts connections or swallows traffic on demand; it works
// outside tests too (benchmarks use it for a simulated round trip). Overlap
// detects broken mutual exclusion.
//
// Tests never use an in-process fake of Redis for the lock engine: the
// commands, scripts, expiries and failures they observe are the server's own.
// When redis-server is not installed the test fails with a message that says
// how to install it (the README's test command does so).
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/servers"
)

// ErrNotInstalled is returned by Launch when redis-server is not in PATH.
var ErrNotInstalled = errors.New("redistest: redis-server not found in PATH; install it (Debian/Ubuntu: apt-get install redis-server, macOS: brew install redis) or run ./scripts/test.sh, which does")

// Server is one redis-server process listening on 127.0.0.1.
type Server struct {
	port int
	dir  string
	pre  []string // arguments before the options: a config file, "--sentinel"
	args []string // extra options, kept for Restart

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *logBuffer
}

// Start launches a redis-server for the test and stops it when the test ends.
// It fails the test when the server cannot be started.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := Launch(args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Launch starts a redis-server with extra configuration args (as on its
// command line, e.g. "--maxmemory", "10mb"). The caller must Close it. Use it
// from TestMain, where there is no testing.TB; tests use Start.
func Launch(args ...string) (*Server, error) {
	return launch(nil, args)
}

// launch starts a server whose directory is prepared by setup, if not nil,
// before the first start; setup returns the arguments that go before the
// options (a config file, "--sentinel").
func launch(setup func(dir string, port int) ([]string, error), args []string) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{dir: dir, args: args}
	// A free port can be taken by someone else between our probe and the
	// server's bind: try a few.
	for try := 0; try < 5; try++ {
		if s.port, err = freePort(); err != nil {
			break
		}
		if setup != nil {
			if s.pre, err = setup(dir, s.port); err != nil {
				break
			}
		}
		if err = s.run(path); err == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

// logBuffer collects a process's output; it may be read while the process
// still writes.
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

// Log returns what the server has written to its log so far (at most the
// last 4 KiB), for failure messages.
func (s *Server) Log() string {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if log == nil {
		return ""
	}
	text := log.String()
	if len(text) > 4096 {
		text = text[len(text)-4096:]
	}
	return text
}

// freePort returns a free loopback port below the kernel's ephemeral range
// (servers.FreePort): a port of that range may be taken by any outgoing
// connection before redis-server binds it, and, while a test has the server
// stopped, by a client redialling it that connects to itself.
func freePort() (int, error) {
	port, err := servers.FreePort(nil)
	if err != nil {
		return 0, fmt.Errorf("redistest: %w", err)
	}
	return port, nil
}

// run starts the process on s.port and waits until it answers PING.
func (s *Server) run(path string) error {
	args := append([]string(nil), s.pre...)
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	args = append(args, s.args...)
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = procAttr()
	log := new(logBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr()) == nil {
			// What answered may be another program's server that took the
			// port first (ours then fails to bind and exits, maybe later).
			if err := servers.ListensOn(cmd.Process.Pid, s.port); err != nil {
				s.kill()
				return fmt.Errorf("redistest: %w", err)
			}
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server exited on port %d: %s", s.port, strings.TrimSpace(log.String()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING within 10s", s.port)
		}
	}
}

// ping sends PING over a raw connection, so that readiness checks leave no
// client goroutines behind.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redistest: unexpected reply to PING: %q", line)
	}
	return nil
}

// Addr returns the server's "127.0.0.1:port". It stays the same across Stop
// and Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Options returns client options for the server with short timeouts suited
// to tests and ContextTimeoutEnabled, so that context deadlines bound calls.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr(),
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ProxiedClient returns a new client of the server that reaches it through
// a Proxy of its own, for tests that delay, cut or black-hole the link; both
// are closed when the test ends.
func (s *Server) ProxiedClient(tb testing.TB) (*redis.Client, *Proxy) {
	tb.Helper()
	p := NewProxy(tb, s.Addr())
	opts := s.Options()
	opts.Addr = p.Addr()
	c := redis.NewClient(opts)
	tb.Cleanup(func() { _ = c.Close() })
	return c, p
}

// Stop kills the server, as a crash would, keeping its port and directory for
// Restart. Clients then get connection errors.
func (s *Server) Stop() {
	s.kill()
}

// Restart starts the server again on the same port and with the same
// options (with an empty dataset, as there is no persistence; a cluster node
// keeps its identity, which lives in its directory). It fails the test if the
// server does not come up.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.Relaunch(); err != nil {
		tb.Fatal(err)
	}
}

// Relaunch is Restart without a testing.TB.
func (s *Server) Relaunch() error {
	s.kill()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return ErrNotInstalled
	}
	return s.run(path)
}

// Running reports whether the server's process is up (not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's private directory.
func (s *Server) Dir() string { return s.dir }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.kill()
	os.RemoveAll(s.dir)
}
