package redisscript_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// acquire_held.lua, unfenced and fenced: a free key is taken (a fence
// drawn when fenced), a re-sent attempt is ours with its TTL reset and the
// same fence, an exclusive holder's key is 0, and a key holding the shares'
// marker is -1 with nothing written (no waiting writer's record, the
// marker and shares as they were).
func TestAcquireHeld(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	script := redis.NewScript(redisscript.AcquireHeld)
	held := func(key, token string, ttl time.Duration, fenced bool) int64 {
		t.Helper()
		n, err := script.Run(ctx, c, []string{key, redisscript.FenceKey(key)}, token, ttl.Milliseconds(), redisscript.Flag(fenced), (ttl + redisscript.FenceGrace).Milliseconds()).Int64()
		if err != nil {
			t.Fatalf("acquire_held.lua(%s, %s, fenced %v): %v", key, token, fenced, err)
		}
		return n
	}
	for _, fenced := range []bool{false, true} {
		key := "held:" + redisscript.Flag(fenced)
		first := held(key, "t1", 10*time.Second, fenced)
		if (!fenced && first != 1) || (fenced && first <= 1) {
			t.Fatalf("fenced %v: a free key answered %d, want 1 or a fence", fenced, first)
		}
		if n := held(key, "t1", time.Minute, fenced); n != first {
			t.Fatalf("fenced %v: a re-sent attempt answered %d, want %d", fenced, n, first)
		}
		if d := c.PTTL(ctx, key).Val(); d <= 30*time.Second {
			t.Fatalf("fenced %v: PTTL %v after a re-sent attempt with a TTL of 1m: the TTL was not reset", fenced, d)
		}
		if n := held(key, "t2", time.Minute, fenced); n != 0 {
			t.Fatalf("fenced %v: a key held exclusively answered %d, want 0", fenced, n)
		}
		if v := c.Get(ctx, key).Val(); v != "t1" {
			t.Fatalf("fenced %v: the key holds %q, want t1", fenced, v)
		}
		skey := "shared:" + redisscript.Flag(fenced)
		marker := redisscript.MarkerPrefix + "0"
		c.Set(ctx, skey, marker, time.Minute)
		if n := held(skey, "w", time.Minute, fenced); n != -1 {
			t.Fatalf("fenced %v: a key holding the shares' marker answered %d, want -1", fenced, n)
		}
		if v := c.Get(ctx, skey).Val(); v != marker {
			t.Fatalf("fenced %v: the key holds %q after the attempt, want the marker", fenced, v)
		}
		if n := c.Exists(ctx, redisscript.WriterKey(skey), redisscript.FenceKey(skey)).Val(); n != 0 {
			t.Fatalf("fenced %v: the attempt on a shared key wrote a writer's record or drew a fence", fenced)
		}
	}
}
