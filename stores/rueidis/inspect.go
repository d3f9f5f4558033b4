package rueidisstore

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/lockstore"
)

// This file is the Store's view of its locks for operators
// (lockstore.Inspector), as the go-redis store's: List walks the keyspace
// with SCAN, Inspect reads one lock with a read-only script. Neither
// changes anything.

var _ lockstore.Inspector = (*Store)(nil)

// inspectRO runs inspect.lua by EVALSHA_RO, and EVAL_RO after a NOSCRIPT.
var inspectRO = rueidis.NewLuaScriptReadOnly(redisscript.Inspect)

// List returns the lock keys held now that begin with prefix, at most
// limit (1..lockstore.MaxListLimit) of them, and the cursor of the next
// page ("" once done): internal/redisscript.List, by SCAN MATCH COUNT
// (never KEYS) on the standalone server or Sentinel's master, or on every
// master of a Cluster (CLUSTER SLOTS names them) in the order of their
// addresses, then a pipelined TYPE of the keys found (a lock key holds a
// string while held). Companion keys (":fence", ":queue", ":waiters",
// ":shares", ":slots", ":writer" appended to a lock key) are left out by
// their suffix, so that a lock key that ends with one of them is never
// listed either; a core.Locker's keys end with "}". Under the prefix ""
// every string key of the deployment is listed.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	keys, next, err := redisscript.List(ctx, &scanner{s: s}, prefix, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("rueidisstore: list %q: %w", prefix, err)
	}
	return keys, next, nil
}

// scanner is the deployment behind the Store as redisscript.List walks it,
// for one call of List.
type scanner struct {
	s     *Store
	nodes map[string]rueidis.Client // the masters of a Cluster, by address
}

// Nodes returns the addresses of a Cluster's masters (CLUSTER SLOTS),
// sorted; [""] for a standalone server or a Sentinel-managed master.
func (sc *scanner) Nodes(ctx context.Context) ([]string, error) {
	c := sc.s.client
	if c.Mode() != rueidis.ClientModeCluster {
		return []string{""}, nil
	}
	slots, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	known := c.Nodes()
	sc.nodes = make(map[string]rueidis.Client)
	for _, r := range slots {
		v, err := r.ToArray()
		if err != nil || len(v) < 3 {
			return nil, fmt.Errorf("unexpected CLUSTER SLOTS entry %v", r)
		}
		m, err := v[2].ToArray()
		if err != nil || len(m) < 2 {
			return nil, fmt.Errorf("unexpected CLUSTER SLOTS master %v", v[2])
		}
		host, err1 := m[0].ToString()
		port, err2 := m[1].AsInt64()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected CLUSTER SLOTS master %v", v[2])
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		n, ok := known[addr]
		if !ok {
			return nil, fmt.Errorf("master %s of CLUSTER SLOTS is unknown to the client", addr)
		}
		sc.nodes[addr] = n
	}
	addrs := make([]string, 0, len(sc.nodes))
	for a := range sc.nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	return addrs, nil
}

// Scan runs one SCAN on node.
func (sc *scanner) Scan(ctx context.Context, node string, cursor uint64, match string, count int) ([]string, uint64, error) {
	c := sc.s.client
	if node != "" {
		c = sc.nodes[node]
	}
	e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(match).Count(int64(count)).Build()).AsScanEntry()
	return e.Elements, e.Cursor, err
}

// Strings runs TYPE of each key in one pipeline (DoMulti), through the
// Store's client, which sends each to the node of its key.
func (sc *scanner) Strings(ctx context.Context, keys []string) ([]bool, error) {
	c := sc.s.client
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Type().Key(k).Build()
	}
	held := make([]bool, len(keys))
	for i, r := range c.DoMulti(ctx, cmds...) {
		t, err := r.ToString()
		if err != nil {
			return nil, err
		}
		held[i] = t == "string"
	}
	return held, nil
}

// Inspect returns the state of key in one round trip: inspect.lua of
// internal/redisscript, a read-only script (EVAL_RO, EVALSHA_RO; EVAL on
// servers before Redis 7.0) over the lock key and its companion keys,
// which share its hash tag, as the go-redis store's Inspect: the holder's
// token and PTTL, or the live shares with their TTLs, slots and fences;
// the exclusive waiter's record; the live waiters of the fair queue, head
// first; and the fence counter (an exclusive holder's Fence is 0).
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	r, err := s.runRO(ctx, redisscript.InspectKeys(key)).AsStrSlice()
	if err != nil {
		return lockstore.KeyState{}, fmt.Errorf("rueidisstore: inspect %s: %w", key, err)
	}
	st, err := redisscript.ParseInspect(key, r)
	if err != nil {
		return lockstore.KeyState{}, fmt.Errorf("rueidisstore: inspect %s: %w", key, err)
	}
	return st, nil
}

// runRO runs inspect.lua as run runs a script (EVAL the first time on this
// deployment, then EVALSHA), by EVAL_RO and EVALSHA_RO, which a server
// refuses for a script that writes and which may run on a replica. A
// server before Redis 7.0 does not know them: run takes over from then on.
func (s *Store) runRO(ctx context.Context, keys []string) rueidis.RedisResult {
	if err := s.oneSlot(keys); err != nil {
		return rueidis.NewErrorResult(err)
	}
	if s.noEvalRO.Load() {
		return s.run(ctx, inspectScript, keys)
	}
	var r rueidis.RedisResult
	if s.scripts[inspectScript].Load() {
		r = inspectRO.Exec(ctx, s.client, keys, nil)
	} else {
		r = s.client.Do(ctx, s.client.B().EvalRo().Script(redisscript.Inspect).Numkeys(int64(len(keys))).Key(keys...).Build())
	}
	err := r.Error()
	// A server without EVAL_RO (before Redis 7.0), or one that cannot run
	// the script read-only (miniredis counts its TIME as a write): EVAL.
	if reply, ok := rueidis.IsRedisErr(err); ok && (strings.Contains(strings.ToLower(reply.Error()), "unknown command") || strings.Contains(strings.ToLower(reply.Error()), "not allowed in read-only scripts")) {
		s.noEvalRO.Store(true)
		return s.run(ctx, inspectScript, keys)
	}
	if err == nil {
		s.scripts[inspectScript].Store(true)
	}
	return r
}
