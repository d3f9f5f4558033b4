package servers

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EtcdHeartbeat and EtcdElectionTimeout are the raft timings of the etcd
// servers that StartEtcd launches. etcd raises every lease's TTL to at least
// 1.5 election timeouts, rounded up to whole seconds (2 s with etcd's
// defaults of 100 ms and 1 s); with these timings that minimum is 1 s, so
// that tests can take locks for 1 s. A one-member cluster never holds an
// election after its first, so short timings cost nothing here.
const (
	EtcdHeartbeat       = 10 * time.Millisecond
	EtcdElectionTimeout = 100 * time.Millisecond
)

// EtcdSpec describes a one-member etcd cluster on two loopback ports: the
// client port first (Process.Addr), then the peer port, with the timings
// EtcdHeartbeat and EtcdElectionTimeout. Its data lives in the process's
// private directory. It is ready once GET /health on the client port
// reports health "true" (a raw HTTP request: this module does not depend on
// etcd's client).
func EtcdSpec() Spec { return EtcdSpecTimings(EtcdHeartbeat, EtcdElectionTimeout) }

// EtcdSpecTimings is EtcdSpec with other raft timings: etcd's defaults are a
// heartbeat of 100 ms and an election timeout of 1 s.
func EtcdSpecTimings(heartbeat, electionTimeout time.Duration) Spec {
	return Spec{
		Name:       "etcd",
		Binary:     "etcd",
		Candidates: []string{"/usr/bin/etcd", "/usr/local/bin/etcd"},
		Package:    "etcd-server",
		Ports:      2,
		Args: func(p *Process) []string {
			client := fmt.Sprintf("http://127.0.0.1:%d", p.Port(0))
			peer := fmt.Sprintf("http://127.0.0.1:%d", p.Port(1))
			return []string{
				"--name", "reqlock",
				"--data-dir", filepath.Join(p.Dir(), "data"),
				"--listen-client-urls", client,
				"--advertise-client-urls", client,
				"--listen-peer-urls", peer,
				"--initial-advertise-peer-urls", peer,
				"--initial-cluster", "reqlock=" + peer,
				"--initial-cluster-state", "new",
				"--heartbeat-interval", fmt.Sprint(heartbeat.Milliseconds()),
				"--election-timeout", fmt.Sprint(electionTimeout.Milliseconds()),
				"--logger", "zap",
				"--log-outputs", "stderr",
				"--log-level", "warn",
			}
		},
		Ready: etcdHealthy,
	}
}

// StartEtcd launches a one-member etcd cluster (see EtcdSpec) for the test
// and stops it when the test ends. Clients connect to Addr.
func StartEtcd(tb testing.TB) *Process {
	tb.Helper()
	return Start(tb, EtcdSpec())
}

// etcdHealthy asks etcd's /health endpoint whether the member has a leader
// and serves requests.
func etcdHealthy(addr string) error {
	// No kept-alive connection: it would leave goroutines behind in the
	// tests, which check for leaks.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := http.Client{Timeout: time.Second, Transport: tr}
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("servers: etcd not healthy yet: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
