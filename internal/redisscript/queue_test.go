package redisscript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// grace is the fence counter's grace the tests pass, in ms.
const grace = 60_000

// enqueue runs enqueue.lua for token (TTL and patience in ms, not fenced) and
// returns whether token holds key.
func enqueue(t *testing.T, c *redis.Client, key, token string, ttl, patience int64) bool {
	t.Helper()
	r, err := c.Eval(context.Background(), redisscript.Enqueue, redisscript.Keys(key),
		token, ttl, patience, "0", redisscript.Channel(key), grace).Int64Slice()
	if err != nil {
		t.Fatalf("enqueue %s: %v", token, err)
	}
	return r[0] == 1
}

// TestPollRequeuesAWaiterTheQueueLost: the queue (a sorted set) and the
// waiters' entries (a hash) are two keys, which can part: an eviction takes
// one, or they expire a millisecond apart. A waiter whose entry outlived the
// queue must be put back in line by its next poll, not kept out of the queue
// (never granted) for as long as it polls. The places live a minute: a
// loaded machine's stalls do not end them.
func TestPollRequeuesAWaiterTheQueueLost(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	key := "rs:{lost}"
	if !enqueue(t, c, key, "holder", 10_000, 60_000) {
		t.Fatal("the first enqueue did not take the free lock")
	}
	if enqueue(t, c, key, "w", 10_000, 60_000) {
		t.Fatal("w took a held lock")
	}
	if err := c.Del(ctx, redisscript.QueueKey(key)).Err(); err != nil { // the queue is lost, w's entry stays
		t.Fatal(err)
	}
	if enqueue(t, c, key, "w", 10_000, 60_000) {
		t.Fatal("w took a held lock")
	}
	if err := c.ZScore(ctx, redisscript.QueueKey(key), "w").Err(); err != nil {
		t.Fatalf("w polled, but is not in the queue: %v", err)
	}
	if enqueue(t, c, key, "x", 10_000, 60_000) {
		t.Fatal("x took a held lock")
	}
	n, err := c.Eval(ctx, redisscript.Release, redisscript.Keys(key), "holder", redisscript.Channel(key), "0", grace).Int64()
	if err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	if got := c.Get(ctx, key).Val(); got != "w" {
		t.Fatalf("the release granted the lock to %q, want w, which was in line before x", got)
	}
}
