// Package redisscript holds the Lua scripts and key names of the Redis lock,
// shared by every Redis client reqlock supports (go-redis in core, rueidis in
// stores/rueidis), so that both kinds of client can take and release the
// same lock. Each script's file says what it does, its keys and arguments;
// fence.lua and queue.lua are libraries put before the scripts that use
// them. inspect.lua and List (list.go) are the stores' view of their locks
// for operators (lockstore.Inspector), read-only.
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
	//go:embed release_unqueued.lua
	releaseUnqueued string
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

	//go:embed share.lua
	shareLib string
	//go:embed acquire_share.lua
	acquireShare string
	//go:embed release_share.lua
	releaseShare string
	//go:embed extend_share.lua
	extendShare string
	//go:embed acquire_waiting.lua
	acquireWaiting string
	//go:embed acquire_all.lua
	acquireAll string
	//go:embed acquire_held.lua
	acquireHeld string
)

// The scripts, each whole (with the libraries it uses). Acquire is the
// fallback of SET NX PX GET for servers before Redis 7.0.
var (
	Acquire       = acquire
	AcquireFenced = fenceLib + acquireFenced
	Release       = releaseUnqueued + fenceLib + queueLib + release
	Extend        = extend
	ExtendFenced  = fenceLib + extendFenced
	FenceFloor    = fenceFloor
	Enqueue       = fenceLib + queueLib + enqueue
	Dequeue       = fenceLib + queueLib + dequeue
	Poll          = fenceLib + queueLib + poll

	// The scripts of shares (shared holds and permits) and of the
	// exclusive waiter they let in (share.lua), and of several keys at
	// once.
	AcquireShare   = fenceLib + shareLib + acquireShare
	ReleaseShare   = shareLib + releaseShare
	ExtendShare    = fenceLib + shareLib + extendShare
	AcquireWaiting = fenceLib + shareLib + acquireWaiting
	AcquireAll     = fenceLib + acquireAll
	// AcquireHeld is the fallback of SET NX PX GET for a later exclusive
	// attempt (lockstore.HeldAcquirer) that is fenced, or on a server
	// before Redis 7.0: it tells shares apart from an exclusive holder.
	AcquireHeld = fenceLib + acquireHeld
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

// SharesKey returns the shares of a lock key: their tokens scored by their
// expiry (share.lua).
func SharesKey(key string) string { return key + ":shares" }

// SlotsKey returns the slots and fences of a lock key's shares
// (share.lua).
func SlotsKey(key string) string { return key + ":slots" }

// WriterKey returns the record of a lock key's exclusive waiter, which
// keeps new shares out (share.lua, acquire_waiting.lua).
func WriterKey(key string) string { return key + ":writer" }

// ShareKeys returns the keys of the scripts of shares, in their order: the
// lock, its fence counter, its shares, their slots and the exclusive
// waiter's record.
func ShareKeys(key string) []string {
	return []string{key, FenceKey(key), SharesKey(key), SlotsKey(key), WriterKey(key)}
}

// AllKeys returns the keys of AcquireAll for lock keys: each key followed
// by its fence counter.
func AllKeys(keys []string) []string {
	all := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		all = append(all, k, FenceKey(k))
	}
	return all
}

// MarkerPrefix begins the value of a lock key while shares hold it,
// followed by their permits (0 for shared holds): "reqlock:shares:3". It is
// never a token, which is base32 text.
const MarkerPrefix = "reqlock:shares:"

// ParseShare reads the reply of AcquireShare, {status, slot, fence}:
// status 1 when the share is taken, 0 when it is not, -1 when live shares
// are held with another number of permits (mismatch, slot then holds
// theirs). Its error is for the caller to wrap.
func ParseShare(r []int64) (ok bool, slot int, fence int64, mismatch bool, theirs int, err error) {
	if len(r) != 3 || r[0] < -1 || r[0] > 1 || r[1] < 0 {
		return false, 0, 0, false, 0, fmt.Errorf("unexpected reply %v", r)
	}
	switch r[0] {
	case 1:
		return true, int(r[1]), r[2], false, 0, nil
	case -1:
		return false, 0, 0, true, int(r[1]), nil
	}
	return false, 0, 0, false, 0, nil
}

// ParseAll reads the reply of AcquireAll for n keys: {1, fences...} when
// taken, {0} when not. Its error is for the caller to wrap.
func ParseAll(r []int64, n int) (ok bool, fences []int64, err error) {
	switch {
	case len(r) == 1 && r[0] == 0:
		return false, nil, nil
	case len(r) == n+1 && r[0] == 1:
		return true, r[1:], nil
	}
	return false, nil, fmt.Errorf("unexpected reply %v", r)
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the part between the first "{" and the next "}", when not
// empty) or of the whole key, modulo 16384 (the Redis Cluster
// specification).
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}

// OneSlot reports whether keys all hash to one Cluster slot, so that one
// script may take them.
func OneSlot(keys []string) bool {
	for _, k := range keys[min(1, len(keys)):] {
		if Slot(k) != Slot(keys[0]) {
			return false
		}
	}
	return true
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
