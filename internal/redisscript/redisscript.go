// Package redisscript holds the Lua scripts and key names of the Redis lock,
// shared by every Redis client reqlock supports (go-redis in core, rueidis in
// stores/rueidis), so that both kinds of client can take and release the
// same lock. Each script's file says what it does, its keys and arguments;
// fence.lua and queue.lua are libraries put before the scripts that use
// them.
package redisscript

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
)

var (
	//go:embed fence.lua
	fenceLib string
	//go:embed queue.lua
	queueLib string

	//go:embed acquire.lua
	acquire string
	//go:embed acquire_fenced.lua
	acquireFenced string
	//go:embed release.lua
	release string
	//go:embed extend.lua
	extend string
	//go:embed extend_fenced.lua
	extendFenced string
	//go:embed fence_floor.lua
	fenceFloor string
	//go:embed enqueue.lua
	enqueue string
	//go:embed dequeue.lua
	dequeue string
	//go:embed poll.lua
	poll string
)

// The scripts, each whole (with the libraries it uses). Acquire is the
// fallback of SET NX PX GET for servers before Redis 7.0.
var (
	Acquire       = acquire
	AcquireFenced = fenceLib + acquireFenced
	Release       = fenceLib + queueLib + release
	Extend        = extend
	ExtendFenced  = fenceLib + extendFenced
	FenceFloor    = fenceFloor
	Enqueue       = fenceLib + queueLib + enqueue
	Dequeue       = fenceLib + queueLib + dequeue
	Poll          = fenceLib + queueLib + poll
)

// FenceGrace is how long a fence counter outlives the lock it was last drawn
// or raised for (see fence.lua): it expires a few seconds after the name's
// last lock, and the fences drawn after that come from the server's clock.
const FenceGrace = 5 * time.Second

// FenceKey returns the fence counter of a lock key. Companion keys are
// appended to the lock key, so that they share its hash tag and its cluster
// slot.
func FenceKey(key string) string { return key + ":fence" }

// Channel returns the pub/sub channel of a lock key: release notices
// (WithNotify) and the fair queue's grants.
func Channel(key string) string { return key + ":released" }

// QueueKey returns the fair queue of a lock key: its waiters' tokens in
// arrival order (queue.lua).
func QueueKey(key string) string { return key + ":queue" }

// WaitersKey returns the entries of the fair queue's waiters (queue.lua).
func WaitersKey(key string) string { return key + ":waiters" }

// Keys returns the keys of the release, enqueue, poll and dequeue scripts, in
// their order: the lock, its fence counter, queue and entries.
func Keys(key string) []string {
	return []string{key, FenceKey(key), QueueKey(key), WaitersKey(key)}
}

// ParseGrant reads a message of Channel that grants the lock to a waiter of
// the fair queue, "token fence ttl" (queue.lua's grant; fence 0 when the
// waiter asked for none, ttl in ms). ok is false for any other message,
// such as a release notice of WithNotify (empty).
func ParseGrant(payload string) (token string, fence int64, ttl time.Duration, ok bool) {
	token, rest, ok1 := strings.Cut(payload, " ")
	f, t, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || token == "" {
		return "", 0, 0, false
	}
	fence, err1 := strconv.ParseInt(f, 10, 64)
	ms, err2 := strconv.ParseInt(t, 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return token, fence, time.Duration(ms) * time.Millisecond, true
}

// Flag is a script's yes-or-no argument, such as whether to draw fences:
// "1" or "0".
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ParsePoll reads the reply of Poll for n waiters, {i, fence, ttl in ms}:
// the index of the waiter that holds the lock (from 0), or -1 when none of
// them does (i is 0 in the reply). Its error is for the caller to wrap.
func ParsePoll(r []int64, n int) (i int, fence int64, ttl time.Duration, err error) {
	if len(r) != 3 || r[0] < 0 || r[0] > int64(n) {
		return -1, 0, 0, fmt.Errorf("unexpected reply %v", r)
	}
	return int(r[0] - 1), r[1], time.Duration(r[2]) * time.Millisecond, nil
}
