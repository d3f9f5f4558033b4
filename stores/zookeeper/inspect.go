package zkstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/lockstore"
)

// This file is the Inspector: it lists the keys held under the store's
// root and tells the holders, waiters and fence of one key, by reading the
// nodes as the contenders do and judging them by the same rules (settle,
// settleShare), without deleting anything.

var _ lockstore.Inspector = (*Store)(nil)

// cursorPrefix begins every cursor that List hands out: the prefix, then
// the escaped last key of the page.
const cursorPrefix = "zk1:"

// skewMaxAge is how long the store trusts the server's clock that it
// learned from the reply to a write (learnSkew) before an Inspector's call
// learns it again (serverNow).
const skewMaxAge = 30 * time.Second

// List returns the keys under the store's root that begin with prefix and
// are held now, sorted, in pages (lockstore.Inspector). ZooKeeper has no
// paged listing of a node's children: each call reads the names of the
// root's children (one round trip), keeps the keys that begin with prefix
// and follow the cursor, and judges the first limit of them (each one's
// children and their nodes read, two round trips, pipelined across the
// keys). A page thus holds at most limit keys, fewer when some of the keys
// it judged were free; the cursor is the last key judged. A key is held
// when a node of its queue holds it by the store's rules: the lowest node,
// live and exclusive, or live shares that nothing ahead keeps out; a queue
// of fair waiters behind a holder that died is not held.
//
// Liveness is judged by the server's clock: see Inspect.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("zkstore: list: the limit %d is not within 1..%d: %w", limit, lockstore.MaxListLimit, lockstore.ErrInvalidOption)
	}
	after, started := "", cursor != ""
	if started {
		k, ok := parseCursor(cursor)
		if !ok || !strings.HasPrefix(k, prefix) {
			return nil, "", fmt.Errorf("zkstore: list: the cursor %q is not one this store handed out for the prefix %q: %w", cursor, prefix, lockstore.ErrInvalidOption)
		}
		after = k
	}
	root := s.root
	if root == "" {
		root = "/"
	}
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(root); return listing{n, st}, err })
	switch {
	case errors.Is(err, zk.ErrNoNode): // no lock was ever taken
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("zkstore: list: %w", err)
	}
	var keys []string
	for _, name := range list.names {
		k, ok := unescape(name)
		if ok && strings.HasPrefix(k, prefix) && (!started || k > after) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	next := ""
	if len(keys) > limit {
		keys = keys[:limit]
		next = cursorPrefix + escape(keys[limit-1])
	}
	if len(keys) == 0 {
		return nil, next, nil
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("zkstore: list: %w", err)
	}
	held := make([]bool, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, pollParallel)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			q, err := s.readQueue(ctx, k)
			if err == nil {
				held[i] = q.judge(k, now).Held()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, "", fmt.Errorf("zkstore: list: %w", err)
	}
	out := make([]string, 0, len(keys))
	for i, k := range keys {
		if held[i] {
			out = append(out, k)
		}
	}
	return out, next, nil
}

// parseCursor returns the key of a cursor that List handed out; ok is false
// for any other string.
func parseCursor(cursor string) (string, bool) {
	name, ok := strings.CutPrefix(cursor, cursorPrefix)
	if !ok {
		return "", false
	}
	return unescape(name)
}

// Inspect returns the state of key (lockstore.Inspector), from its
// children and their nodes, read in two round trips (the listing, then
// every node pipelined), and judged by the store's rules as a contender
// judges them, deleting nothing:
//
//   - a node is dead once the server's clock passes its mtime plus the TTL
//     in its data; dead nodes hold nothing and are not listed;
//   - the lowest node, if live and exclusive, is the holder; its TTL is
//     what is left of the TTL of its last write;
//   - live shares hold while no live exclusive node, share of another mode
//     or permit of their slot is ahead of them;
//   - every other live exclusive node is a waiter, in sequence order: a
//     fair waiter's place (its data is its patience, so Patience is what is
//     left of it and TTL, which the node does not keep, is 0), or for a
//     moment an attempt that is about to find the key busy.
//
// The server's clock is the one the store learned from the reply to its
// last write, no older than 30 seconds; a store that has not written
// lately (an operator's, that only inspects) learns it again with a write
// that changes no lock, no queue and no fence: it sets the (unused) data of
// the store's root node, one round trip more. Where the connection may not
// write there, the local clock stands in.
//
// Writer is the token of the last attempt that wrote the key's exclusive
// waiter's record (TryAcquireWaiting), while the record is live: the
// record is the key's, not a token's, and each waiting attempt (a Locker
// draws a token per attempt) writes its own token into it.
//
// Fences are zxids, and a holder's fence is not kept as such: Fence is the
// highest zxid that a fence of key can have been drawn from, the larger of
// the parent node's pzxid and the holders' last writes. It is the fence
// the last holder drew, or above it when contenders came and went after
// that holder's acquire, and below every fence drawn later. A key whose
// parent node is gone (ZooKeeper deletes it once it is empty) has fence 0.
// The exclusive holder's own Fence is told only when nothing changed under
// the key since its node was made (its acquire's fence is then that
// node's czxid), and is 0 otherwise: the pzxid its acquire drew is gone,
// and the zxid of its node's last write is a fenced Extend's fence, but
// also a fair waiter's last poll. A share's is the zxid of its node's last
// write (a fenced share's fence, drawn by that write), 0 if it was never
// written after its create.
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	if key == "" {
		return lockstore.KeyState{}, fmt.Errorf("zkstore: inspect: the key is empty: %w", lockstore.ErrInvalidOption)
	}
	q, err := s.readQueue(ctx, key)
	if err != nil {
		return lockstore.KeyState{}, wrap("inspect", key, err)
	}
	if len(q.children) == 0 && q.record == nil {
		return q.judge(key, 0), nil
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return lockstore.KeyState{}, wrap("inspect", key, err)
	}
	return q.judge(key, now), nil
}

// serverNow returns the server's clock in milliseconds, from the offset
// learned at the store's last write (learnSkew). When that is older than
// skewMaxAge, or was never learned, it learns it again with one write that
// changes no lock, queue or fence: a SetData of the root node, whose data
// the store never reads, answered with the server's time. Without the
// permission to write there, or without a root node (no lock was ever
// taken), the last offset known (0: the local clock) stands in.
func (s *Store) serverNow(ctx context.Context) (int64, error) {
	if at := s.skewAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < skewMaxAge {
		return time.Now().UnixMilli() + s.skew.Load(), nil
	}
	root := s.root
	if root == "" {
		root = "/"
	}
	sent := time.Now()
	st, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(root, nil, -1) })
	switch {
	case err == nil:
		s.learnSkew(st.Mtime, sent)
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrNoNode):
	default:
		return 0, err
	}
	return time.Now().UnixMilli() + s.skew.Load(), nil
}

// queue is what readQueue read of a key's parent node.
type queue struct {
	stat     *zk.Stat     // the parent node's, nil when it does not exist
	children []child      // the contenders, in sequence order
	nodes    []readResult // their nodes, one per child (err ErrNoNode: gone meanwhile)
	record   *readResult  // the exclusive waiter's record, if there is one
}

// readQueue lists key's parent node and reads the nodes of its contenders
// and the exclusive waiter's record, pipelined: two round trips, one when
// it has none.
func (s *Store) readQueue(ctx context.Context, key string) (queue, error) {
	dir := s.dir(key)
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return queue{}, nil
	case err != nil:
		return queue{}, err
	}
	q := queue{stat: list.stat, children: sortChildren(list.names)}
	names := make([]string, len(q.children), len(q.children)+1)
	for i, c := range q.children {
		names[i] = c.name
	}
	if slices.Contains(list.names, waiterName) {
		names = append(names, waiterName)
	}
	if len(names) == 0 {
		return q, nil
	}
	reads := s.readAll(ctx, dir, names)
	for _, r := range reads {
		if r.err != nil && !errors.Is(r.err, zk.ErrNoNode) {
			return queue{}, r.err
		}
	}
	q.nodes = reads[:len(q.children)]
	if len(reads) > len(q.children) && reads[len(q.children)].err == nil {
		q.record = &reads[len(q.children)]
	}
	return q, nil
}

// judge tells key's holders, waiters and fence from q at the server's time
// now (ms), by the rules of settle and settleShare (see Inspect).
func (q queue) judge(key string, now int64) lockstore.KeyState {
	st := lockstore.KeyState{Key: key}
	if q.stat == nil {
		return st
	}
	fence := q.stat.Pzxid
	ahead := false     // a node (live or dead) is ahead
	exclusive := false // a live exclusive node is ahead
	var shares []shareName
	var shareStats []*zk.Stat
	var holder *zk.Stat // the exclusive holder's node
	for i, c := range q.children {
		r := q.nodes[i]
		if r.err != nil { // gone meanwhile
			continue
		}
		was := ahead
		ahead = true
		ttlMs, timed := decodeTTL(r.data)
		if timed && now > r.stat.Mtime+ttlMs { // dead
			continue
		}
		var left time.Duration
		if timed {
			left = time.Duration(r.stat.Mtime+ttlMs-now) * time.Millisecond
		}
		sn, isShare := parseShareTag(c.token)
		if !isShare {
			token, _ := unescape(c.token)
			switch {
			case !was:
				holder = r.stat
				st.Holders = append(st.Holders, lockstore.HolderState{Token: token, Exclusive: true, TTL: left})
			default:
				st.Waiters = append(st.Waiters, lockstore.WaiterState{Token: token, Patience: left})
			}
			exclusive = true
			continue
		}
		if exclusive || slices.ContainsFunc(shares, func(o shareName) bool {
			return o.hold != sn.hold || (!sn.hold.Shared() && o.slot == sn.slot)
		}) {
			continue // an attempt that is about to fail
		}
		token, _ := unescape(sn.token)
		var f int64
		if r.stat.Mzxid != r.stat.Czxid {
			f = r.stat.Mzxid
		}
		shares = append(shares, sn)
		shareStats = append(shareStats, r.stat)
		st.Holders = append(st.Holders, lockstore.HolderState{Token: token, Hold: sn.hold, Slot: sn.slot, TTL: left, Fence: f})
	}
	for _, h := range shareStats {
		fence = max(fence, h.Mzxid)
	}
	if holder != nil {
		fence = max(fence, holder.Mzxid)
		if holder.Mzxid == holder.Czxid && q.stat.Pzxid == holder.Czxid {
			// Nothing changed since the holder's create: the listing
			// that showed it lowest had its czxid as pzxid, its fence.
			st.Holders[0].Fence = holder.Czxid
		}
	}
	if len(shares) > 0 {
		slices.SortStableFunc(st.Holders, func(a, b lockstore.HolderState) int { return cmp.Compare(a.Slot, b.Slot) })
	}
	st.Fence = fence
	if r := q.record; r != nil && !expired(r.stat.Mtime, r.data, now) {
		st.Writer = recordToken(r.data)
	}
	return st
}

// unescape is the inverse of escape: it returns the string s whose escape
// is name, and ok false when name is no escape's (a node that something
// else made, or "%", the escape of the empty string).
func unescape(name string) (string, bool) {
	if name == "" || name == "%" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		hi, lo := unhex(name[i+1]), unhex(name[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	s := b.String()
	if escape(s) != name { // not escape's own spelling: not a key of this store
		return "", false
	}
	return s, true
}

// unhex is the value of an upper-case hexadecimal digit (as escape writes
// them), -1 for any other byte.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
