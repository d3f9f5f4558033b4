package core

import (
	"context"
	_ "embed"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is the Redis backend on one deployment. Each command is one round
// trip (scripts run by EVAL the first time, by EVALSHA afterwards; see run).

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed acquire_fenced.lua
	acquireFencedLua    string
	acquireFencedScript = redis.NewScript(acquireFencedLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed extend_fenced.lua
	extendFencedLua    string
	extendFencedScript = redis.NewScript(extendFencedLua)

	//go:embed fence_floor.lua
	fenceFloorLua    string
	fenceFloorScript = redis.NewScript(fenceFloorLua)
)

// store is what the lock loop needs from a backend: one deployment
// (redisStore) or several independent ones (redlockStore). The methods report
// whether the key is (still) ours; err is a raw client error, or a
// *quorumError from Redlock. fence is the fencing token where the call draws
// one (0 otherwise).
type store interface {
	tryAcquire(ctx context.Context, key, token string, ttl time.Duration) (ok bool, fence int64, err error)
	release(ctx context.Context, key, token string) (bool, error)
	// extend resets the TTL of a key that still holds token; with newFence
	// (and fencing on) it also draws a new fencing token.
	extend(ctx context.Context, key, token string, ttl time.Duration, newFence bool) (ok bool, fence int64, err error)
}

// redisStore is the backend on one Redis deployment: a standalone server, a
// Sentinel-managed master or a Cluster, all behind redis.UniversalClient.
type redisStore struct {
	client redis.UniversalClient
	// noSetGet is set once the server rejected SET ... NX GET (servers before
	// Redis 7.0); acquires then run acquire.lua instead.
	noSetGet *atomic.Bool
	// cached holds, per script, whether it ran on this deployment already
	// (see run). The map is read-only; its values are shared by copies.
	cached  map[*redis.Script]*atomic.Bool
	fencing bool // WithFencing
	notify  bool // WithNotify
}

func newRedisStore(client redis.UniversalClient, cfg *config) redisStore {
	cached := make(map[*redis.Script]*atomic.Bool)
	for _, sc := range []*redis.Script{acquireScript, acquireFencedScript, releaseScript, extendScript, extendFencedScript, fenceFloorScript} {
		cached[sc] = new(atomic.Bool)
	}
	return redisStore{client: client, noSetGet: new(atomic.Bool), cached: cached, fencing: cfg.fencing, notify: cfg.notify}
}

// run runs a script in one round trip. Its first run on this deployment
// sends the script's text (EVAL, which also caches it in Redis), later ones
// its hash (EVALSHA, falling back to EVAL once when a restarted or
// failed-over server, or another cluster master, has not cached it yet).
// EVALSHA alone would make the first call of each script three round trips
// (EVALSHA, NOSCRIPT, EVAL): the first renewal of a watchdog on a slow link
// could then come too late.
func (s redisStore) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	seen := s.cached[sc]
	if seen.Load() {
		return sc.Run(ctx, s.client, keys, args...)
	}
	cmd := sc.Eval(ctx, s.client, keys, args...)
	if err := cmd.Err(); err == nil || err == redis.Nil {
		seen.Store(true)
	}
	return cmd
}

// Companion keys of a lock key: appended to it, so that they share its hash
// tag and its cluster slot.
func fenceKey(key string) string  { return key + ":fence" }
func channelOf(key string) string { return key + ":released" }

// tryAcquire is the seed's addIfAbsent: SET key token NX PX ttl GET, one
// native command. GET returns the value the key already had: none means the
// key is now ours; our own token means that the client re-sent this attempt
// after losing the reply of a transmission that did set the key, so it is
// ours too, instead of a lock that waits for itself until its TTL ends, once
// a compare-and-extend has given it the TTL of this attempt.
//
// A native command costs Redis, the resource every instance shares, a fifth
// of the CPU of a script doing the same (about 2 µs against 9 µs per call on
// Redis 7). Servers before Redis 7.0 reject NX with GET; for them the same
// logic runs as acquire.lua. With fencing, acquire_fenced.lua does the same
// and increments the fence counter.
func (s redisStore) tryAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, int64, error) {
	if s.fencing {
		fence, err := s.run(ctx, acquireFencedScript, []string{key, fenceKey(key)}, token, ttl.Milliseconds()).Int64()
		return err == nil && fence > 0, fence, err
	}
	if !s.noSetGet.Load() {
		old, err := s.client.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: ttl, Get: true}).Result()
		switch {
		case err == redis.Nil:
			return true, 0, nil
		case err == nil && old == token:
			// Ours, but with the TTL it was set with back then: reset it
			// (one more round trip, on this rare path only), as the
			// scripts do, or the key could expire before the validity
			// the lease is given.
			ok, _, err := s.extend(ctx, key, token, ttl, false)
			return ok, 0, err
		case err == nil:
			return false, 0, nil
		case !isSyntaxError(err):
			return false, 0, err
		}
		s.noSetGet.Store(true)
	}
	n, err := s.run(ctx, acquireScript, []string{key}, token, ttl.Milliseconds()).Int64()
	return n == 1, 0, err
}

// isSyntaxError reports the server's rejection of a command's options.
func isSyntaxError(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.Contains(strings.ToLower(reply.Error()), "syntax error")
}

// release is the seed's compareAndDelete; with notify it also publishes on
// the name's channel, in the same script.
func (s redisStore) release(ctx context.Context, key, token string) (bool, error) {
	args := []any{token}
	if s.notify {
		args = append(args, channelOf(key))
	}
	n, err := s.run(ctx, releaseScript, []string{key}, args...).Int64()
	return n == 1, err
}

// extend resets the TTL of a key that still holds token, and draws a new
// fencing token when asked to and fencing is on.
func (s redisStore) extend(ctx context.Context, key, token string, ttl time.Duration, newFence bool) (bool, int64, error) {
	if newFence && s.fencing {
		fence, err := s.run(ctx, extendFencedScript, []string{key, fenceKey(key)}, token, ttl.Milliseconds()).Int64()
		return err == nil && fence > 0, fence, err
	}
	n, err := s.run(ctx, extendScript, []string{key}, token, ttl.Milliseconds()).Int64()
	return n == 1, 0, err
}

// raiseFence sets the fence counter to at least fence if the key still holds
// token (Redlock's second phase, see fence_floor.lua).
func (s redisStore) raiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	n, err := s.run(ctx, fenceFloorScript, []string{key, fenceKey(key)}, token, fence).Int64()
	return n == 1, err
}

// mayHaveApplied reports whether a command that failed with err may still have
// been executed by the server: everything but a failure to connect. An
// acquire that fails this way is undone with a compare-and-delete, so that a
// SET whose reply was lost does not keep the name locked for a whole TTL.
// An error reply counts too: a script that fails after its SET (Redis does
// not roll scripts back) has left the key set. Undoing is always safe, as the
// compare-and-delete only deletes the attempt's own token; it costs a round
// trip on a failure path only.
func mayHaveApplied(err error) bool {
	var q *quorumError // Redlock cleaned up after itself already
	if errors.As(err, &q) || errors.Is(err, errSlowQuorum) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}
