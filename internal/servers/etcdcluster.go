package servers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EtcdCluster is an etcd cluster of several members on loopback, each a
// Process with its client port first (Process.Addr) and its peer port
// second, its data in its private directory.
type EtcdCluster struct {
	Members []*Process
}

// StartEtcdCluster launches an etcd cluster of n members (see
// LaunchEtcdCluster) for the test and stops it when the test ends.
func StartEtcdCluster(tb testing.TB, n int, heartbeat, electionTimeout time.Duration) *EtcdCluster {
	tb.Helper()
	c, err := LaunchEtcdCluster(n, heartbeat, electionTimeout)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// LaunchEtcdCluster launches an etcd cluster of n members with the given
// raft timings (etcd raises every lease to at least 1.5 election timeouts,
// rounded up to whole seconds) and waits until every member reports itself
// healthy (the cluster has a leader). The members start together: none is
// healthy before a majority runs. The caller must Close it.
func LaunchEtcdCluster(n int, heartbeat, electionTimeout time.Duration) (*EtcdCluster, error) {
	var ports []int
	for range 2 * n {
		port, err := FreePort(ports)
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	name := func(i int) string { return fmt.Sprintf("m%d", i) }
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]) }
	var initial []string
	for i := range n {
		initial = append(initial, name(i)+"="+peer(i))
	}
	specs := make([]Spec, n)
	for i := range n {
		spec := EtcdSpecTimings(heartbeat, electionTimeout)
		spec.Name = "etcd-" + name(i)
		spec.FixedPorts = []int{ports[2*i], ports[2*i+1]}
		spec.StartTimeout = 60 * time.Second
		spec.Args = func(p *Process) []string {
			client := fmt.Sprintf("http://127.0.0.1:%d", p.Port(0))
			return []string{
				"--name", name(i),
				"--data-dir", filepath.Join(p.Dir(), "data"),
				"--listen-client-urls", client,
				"--advertise-client-urls", client,
				"--listen-peer-urls", peer(i),
				"--initial-advertise-peer-urls", peer(i),
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new",
				"--initial-cluster-token", "reqlock",
				"--heartbeat-interval", fmt.Sprint(heartbeat.Milliseconds()),
				"--election-timeout", fmt.Sprint(electionTimeout.Milliseconds()),
				"--logger", "zap",
				"--log-outputs", "stderr",
				"--log-level", "warn",
			}
		}
		specs[i] = spec
	}
	c := &EtcdCluster{Members: make([]*Process, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { c.Members[i], errs[i] = Launch(specs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns the client addresses of the members.
func (c *EtcdCluster) Addrs() []string {
	var addrs []string
	for _, m := range c.Members {
		addrs = append(addrs, m.Addr())
	}
	return addrs
}

// Leader returns the member that the members that answer call their
// leader.
func (c *EtcdCluster) Leader() (*Process, error) {
	ids := map[string]*Process{}
	var leader string
	var errs []error
	for _, m := range c.Members {
		s, err := etcdStatus(m.Addr())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids[s.Header.MemberID] = m
		if s.Leader != "" && s.Leader != "0" {
			leader = s.Leader
		}
	}
	if m := ids[leader]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("servers: no etcd leader among the members that answer: %w", errors.Join(errs...))
}

// Close stops every member and removes their directories.
func (c *EtcdCluster) Close() {
	for _, m := range c.Members {
		if m != nil {
			m.Close()
		}
	}
}

// etcdStatusReply is the part of etcd's Maintenance.Status reply (through
// its JSON gateway, where 64-bit numbers are strings) that Leader reads.
type etcdStatusReply struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

// etcdStatus asks the member at addr for its status.
func etcdStatus(addr string) (etcdStatusReply, error) {
	var s etcdStatusReply
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := c.Post("http://"+addr+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("servers: etcd status at %s: %s %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("servers: etcd status at %s: %w", addr, err)
	}
	return s, nil
}
