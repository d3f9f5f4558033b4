package zkstore

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reqlock/reqlock/core"
)

// This file names the nodes: a parent node per key under the root, and
// under it one EPHEMERAL_SEQUENTIAL child per contender, named after its
// token (Curator's "protected" names) and numbered by ZooKeeper.

// nodePrefix starts every contender's name: "l-" + escaped token + "-" +
// ZooKeeper's ten-digit sequence number.
const nodePrefix = "l-"

// seqDigits is the length of the sequence number ZooKeeper appends to a
// sequential node's name.
const seqDigits = 10

// escape makes s a valid, unambiguous node name: letters, digits and
// "-_.:{}@+=,~!*()[]" stay as they are, every other byte (the separator '/',
// the escape '%', control characters, bytes of multi-byte UTF-8) becomes %XX.
// ZooKeeper's reserved names "." and ".." are escaped too, and the empty
// string becomes "%", which no other string escapes to.
func escape(s string) string {
	if s == "" {
		return "%"
	}
	if strings.Trim(s, ".") == "" { // "." and "..", and longer runs of dots alike
		return strings.Repeat("%2E", len(s))
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safe(c) {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// safe reports whether c may stand for itself in a node name.
func safe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.:{}@+=,~!*()[]", c) >= 0
}

// child is a contender's node under a key's parent node.
type child struct {
	name  string // the node's name
	token string // the escaped token in its name
	seq   int64  // ZooKeeper's sequence number
}

// parseChild reads a child's name; ok is false for a name that is not a
// contender's (left there by something else), which the store ignores.
func parseChild(name string) (c child, ok bool) {
	if len(name) < len(nodePrefix)+1+seqDigits || !strings.HasPrefix(name, nodePrefix) || name[len(name)-seqDigits-1] != '-' {
		return child{}, false
	}
	seq, err := strconv.ParseInt(name[len(name)-seqDigits:], 10, 64)
	if err != nil || seq < 0 {
		return child{}, false
	}
	return child{name: name, token: name[len(nodePrefix) : len(name)-seqDigits-1], seq: seq}, true
}

// sortChildren returns the contenders among names in the order of their
// sequence numbers: the order in which they were created.
func sortChildren(names []string) []child {
	out := make([]child, 0, len(names))
	for _, n := range names {
		if c, ok := parseChild(n); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// find returns the index of the child whose name is name, or -1.
func find(children []child, name string) int {
	return slices.IndexFunc(children, func(c child) bool { return c.name == name })
}

// findToken returns the index of the first child of token (escaped), or -1.
func findToken(children []child, token string) int {
	return slices.IndexFunc(children, func(c child) bool { return c.token == token })
}

// A node's data is its TTL in milliseconds, in decimal: the node is dead
// once the server's clock passes its mtime (the time of its last write) plus
// this TTL.

// encodeTTL returns the data of a node with ttl, rounded up to a whole
// millisecond.
func encodeTTL(ttl time.Duration) []byte {
	return strconv.AppendInt(nil, ttlMillis(ttl), 10)
}

// ttlMillis is ttl in whole milliseconds, rounded up.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// decodeTTL reads a node's TTL in milliseconds; ok is false for data that
// is not a TTL (a node that never expires by time, only with its session).
// What follows the TTL after a space (the token in an exclusive waiter's
// record, recordData) is not part of it.
func decodeTTL(data []byte) (ms int64, ok bool) {
	ttl, _, _ := strings.Cut(string(data), " ")
	ms, err := strconv.ParseInt(ttl, 10, 64)
	return ms, err == nil && ms > 0
}

// recordData is the data of an exclusive waiter's record (waiterName): its
// patience as a TTL, a space and the token of the attempt that wrote it
// last, for an Inspector (Writer).
func recordData(patience time.Duration, token string) []byte {
	return append(append(encodeTTL(patience), ' '), token...)
}

// recordToken returns the token in the data of an exclusive waiter's
// record, "" if it has none.
func recordToken(data []byte) string {
	_, token, _ := strings.Cut(string(data), " ")
	return token
}

// expired reports whether a node last written at mtime with data is dead at
// now (all in the server's milliseconds). A millisecond clock truncates:
// now > mtime+ttl means that more than ttl has passed since the write.
func expired(mtime int64, data []byte, now int64) bool {
	ms, ok := decodeTTL(data)
	return ok && now > mtime+ms
}

// A share (a shared hold or a permit, shares.go) is a contender like any
// other, so that an exclusive contender behind it waits for it and one
// ahead of it keeps it out, but the token part of its name is a tag that no
// escaped token is (escape writes '%' only before two upper-case
// hexadecimal digits, or alone):
//
//	shared:      "%S" + escaped token
//	permits(N):  "%P" + N + "_" + slot + "_" + escaped token
//
// so that a share is never taken for an exclusive lock of its token
// (Release, Extend and the fair queue find a token's lock by its name).
const (
	sharedTag  = "%S"
	permitsTag = "%P"
)

// waiterName is the name of a key's exclusive waiter's record
// (TryAcquireWaiting), a node that is no contender: one per key, whichever
// waiters and attempts write it, as the record is the key's, not a token's
// (a Locker draws a token per attempt). Its data (recordData) is its
// patience and the token of the attempt that wrote it last.
const waiterName = "w"

// shareName is what the name of a share's node says.
type shareName struct {
	hold  core.Hold
	slot  int    // permits: the slot; 0 otherwise
	token string // escaped
}

// shareTag returns the token part of the name of a share's node.
func shareTag(h core.Hold, slot int, etoken string) string {
	if h.Shared() {
		return sharedTag + etoken
	}
	return permitsTag + strconv.Itoa(h.N) + "_" + strconv.Itoa(slot) + "_" + etoken
}

// parseShare reads the name of a child of a key's parent node; ok is false
// unless it is a share's node.
func parseShare(name string) (shareName, bool) {
	c, ok := parseChild(name)
	if !ok {
		return shareName{}, false
	}
	return parseShareTag(c.token)
}

// parseShareTag reads the token part of a contender's name; ok is false
// unless it is a share's tag.
func parseShareTag(tag string) (shareName, bool) {
	switch {
	case strings.HasPrefix(tag, sharedTag):
		return shareName{token: tag[len(sharedTag):]}, true
	case strings.HasPrefix(tag, permitsTag):
		parts := strings.SplitN(tag[len(permitsTag):], "_", 3)
		if len(parts) != 3 {
			return shareName{}, false
		}
		n, err1 := strconv.Atoi(parts[0])
		slot, err2 := strconv.Atoi(parts[1])
		h := core.Hold{N: n}
		if err1 != nil || err2 != nil || n < 1 || h.Check() != nil || slot < 0 || slot >= n {
			return shareName{}, false
		}
		return shareName{hold: h, slot: slot, token: parts[2]}, true
	}
	return shareName{}, false
}
