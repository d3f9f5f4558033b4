package servers

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MemcachedSpec describes a memcached server on one loopback port, TCP only
// (-U 0), with args added to its command line (for example "-m", "64" for
// its memory in MiB, or "-M" to return errors instead of evicting items
// when memory is full). memcached refuses to run as root without a user to
// switch to: when the tests run as root it is given -u root. It is ready
// once it answers the version command (raw protocol bytes: this module does
// not depend on a memcached client). memcached keeps nothing on disk: a
// restart (Process.Stop, Process.Restart) loses every item.
func MemcachedSpec(args ...string) Spec {
	return Spec{
		Name:       "memcached",
		Binary:     "memcached",
		Candidates: []string{"/usr/bin/memcached", "/usr/local/bin/memcached"},
		Package:    "memcached",
		Args: func(p *Process) []string {
			cmd := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(p.Port(0)), "-U", "0"}
			if os.Geteuid() == 0 {
				cmd = append(cmd, "-u", "root")
			}
			return append(cmd, args...)
		},
		Ready: memcachedVersion,
	}
}

// StartMemcached launches a memcached server (see MemcachedSpec) for the
// test and stops it when the test ends. Clients connect to Addr.
func StartMemcached(tb testing.TB, args ...string) *Process {
	tb.Helper()
	return Start(tb, MemcachedSpec(args...))
}

// memcachedVersion sends memcached's version command and expects its
// "VERSION ..." reply.
func memcachedVersion(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return fmt.Errorf("servers: memcached answered %q to version", strings.TrimSpace(line))
	}
	return nil
}
