package redisscript

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reqlock/reqlock/lockstore"
)

//go:embed inspect.lua
var inspect string

// Inspect is the read-only script of lockstore.Inspector.Inspect
// (inspect.lua): run it by EVAL_RO (EVALSHA_RO) where the server has it
// (Redis 7.0 and later), by EVAL on older servers, with InspectKeys, and
// read its reply with ParseInspect.
var Inspect = inspect

// InspectKeys returns the keys of Inspect, in its order: the lock, its fence
// counter, its fair queue and the queue's entries, its shares, their slots
// and the exclusive waiter's record. All share the lock key's hash tag.
func InspectKeys(key string) []string {
	return []string{key, FenceKey(key), QueueKey(key), WaitersKey(key), SharesKey(key), SlotsKey(key), WriterKey(key)}
}

// ParseInspect reads the reply of Inspect for key (see inspect.lua). An
// exclusive holder's Fence is 0: the counter holds the last fence drawn
// for the key, which a holder without fencing did not draw, so that it is
// the key's (KeyState.Fence), not the holder's. Shares come in slot order,
// shared holds in the order of their expiry. Its error is for the caller
// to wrap.
func ParseInspect(key string, r []string) (lockstore.KeyState, error) {
	st := lockstore.KeyState{Key: key}
	bad := func(what string) (lockstore.KeyState, error) {
		return lockstore.KeyState{}, fmt.Errorf("unexpected inspect reply (%s): %q", what, r)
	}
	if len(r) < 7 {
		return bad("too short")
	}
	now, err1 := strconv.ParseInt(r[0], 10, 64)
	pttl, err2 := strconv.ParseInt(r[2], 10, 64)
	if err1 != nil || err2 != nil {
		return bad("clock or PTTL")
	}
	if r[3] != "" {
		f, err := strconv.ParseInt(r[3], 10, 64)
		if err != nil {
			return bad("fence counter")
		}
		st.Fence = f
	}
	st.Writer = r[4]
	value := r[1]
	rest := r[5:]
	n, err := strconv.Atoi(rest[0])
	if err != nil || n < 0 || len(rest) < 1+3*n+1 {
		return bad("shares")
	}
	permits, marker := markerPermits(value)
	for i := range n {
		token, expiry, rec := rest[1+3*i], rest[2+3*i], rest[3+3*i]
		at, err1 := strconv.ParseFloat(expiry, 64)
		slot, fence, ok := strings.Cut(rec, " ")
		s, err2 := strconv.Atoi(slot)
		f, err3 := strconv.ParseInt(fence, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !ok || !marker {
			return bad("share " + token)
		}
		st.Holders = append(st.Holders, lockstore.HolderState{
			Token: token, Hold: lockstore.Hold{N: permits}, Slot: s,
			TTL: time.Duration(int64(at)-now) * time.Millisecond, Fence: f,
		})
	}
	slices.SortStableFunc(st.Holders, func(a, b lockstore.HolderState) int { return a.Slot - b.Slot })
	if value != "" && !marker {
		h := lockstore.HolderState{Token: value, Exclusive: true}
		if pttl > 0 {
			h.TTL = time.Duration(pttl) * time.Millisecond
		}
		st.Holders = []lockstore.HolderState{h}
	}
	rest = rest[1+3*n:]
	w, err := strconv.Atoi(rest[0])
	if err != nil || w < 0 || len(rest) != 1+2*w {
		return bad("waiters")
	}
	for i := range w {
		token, entry := rest[1+2*i], rest[2+2*i]
		var deadline, ttl, patience int64
		var fenced int
		if _, err := fmt.Sscanf(entry, "%d %d %d %d", &deadline, &ttl, &fenced, &patience); err != nil {
			return bad("waiter " + token)
		}
		st.Waiters = append(st.Waiters, lockstore.WaiterState{
			Token: token, TTL: time.Duration(ttl) * time.Millisecond,
			Patience: time.Duration(deadline-now) * time.Millisecond,
		})
	}
	return st, nil
}

// markerPermits returns N of a marker value ("reqlock:shares:N"), and
// whether value is one.
func markerPermits(value string) (int, bool) {
	rest, ok := strings.CutPrefix(value, MarkerPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// CompanionSuffixes are the suffixes that make a lock key's companion keys
// (FenceKey, QueueKey, WaitersKey, SharesKey, SlotsKey, WriterKey). A
// listing of lock keys (List) leaves out every key that ends with one of
// them: the store cannot tell a companion key from a lock key of that
// shape, and a core.Locker's lock keys end with "}" (prefix + "{" + name +
// "}"), never so.
var CompanionSuffixes = []string{FenceKey(""), QueueKey(""), WaitersKey(""), SharesKey(""), SlotsKey(""), WriterKey("")}

// IsCompanion reports whether key ends with one of CompanionSuffixes.
func IsCompanion(key string) bool {
	for _, s := range CompanionSuffixes {
		if strings.HasSuffix(key, s) {
			return true
		}
	}
	return false
}

// MatchPattern returns the SCAN MATCH pattern of the keys that begin with
// prefix: prefix with the glob's special characters (* ? [ ] \) escaped by
// a backslash, then "*".
func MatchPattern(prefix string) string {
	var b strings.Builder
	b.Grow(len(prefix) + 8)
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('*')
	return b.String()
}
