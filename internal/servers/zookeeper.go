package servers

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ZooKeeperTick is the tickTime of the ZooKeeper servers that StartZooKeeper
// launches. ZooKeeper bounds a client's session timeout to between 2 and 20
// ticks by default; these servers allow 2 ticks (100 ms) to 60 s, so that a
// test can give a client a short session and see it expire soon after it is
// cut off.
const ZooKeeperTick = 50 * time.Millisecond

// ZooKeeperContainerCheck is how often the ZooKeeper servers that
// StartZooKeeper launches delete empty container nodes (ZooKeeper's default
// is a minute), so that a test sees an unused lock's node go soon.
const ZooKeeperContainerCheck = 100 * time.Millisecond

// zooKeeperJars are where Debian's zookeeper package (libzookeeper-java)
// puts the server's jar; its manifest names the jars it needs. The first
// one found is used.
var zooKeeperJars = []string{
	"/usr/share/java/zookeeper.jar",
	"/usr/share/zookeeper/zookeeper.jar",
	"/usr/share/zookeeper/lib/zookeeper.jar",
}

// zooKeeperLogJar is the SLF4J binding that sends the server's warnings to
// its standard error (kept by Process.Log); without it SLF4J logs nothing.
const zooKeeperLogJar = "/usr/share/java/slf4j-simple.jar"

// ZooKeeperSpec describes a standalone ZooKeeper server (Debian's
// zookeeper package, run with java) on one loopback port. Its configuration
// (zoo.cfg) and data live in the process's private directory; the
// transaction log is not synced to disk (zookeeper.forceSync=no), as
// nothing outlives the test. It is ready once it answers the four-letter
// command "ruok" with "imok".
func ZooKeeperSpec() Spec {
	return Spec{
		Name:       "zookeeper",
		Binary:     "java",
		Candidates: []string{"/usr/bin/java"},
		Package:    "zookeeper",
		Setup:      writeZooCfg,
		Args: func(p *Process) []string {
			cp := zooKeeperJar()
			if _, err := os.Stat(zooKeeperLogJar); err == nil {
				cp += string(os.PathListSeparator) + zooKeeperLogJar
			}
			return []string{
				"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-Dzookeeper.forceSync=no",
				"-Dzookeeper.jmx.log4j.disable=true",
				fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", ZooKeeperContainerCheck.Milliseconds()),
				"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
				"-cp", cp,
				"org.apache.zookeeper.server.ZooKeeperServerMain",
				filepath.Join(p.Dir(), "zoo.cfg"),
			}
		},
		Ready:        zooKeeperOK,
		StartTimeout: 60 * time.Second, // a JVM on a busy machine
	}
}

// StartZooKeeper launches a standalone ZooKeeper server (see ZooKeeperSpec)
// for the test and stops it when the test ends. Clients connect to Addr.
func StartZooKeeper(tb testing.TB) *Process {
	tb.Helper()
	return Start(tb, ZooKeeperSpec())
}

// zooKeeperJar returns the path of the server's jar, or "" when none is
// installed.
func zooKeeperJar() string {
	for _, jar := range zooKeeperJars {
		if _, err := os.Stat(jar); err == nil {
			return jar
		}
	}
	return ""
}

// writeZooCfg writes the server's configuration into its directory.
func writeZooCfg(p *Process) error {
	if zooKeeperJar() == "" {
		return fmt.Errorf("%w: zookeeper's jar (%s) was not found; install it (Debian/Ubuntu: apt-get install zookeeper) or run ./scripts/test.sh, which does",
			ErrNotInstalled, strings.Join(zooKeeperJars, ", "))
	}
	data := filepath.Join(p.Dir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	tick := ZooKeeperTick.Milliseconds()
	cfg := strings.Join([]string{
		fmt.Sprintf("tickTime=%d", tick),
		"dataDir=" + data,
		fmt.Sprintf("clientPort=%d", p.Port(0)),
		"clientPortAddress=127.0.0.1",
		fmt.Sprintf("minSessionTimeout=%d", 2*tick),
		"maxSessionTimeout=60000",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr,wchp",
		"",
	}, "\n")
	return os.WriteFile(filepath.Join(p.Dir(), "zoo.cfg"), []byte(cfg), 0o600)
}

// zooKeeperOK sends ZooKeeper's four-letter command "ruok" and expects
// "imok".
func zooKeeperOK(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return err
	}
	reply, err := io.ReadAll(io.LimitReader(c, 64))
	if err != nil {
		return err
	}
	if string(reply) != "imok" {
		return fmt.Errorf("servers: zookeeper answered %q to ruok", reply)
	}
	return nil
}
