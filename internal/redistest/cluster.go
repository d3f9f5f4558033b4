package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// ClusterNodeTimeout is the cluster-node-timeout of the clusters started here:
// how long a master may be unreachable before its replica takes over. It is
// short so that failover tests end quickly, and long enough that a loaded test
// machine does not fail over by accident.
const ClusterNodeTimeout = time.Second

// Cluster is a Redis Cluster of redis-server processes on loopback: masters
// that split the 16384 slots between them in even ranges, and optionally
// replicas of each master. Set up with CLUSTER MEET, ADDSLOTSRANGE and
// REPLICATE, so it needs no redis-cli.
type Cluster struct {
	// Nodes holds every server: the masters first (Nodes[i] was given the
	// i-th slot range), then the replicas (Nodes[masters+i*replicas+j] is the
	// j-th replica of master i). Roles change on failover; ask MasterOf.
	Nodes   []*Server
	masters int
}

// StartCluster starts a cluster of masters masters with replicas replicas
// each, waits until every node reports cluster_state:ok, and stops it when
// the test ends. It fails the test when the cluster does not form.
func StartCluster(tb testing.TB, masters, replicas int) *Cluster {
	tb.Helper()
	c, err := LaunchCluster(masters, replicas)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// LaunchCluster is StartCluster without a testing.TB; the caller must Close
// the cluster. masters must be at least 1 (3 is the smallest cluster that can
// fail over on its own) and replicas at least 0.
func LaunchCluster(masters, replicas int) (*Cluster, error) {
	if masters < 1 || replicas < 0 {
		return nil, fmt.Errorf("redistest: LaunchCluster(%d, %d): need at least one master and no negative replica count", masters, replicas)
	}
	c := &Cluster{masters: masters}
	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout / time.Millisecond)),
		"--cluster-require-full-coverage", "yes",
		"--repl-diskless-sync-delay", "0", // replicas sync at once
	}
	for i := 0; i < masters*(1+replicas); i++ {
		s, err := Launch(args...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	if err := c.form(replicas); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// form joins the nodes, gives the masters their slots and the replicas their
// masters, and waits for the cluster to be usable.
func (c *Cluster) form(replicas int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		id, err := n.do(ctx, "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		ids[i] = fmt.Sprint(id)
	}
	for i := 0; i < c.masters; i++ {
		lo, hi := i*Slots/c.masters, (i+1)*Slots/c.masters-1
		if _, err := c.Nodes[i].do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes[1:] {
		if _, err := n.do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Nodes[0].port); err != nil {
			return err
		}
	}
	// A replica can only follow a master it knows.
	if err := c.waitFor(ctx, "every node to know every other", func(n *Server) (bool, error) {
		v, err := n.do(ctx, "CLUSTER", "NODES")
		return err == nil && strings.Count(fmt.Sprint(v), "\n") >= len(c.Nodes), err
	}); err != nil {
		return err
	}
	for i := 0; i < c.masters; i++ {
		for j := 0; j < replicas; j++ {
			r := c.Nodes[c.masters+i*replicas+j]
			if _, err := r.do(ctx, "CLUSTER", "REPLICATE", ids[i]); err != nil {
				return err
			}
		}
	}
	if err := c.WaitOK(ctx); err != nil {
		return err
	}
	if replicas == 0 {
		return nil
	}
	return c.waitFor(ctx, "replicas to sync", func(n *Server) (bool, error) {
		v, err := n.do(ctx, "INFO", "replication")
		info := fmt.Sprint(v)
		return err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")), err
	})
}

// WaitOK waits until every running node reports cluster_state:ok and agrees
// on who serves every slot, or ctx ends.
func (c *Cluster) WaitOK(ctx context.Context) error {
	return c.waitFor(ctx, "cluster_state:ok", func(n *Server) (bool, error) {
		v, err := n.do(ctx, "CLUSTER", "INFO")
		return err == nil && strings.Contains(fmt.Sprint(v), "cluster_state:ok"), err
	})
}

// waitFor polls ok on every running node until all say yes.
func (c *Cluster) waitFor(ctx context.Context, what string, ok func(*Server) (bool, error)) error {
	var last error
	for {
		all := true
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			yes, err := ok(n)
			if err != nil {
				last = err
			}
			if !yes {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster: waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addrs returns the addresses of the nodes, for redis.ClusterOptions.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Options returns cluster client options with short timeouts suited to tests
// and ContextTimeoutEnabled, so that context deadlines bound calls.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new cluster client, closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(c.Options())
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Slot returns the hash slot of key, as the cluster computes it.
func (c *Cluster) Slot(ctx context.Context, key string) (int, error) {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.do(ctx, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		return int(v.(int64)), nil
	}
	return 0, errors.New("redistest: cluster: no node is running")
}

// MasterOf returns the node that serves key's slot now, as the first running
// node that answers sees it.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Server, error) {
	slot, err := c.Slot(ctx, key)
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.do(ctx, "CLUSTER", "SHARDS")
		if err != nil {
			continue
		}
		if addr := shardMaster(v, slot); addr != "" {
			for _, m := range c.Nodes {
				if m.Addr() == addr {
					return m, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("redistest: cluster: no master found for slot %d", slot)
}

// shardMaster reads a CLUSTER SHARDS reply: the address of the healthy master
// of the shard whose ranges contain slot, or "".
func shardMaster(reply any, slot int) string {
	shards, _ := reply.([]any)
	for _, sh := range shards {
		fields := pairs(sh)
		ranges, _ := fields["slots"].([]any)
		in := false
		for i := 0; i+1 < len(ranges); i += 2 {
			lo, _ := ranges[i].(int64)
			hi, _ := ranges[i+1].(int64)
			in = in || (int64(slot) >= lo && int64(slot) <= hi)
		}
		if !in {
			continue
		}
		nodes, _ := fields["nodes"].([]any)
		for _, nd := range nodes {
			f := pairs(nd)
			if f["role"] == "master" && f["health"] == "online" {
				return fmt.Sprintf("%v:%v", f["ip"], f["port"])
			}
		}
	}
	return ""
}

// pairs reads a RESP2 flat list or RESP3 map of field names and values.
func pairs(v any) map[string]any {
	out := map[string]any{}
	switch t := v.(type) {
	case []any:
		for i := 0; i+1 < len(t); i += 2 {
			out[fmt.Sprint(t[i])] = t[i+1]
		}
	case map[any]any:
		for k, val := range t {
			out[fmt.Sprint(k)] = val
		}
	}
	return out
}

// ID returns a node's cluster id.
func (c *Cluster) ID(ctx context.Context, n *Server) (string, error) {
	v, err := n.do(ctx, "CLUSTER", "MYID")
	return fmt.Sprint(v), err
}

// KillMaster stops the master that serves key and waits until one of its
// replicas has taken over and the cluster is ok again (cluster-node-timeout
// plus an election, about two seconds). It returns the stopped node, which
// Restart brings back as a replica of the new master.
func (c *Cluster) KillMaster(ctx context.Context, key string) (*Server, error) {
	old, err := c.MasterOf(ctx, key)
	if err != nil {
		return nil, err
	}
	old.Stop()
	if err := c.WaitOK(ctx); err != nil {
		return old, err
	}
	for {
		m, err := c.MasterOf(ctx, key)
		if err == nil && m != old {
			return old, c.WaitOK(ctx)
		}
		select {
		case <-ctx.Done():
			return old, fmt.Errorf("redistest: cluster: no replica took over from %s: %w", old.Addr(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MigrateSlot moves slot, with its keys, from the node that serves it to
// node to, as a resharding does: IMPORTING and MIGRATING states, MIGRATE of
// the keys in batches (their TTLs go with them), then SETSLOT NODE on every
// master, target and source first (see setSlotOrder). Clients follow the ASK
// and MOVED redirections meanwhile.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server) error {
	var from *Server
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.do(ctx, "CLUSTER", "SHARDS")
		if err != nil {
			return err
		}
		addr := shardMaster(v, slot)
		for _, m := range c.Nodes {
			if m.Addr() == addr {
				from = m
			}
		}
		break
	}
	if from == nil {
		return fmt.Errorf("redistest: cluster: no master serves slot %d", slot)
	}
	if from == to {
		return nil
	}
	fromID, err := c.ID(ctx, from)
	if err != nil {
		return err
	}
	toID, err := c.ID(ctx, to)
	if err != nil {
		return err
	}
	if _, err := to.do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID); err != nil {
		return err
	}
	if _, err := from.do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID); err != nil {
		return err
	}
	for {
		v, err := from.do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 100)
		if err != nil {
			return err
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS"}
		args = append(args, keys...)
		if _, err := from.do(ctx, args...); err != nil {
			return err
		}
	}
	for _, n := range setSlotOrder(c.Nodes, from, to) {
		if !n.Running() {
			continue
		}
		role, err := n.do(ctx, "ROLE")
		if err != nil {
			return err
		}
		if r, _ := role.([]any); len(r) > 0 && r[0] == "master" {
			if _, err := n.do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID); err != nil {
				return err
			}
		}
	}
	return c.WaitOK(ctx)
}

// setSlotOrder is the order in which the masters learn a migrated slot's new
// owner, as the Redis Cluster specification asks: the target first, so that
// it serves the slot before anyone redirects to it; then the source, which
// then sends MOVED to the target instead of ASK; then the others (the
// cluster bus would propagate it to them anyway). The other way round, a
// client could be redirected from the source to a target that still sends
// it back.
func setSlotOrder(nodes []*Server, from, to *Server) []*Server {
	order := []*Server{to, from}
	for _, n := range nodes {
		if n != from && n != to {
			order = append(order, n)
		}
	}
	return order
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// do runs one command on the server with a client of its own, closed at once.
func (s *Server) do(ctx context.Context, args ...any) (any, error) {
	cl := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second, MaxRetries: -1, Protocol: 2})
	defer cl.Close()
	v, err := cl.Do(ctx, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: %s on %s: %w", strings.Trim(fmt.Sprint(any(args)), "[]"), s.Addr(), err)
	}
	return v, nil
}
