package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelDownAfter is the down-after-milliseconds of the Sentinel started
// here: how long the master may be unreachable before it is failed over.
const SentinelDownAfter = time.Second

// Sentinel is a Sentinel-managed deployment on loopback: a master, one
// replica, and one redis-sentinel process (quorum 1) that fails the master
// over to the replica when it stops answering.
type Sentinel struct {
	// MasterName is the name the sentinel monitors the master under.
	MasterName string
	// Data holds the master and the replica, in their initial roles.
	Data Nodes
	// Sentinel is the sentinel process.
	Sentinel *Server
}

// StartSentinel starts the deployment for the test and stops it when the
// test ends.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	s, err := LaunchSentinel()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// LaunchSentinel is StartSentinel without a testing.TB; the caller must Close
// the deployment.
func LaunchSentinel() (*Sentinel, error) {
	d := &Sentinel{MasterName: "reqlock-master"}
	master, err := Launch("--repl-diskless-sync-delay", "0") // the replica syncs at once
	if err != nil {
		return nil, err
	}
	d.Data = append(d.Data, master)
	replica, err := Launch("--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	if err != nil {
		d.Close()
		return nil, err
	}
	d.Data = append(d.Data, replica)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := poll(ctx, "the replica to sync", func() bool {
		v, err := replica.do(ctx, "INFO", "replication")
		return err == nil && strings.Contains(fmt.Sprint(v), "master_link_status:up")
	}); err != nil {
		d.Close()
		return nil, err
	}
	conf := func(dir string, port int) ([]string, error) {
		path := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %[1]s %[3]d\n"+
			"sentinel failover-timeout %[1]s 4000\n", d.MasterName, master.port, SentinelDownAfter.Milliseconds())
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("redistest: sentinel config: %w", err)
		}
		return []string{path, "--sentinel"}, nil
	}
	if d.Sentinel, err = launch(conf, nil); err != nil {
		d.Close()
		return nil, err
	}
	if err := poll(ctx, "the sentinel to see the replica", func() bool {
		v, err := d.Sentinel.do(ctx, "SENTINEL", "REPLICAS", d.MasterName)
		r, _ := v.([]any)
		return err == nil && len(r) == 1
	}); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// poll calls ok every 50 ms until it says yes or ctx ends.
func poll(ctx context.Context, what string, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// FailoverOptions returns options for redis.NewFailoverClient, with short
// timeouts suited to tests and ContextTimeoutEnabled.
func (d *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            d.MasterName,
		SentinelAddrs:         []string{d.Sentinel.Addr()},
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new Sentinel failover client, closed when the test ends.
func (d *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(d.FailoverOptions())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master returns the data node the sentinel names as master now.
func (d *Sentinel) Master(ctx context.Context) (*Server, error) {
	v, err := d.Sentinel.do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", d.MasterName)
	if err != nil {
		return nil, err
	}
	addr, _ := v.([]any)
	if len(addr) != 2 {
		return nil, fmt.Errorf("redistest: sentinel: no master address in %v", v)
	}
	for _, s := range d.Data {
		if s.Addr() == fmt.Sprintf("%v:%v", addr[0], addr[1]) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: sentinel: unknown master %v", v)
}

// KillMaster stops the current master and waits until the sentinel has
// promoted the replica (down-after plus an election, a few seconds). It
// returns the stopped node.
func (d *Sentinel) KillMaster(ctx context.Context) (*Server, error) {
	old, err := d.Master(ctx)
	if err != nil {
		return nil, err
	}
	old.Stop()
	err = poll(ctx, "the sentinel to promote the replica", func() bool {
		m, err := d.Master(ctx)
		if err != nil || m == old {
			return false
		}
		role, err := m.do(ctx, "ROLE")
		r, _ := role.([]any)
		return err == nil && len(r) > 0 && r[0] == "master"
	})
	if err != nil {
		err = fmt.Errorf("%w; the sentinel's log:\n%s", err, d.Sentinel.Log())
	}
	return old, err
}

// Close stops every process and removes their directories.
func (d *Sentinel) Close() {
	if d.Sentinel != nil {
		d.Sentinel.Close()
	}
	for _, s := range d.Data {
		s.Close()
	}
}
