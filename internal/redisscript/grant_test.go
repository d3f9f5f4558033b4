package redisscript_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// ParseGrant reads "token fence ttl" and nothing else: a release notice
// (empty) or a malformed message is no grant.
func TestParseGrant(t *testing.T) {
	for _, tc := range []struct {
		payload string
		token   string
		fence   int64
		ttl     time.Duration
		ok      bool
	}{
		{"tok 0 1500", "tok", 0, 1500 * time.Millisecond, true},
		{"tok 1723456789000001 30000", "tok", 1723456789000001, 30 * time.Second, true},
		{"", "", 0, 0, false},
		{"tok", "", 0, 0, false},
		{"tok 1", "", 0, 0, false},
		{" 1 2", "", 0, 0, false},
		{"tok x 2", "", 0, 0, false},
		{"tok 1 y", "", 0, 0, false},
		{"tok 1 2 3", "", 0, 0, false},
	} {
		token, fence, ttl, ok := redisscript.ParseGrant(tc.payload)
		if token != tc.token || fence != tc.fence || ttl != tc.ttl || ok != tc.ok {
			t.Errorf("ParseGrant(%q) = %q, %d, %v, %v; want %q, %d, %v, %v",
				tc.payload, token, fence, ttl, ok, tc.token, tc.fence, tc.ttl, tc.ok)
		}
	}
}

// ParseGrant reads the message a release publishes when it grants the lock
// to the head of the queue: the waiter's token, the fence its next poll
// returns, and the TTL the lock was set for (the waiter's patience).
func TestParseGrantOfARelease(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	key := "rs:{grant}"
	ps := c.Subscribe(ctx, redisscript.Channel(key))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	if !enqueue(t, c, key, "holder", 10_000, 1_000) {
		t.Fatal("the first enqueue did not take the free lock")
	}
	// w's place lives 20 s from its enqueue, and the grant as long: a
	// loaded machine's stalls do not end them before the release and the
	// poll below.
	r, err := c.Eval(ctx, redisscript.Enqueue, redisscript.Keys(key),
		"w", 60_000, 20_000, "1", redisscript.Channel(key), grace).Int64Slice()
	if err != nil || r[0] != 0 {
		t.Fatalf("enqueue w = %v, %v; want it in line", r, err)
	}
	if err := c.Eval(ctx, redisscript.Release, redisscript.Keys(key), "holder", redisscript.Channel(key), "0", grace).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	token, fence, ttl, ok := redisscript.ParseGrant(msg.Payload)
	if !ok || token != "w" || fence <= 0 || ttl != 20*time.Second {
		t.Fatalf("ParseGrant(%q) = %q, %d, %v, %v; want w, a fence, 20s (its patience), true", msg.Payload, token, fence, ttl, ok)
	}
	r, err = c.Eval(ctx, redisscript.Enqueue, redisscript.Keys(key),
		"w", 60_000, 20_000, "1", redisscript.Channel(key), grace).Int64Slice()
	if err != nil || r[0] != 1 || r[1] != fence {
		t.Fatalf("w's poll after the grant = %v, %v; want it to hold the lock with fence %d", r, err, fence)
	}
}
