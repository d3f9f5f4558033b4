package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/lockstore"
)

// This file is the store's view of its locks for operators
// (lockstore.Inspector): List walks the keyspace with SCAN, Inspect reads
// one lock with a read-only script. Neither changes anything.

var inspectScript = redis.NewScript(redisscript.Inspect)

var _ lockstore.Inspector = (*Store)(nil)

// List returns the lock keys held now that begin with prefix, at most
// limit (1..lockstore.MaxListLimit) of them, and the cursor of the next
// page ("" once done): internal/redisscript.List, by SCAN MATCH COUNT
// (never KEYS) on the standalone server or Sentinel's master, on every
// master of a Cluster and on every shard of a Ring in the order of their
// addresses, then a pipelined TYPE of the keys found (a lock key holds a
// string while held). Companion keys (":fence", ":queue", ":waiters",
// ":shares", ":slots", ":writer" appended to a lock key) are left out by
// their suffix, so that a lock key that ends with one of them is never
// listed either; a core.Locker's keys end with "}". Under the prefix ""
// every string key of the deployment is listed.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	keys, next, err := redisscript.List(ctx, &scanner{s: s}, prefix, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list %q: %w", prefix, s.failed(err))
	}
	return keys, next, nil
}

// scanner is the deployment behind the store as redisscript.List walks
// it, for one call of List.
type scanner struct {
	s     *Store
	nodes map[string]*redis.Client // the masters of a Cluster or the shards of a Ring, by address
}

// Nodes returns the addresses of the masters of a Cluster (as go-redis
// knows them, reloading its map of the cluster when it is stale) or of the
// shards of a Ring, sorted; [""] for any other client.
func (sc *scanner) Nodes(ctx context.Context) ([]string, error) {
	var each func(context.Context, func(context.Context, *redis.Client) error) error
	switch c := sc.s.client.(type) {
	case *redis.ClusterClient:
		each = c.ForEachMaster
	case *redis.Ring:
		each = c.ForEachShard
	default:
		return []string{""}, nil
	}
	var mu sync.Mutex
	sc.nodes = make(map[string]*redis.Client)
	err := each(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		sc.nodes[c.Options().Addr] = c
		return nil
	})
	if err != nil {
		return nil, err
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
	var c redis.Cmdable = sc.s.client
	if node != "" {
		c = sc.nodes[node]
	}
	return c.Scan(ctx, cursor, match, int64(count)).Result()
}

// Strings runs TYPE of each key in one pipeline, through the store's
// client, which sends each to the node of its key.
func (sc *scanner) Strings(ctx context.Context, keys []string) ([]bool, error) {
	return sc.s.strings(ctx, keys)
}

// strings reports which of keys hold a string value (TYPE, one pipeline).
func (s *Store) strings(ctx context.Context, keys []string) ([]bool, error) {
	cmds := make([]*redis.StatusCmd, len(keys))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Type(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	held := make([]bool, len(keys))
	for i, c := range cmds {
		held[i] = c.Val() == "string"
	}
	return held, nil
}

// Inspect returns the state of key in one round trip: inspect.lua of
// internal/redisscript, a read-only script (EVAL_RO, EVALSHA_RO; EVAL on
// servers before Redis 7.0) over the lock key and its companion keys,
// which share its hash tag: the holder's token and PTTL, or the live
// shares with their TTLs (from the server's clock, TIME), slots and
// fences; the exclusive waiter's record; the live waiters of the fair
// queue, head first, with the TTL they asked for and the patience left;
// and the fence counter. An exclusive holder's Fence is 0 (the counter's
// value is the key's Fence: a holder without fencing did not draw it).
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	r, err := s.runRO(ctx, inspectScript, redisscript.InspectKeys(key)).StringSlice()
	if err != nil {
		return lockstore.KeyState{}, fmt.Errorf("redisstore: inspect %s: %w", key, s.failed(err))
	}
	st, err := redisscript.ParseInspect(key, r)
	if err != nil {
		return lockstore.KeyState{}, fmt.Errorf("redisstore: inspect %s: %w", key, err)
	}
	return st, nil
}

// runRO runs a read-only script as run does (EVAL the first time on this
// deployment, then EVALSHA), by EVAL_RO and EVALSHA_RO, which a server
// refuses for a script that writes and which may run on a replica. A
// server before Redis 7.0 does not know them: run takes over from then on.
func (s *Store) runRO(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.noEvalRO.Load() {
		return s.run(ctx, sc, keys, args...)
	}
	seen := s.cached[sc]
	var cmd *redis.Cmd
	if seen.Load() {
		cmd = sc.RunRO(ctx, s.client, keys, args...)
	} else {
		cmd = sc.EvalRO(ctx, s.client, keys, args...)
	}
	switch err := cmd.Err(); {
	case err == nil || err == redis.Nil:
		seen.Store(true)
	case isUnknownCommand(err):
		s.noEvalRO.Store(true)
		return s.run(ctx, sc, keys, args...)
	}
	return cmd
}

// isUnknownCommand reports the server's answer to a command it does not
// know (or that its configuration renamed away), or to a read-only script
// it cannot run read-only: miniredis (an embedded Redis for tests and the
// orders example) counts the script's TIME as a write.
func isUnknownCommand(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := strings.ToLower(reply.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "not allowed in read-only scripts")
}
