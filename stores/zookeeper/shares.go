package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
)

// This file is the Sharer: shared holds and numbered permits (core.Shared,
// core.Permits), after Curator's InterProcessReadWriteLock and
// InterProcessSemaphoreV2 (see the package documentation). A share is a
// contender in the key's queue like an exclusive lock, an
// EPHEMERAL_SEQUENTIAL child of the key's parent node whose data is its
// TTL, but named with a tag (node.go) that says its mode and, for permits,
// its slot. A share holds while no live node ahead of it is an exclusive
// lock, a share of another mode, or a permit of its slot, and no exclusive
// waiter's record is live. The exclusive paths need no change: a live
// share ahead of an exclusive contender keeps it out, as a live lock
// would; a dead one is deleted by the next contender, as a dead lock is.

var (
	_ core.Sharer      = (*Store)(nil)
	_ core.ShareUndoer = (*Store)(nil)
)

// shareKey is the nodeKey of token's share of key.
func shareKey(key, token string) nodeKey { return nodeKey{key: key, token: token, kind: shareNode} }

// Verdicts of settleShare, beside those of settle (ahead: a live
// exclusive lock or waiter's record keeps the share out; lowest: it
// holds).
const (
	mismatch  = iota + twin + 1 // a live share of another mode is ahead
	slotTaken                   // a live permit of the same slot is ahead
)

// TryAcquireShare takes a share of key for token (core.Sharer): it creates
// the share's node in the key's queue and lists the queue, with a read of
// the new node's stat, pipelined. The share holds unless a live node ahead
// of it is an exclusive lock (or a fair waiter's place), a share of
// another mode (ErrModeMismatch) or, for permits, a permit of its slot, or
// an exclusive waiter's record is live (TryAcquireWaiting); otherwise its
// node is deleted again. Nodes ahead whose TTL has run out by the server's
// clock are deleted, guarded by the version read, as TryAcquire does.
//
// A permit's slot is in its node's name, so it is chosen first, from a
// listing: the lowest slot that no live permit of the key holds (the
// liveness judged by the server's clock as last seen). If a permit of that
// slot is ahead of the new node after all (a concurrent attempt chose it
// too), the attempt tries the next free slot; two permits never hold one
// slot, so never more than N hold the key.
//
// An uncontended shared hold takes two round trips; a permit three (the
// listing first), four when other permits hold the lower slots (their
// nodes are read to find a free one); a fenced share one more: its fence
// is the zxid of a write to its node once it holds, higher than every
// fence drawn before, exclusive or shared.
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, 0, 0, err
	}
	if err := h.Check(); err != nil {
		return false, 0, 0, wrap("acquire share", key, err)
	}
	k := shareKey(key, token)
	if n, ok := s.lookupK(k); ok {
		if n.hold != h {
			return false, 0, 0, wrap("acquire share", key, mismatchError(h, n.hold))
		}
		ok, fence, err := s.renew(ctx, k, n, ttl, fenced)
		if err != nil || ok {
			return ok, n.slot, fence, wrap("acquire share", key, err)
		}
		// The share was lost meanwhile: a fresh attempt.
	}
	dir := s.dir(key)
	etoken := escape(token)
	var avoid []int // permits: slots found held by a concurrent attempt
	for {
		slot := 0
		if !h.Shared() {
			pick, err := s.pickSlot(ctx, dir, etoken, h, avoid)
			switch {
			case err != nil:
				return false, 0, 0, wrap("acquire share", key, err)
			case pick.twin != "":
				return s.adoptShare(ctx, k, pick.twin, h, ttl, fenced)
			case pick.slot < 0: // every slot is held
				return false, 0, 0, nil
			}
			slot = pick.slot
		}
		sent := time.Now()
		session := s.conn.SessionID()
		p, err := s.createSeq(ctx, dir, nodePrefix+shareTag(h, slot, etoken)+"-", encodeTTL(ttl))
		if err != nil {
			if mayHaveApplied(err) {
				s.undoToken(key, token, ttl, sent)
			}
			return false, 0, 0, wrap("acquire share", key, err)
		}
		v, err := s.settleShare(ctx, dir, p, etoken, h, slot)
		if err == nil && v.own != nil {
			s.learnSkew(v.own.Ctime, sent)
		}
		switch {
		case err != nil:
			s.undoToken(key, token, ttl, sent)
			return false, 0, 0, wrap("acquire share", key, err)
		case v.state == lowest:
			n := node{path: p, session: v.own.EphemeralOwner, version: v.own.Version, mtime: v.own.Mtime,
				ttl: ttlMillis(ttl), held: true, hold: h, slot: slot}
			s.rememberK(k, n)
			if !fenced {
				return true, slot, 0, nil
			}
			ok, fence, err := s.renew(ctx, k, n, ttl, true)
			return ok, slot, fence, wrap("acquire share", key, err)
		case v.state == vanished:
			if s.conn.SessionID() != session {
				return false, 0, 0, wrap("acquire share", key, errGone)
			}
			return false, 0, 0, nil // found dead by a contender: a TTL shorter than the round trips
		case v.state == twin:
			s.drop(ctx, key, p, ttl, sent)
			return s.adoptShare(ctx, k, v.twin, h, ttl, fenced)
		case v.state == mismatch:
			s.drop(ctx, key, p, ttl, sent)
			other, _ := parseShare(v.block)
			return false, 0, 0, wrap("acquire share", key, mismatchError(h, other.hold))
		case v.state == slotTaken:
			s.drop(ctx, key, p, ttl, sent)
			if avoid = append(avoid, slot); len(avoid) > h.N { // bounded, whatever happens
				return false, 0, 0, nil
			}
		default: // ahead: an exclusive holder or waiter
			s.drop(ctx, key, p, ttl, sent)
			return false, 0, 0, nil
		}
	}
}

// mismatchError reports a share of mode h refused because of live shares
// of mode other.
func mismatchError(h, other core.Hold) error {
	return fmt.Errorf("%w: asked for %v, held as %v", core.ErrModeMismatch, h, other)
}

// adoptShare makes the older node of k's token at p (a re-sent attempt
// whose store forgot it, found by the token in its name) k's share, if it
// is of mode h and live, and resets its TTL.
func (s *Store) adoptShare(ctx context.Context, k nodeKey, p string, h core.Hold, ttl time.Duration, fenced bool) (bool, int, int64, error) {
	sn, ok := parseShare(path.Base(p))
	if !ok {
		return false, 0, 0, nil
	}
	if sn.hold != h {
		return false, 0, 0, wrap("acquire share", k.key, mismatchError(h, sn.hold))
	}
	n, err := s.read(ctx, node{path: p, held: true, hold: sn.hold, slot: sn.slot})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, 0, 0, nil
	case err != nil:
		return false, 0, 0, wrap("acquire share", k.key, err)
	}
	ok, fence, err := s.renew(ctx, k, n, ttl, fenced)
	return ok, sn.slot, fence, wrap("acquire share", k.key, err)
}

// slotPick is what pickSlot chose.
type slotPick struct {
	slot int    // -1: none free
	twin string // the path of a share of the same token, if any
}

// pickSlot lists dir and returns the lowest slot of h that no live permit
// holds and that is not in avoid. The nodes of lower slots are read (in
// one round trip) to find a dead one, judged by the server's clock as last
// seen: the choice is a guess that settleShare checks.
func (s *Store) pickSlot(ctx context.Context, dir, etoken string, h core.Hold, avoid []int) (slotPick, error) {
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return slotPick{}, err
	}
	named := make(map[int][]string) // slot -> names of its nodes
	for _, c := range sortChildren(list.names) {
		sn, ok := parseShareTag(c.token)
		switch {
		case !ok:
		case sn.token == etoken:
			return slotPick{twin: dir + "/" + c.name}, nil
		case sn.hold == h:
			named[sn.slot] = append(named[sn.slot], c.name)
		}
	}
	free := func(i int) bool { return !containsInt(avoid, i) }
	first := -1 // the lowest slot without a node
	var read []string
	for i := 0; i < h.N && first < 0; i++ {
		if !free(i) {
			continue
		}
		if len(named[i]) == 0 {
			first = i
			break
		}
		read = append(read, named[i]...)
	}
	if len(read) == 0 {
		return slotPick{slot: first}, nil
	}
	now := time.Now().UnixMilli() + s.skew.Load()
	live := make(map[int]bool)
	for _, r := range s.readAll(ctx, dir, read) {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
		case r.err != nil:
			return slotPick{}, r.err
		case !expired(r.stat.Mtime, r.data, now):
			sn, _ := parseShare(r.name)
			live[sn.slot] = true
		}
	}
	for i := 0; i < h.N; i++ {
		if i == first || (free(i) && !live[i] && len(named[i]) > 0) {
			return slotPick{slot: i}, nil
		}
	}
	return slotPick{slot: -1}, nil
}

// containsInt reports whether xs has x.
func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// settleShare judges the share's node at p (of the escaped token etoken,
// mode h and slot) against the queue: it lists dir and reads the node's
// stat (one round trip), then reads the nodes that may keep the share out
// (one more, pipelined): exclusive nodes ahead, shares of another mode
// ahead, permits of its slot ahead, and exclusive waiters' records. Those
// whose TTL has run out by the server's clock (the new node's mtime) are
// deleted, guarded by the version read.
func (s *Store) settleShare(ctx context.Context, dir, p, etoken string, h core.Hold, slot int) (verdict, error) {
	list, lerr, ex, xerr := both(ctx,
		func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err },
		func() (existence, error) { ok, st, err := s.conn.Exists(p); return existence{ok, st}, err })
	err := lerr
	if err == nil {
		err = xerr
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return verdict{state: vanished}, nil
	case err != nil:
		return verdict{}, err
	case !ex.ok:
		return verdict{state: vanished}, nil
	}
	v := verdict{own: ex.stat}
	now := ex.stat.Mtime
	children := sortChildren(list.names)
	i := find(children, path.Base(p))
	if i < 0 {
		return verdict{state: vanished}, nil
	}
	var check []string
	for _, c := range children[:i] {
		sn, isShare := parseShareTag(c.token)
		switch {
		case isShare && sn.token == etoken:
			return verdict{state: twin, twin: dir + "/" + c.name, own: v.own}, nil
		case !isShare, sn.hold != h, !h.Shared() && sn.slot == slot:
			check = append(check, c.name)
		}
	}
	if slices.Contains(list.names, waiterName) {
		check = append(check, waiterName)
	}
	var dead []readResult
	v.state = lowest
	rank := func(state int) int { // the verdict that wins when several apply
		switch state {
		case mismatch:
			return 3
		case ahead:
			return 2
		case slotTaken:
			return 1
		}
		return 0
	}
	for _, r := range s.readAll(ctx, dir, check) {
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			continue
		case r.err != nil:
			return verdict{}, r.err
		case expired(r.stat.Mtime, r.data, now):
			dead = append(dead, r)
			continue
		}
		state := ahead // an exclusive lock, a fair waiter's place or an exclusive waiter's record
		if sn, ok := parseShare(r.name); ok {
			state = slotTaken
			if sn.hold != h {
				state = mismatch
			}
		}
		if rank(state) > rank(v.state) {
			v.state, v.block = state, r.name
		}
	}
	s.deleteDead(ctx, dir, dead)
	return v, nil
}

// readResult is the outcome of reading the child name of a key's parent
// node.
type readResult struct {
	name string
	data []byte
	stat *zk.Stat
	err  error
}

// readAll reads the children names of dir, pipelined on the connection (at
// most pollParallel in flight): one round trip.
func (s *Store) readAll(ctx context.Context, dir string, names []string) []readResult {
	out := make([]readResult, len(names))
	sem := make(chan struct{}, pollParallel)
	var wg sync.WaitGroup
	for i, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p := dir + "/" + name
			got, err := call(ctx, func() (content, error) { data, st, err := s.conn.Get(p); return content{data, st}, err })
			out[i] = readResult{name: name, data: got.data, stat: got.stat, err: err}
		})
	}
	wg.Wait()
	return out
}

// deleteDead deletes the nodes of dir found dead, each guarded by the
// version read (so that a node renewed meanwhile stays), pipelined. Errors
// are left: the next contender that finds a node dead deletes it.
func (s *Store) deleteDead(ctx context.Context, dir string, dead []readResult) {
	var wg sync.WaitGroup
	for _, r := range dead {
		wg.Go(func() { _ = s.delete(ctx, dir+"/"+r.name, r.stat.Version) })
	}
	wg.Wait()
}

// locateShare finds token's share of key when the store does not remember
// it (a Store other than the one that took it), by the token in its name.
// ok is false when token has no share of key.
func (s *Store) locateShare(ctx context.Context, key, token string) (node, bool, error) {
	dir := s.dir(key)
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return node{}, false, nil
	case err != nil:
		return node{}, false, err
	}
	etoken := escape(token)
	for _, c := range sortChildren(list.names) {
		sn, ok := parseShareTag(c.token)
		if !ok || sn.token != etoken {
			continue
		}
		n, err := s.read(ctx, node{path: dir + "/" + c.name, held: true, hold: sn.hold, slot: sn.slot})
		if errors.Is(err, zk.ErrNoNode) {
			return node{}, false, nil
		}
		return n, err == nil, err
	}
	return node{}, false, nil
}

// ReleaseShare deletes token's share of key (core.Sharer): one
// multi-operation, as Release, that reports whether the share was live.
// It never touches another token's node, nor an exclusive lock of token.
// A store that did not take the share finds it by its name first (one more
// round trip, two with the read of its node).
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	k := shareKey(key, token)
	n, ok := s.lookupK(k)
	if !ok {
		var err error
		if n, ok, err = s.locateShare(ctx, key, token); err != nil || !ok {
			return false, wrap("release share", key, err)
		}
	}
	ok, err := s.release(ctx, k, n)
	return ok, wrap("release share", key, err)
}

// ExtendShare resets the TTL of token's share of key (core.Sharer): one
// SetData guarded by the version of the store's last write, as Extend; a
// share whose TTL had run out is deleted and reported lost. With fenced,
// the new fence is the SetData's zxid.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, 0, err
	}
	k := shareKey(key, token)
	n, ok := s.lookupK(k)
	if !ok {
		var err error
		if n, ok, err = s.locateShare(ctx, key, token); err != nil || !ok {
			return false, 0, wrap("extend share", key, err)
		}
	}
	ok, fence, err := s.renew(ctx, k, n, ttl, fenced)
	return ok, fence, wrap("extend share", key, err)
}

// TryAcquireWaiting is TryAcquire for an exclusive waiter that has failed
// before (core.Sharer). When live shares keep it out (the live node ahead
// of its attempt was a share), it writes the key's exclusive waiter's
// record: an EPHEMERAL node "w" beside the queue holding patience as its
// TTL (and token, for an Inspector's Writer), which keeps new shares out (TryAcquireShare) until it expires,
// patience after the last attempt that wrote it, or an exclusive waiter
// takes the key and deletes it. The record is the key's, not the
// token's: every waiting attempt, of any token (a Locker draws one per
// attempt) and any waiter, resets the one record of the key, and the
// attempt that takes the key deletes it, whoever wrote it. One more round
// trip when it writes the record (two when the record has to be made or
// found there after all), and one more when it takes the key while the
// listing that showed it lowest had a record.
func (s *Store) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, 0, err
	}
	if patience <= 0 {
		return false, 0, fmt.Errorf("zkstore: patience %v is not positive", patience)
	}
	ok, fence, saw, err := s.tryAcquire(ctx, key, token, ttl, fenced)
	switch {
	case err != nil:
		return false, 0, err
	case ok && !saw.noRecord:
		s.clearWaiting(ctx, key, patience)
	case !ok && saw.byShare:
		if err := s.markWaiting(ctx, key, token, patience, !saw.noRecord); err != nil {
			return false, 0, wrap("acquire waiting", key, err)
		}
	}
	return ok, fence, nil
}

// clearWaiting deletes key's exclusive waiter's record, written with
// patience, if there is one; a deletion that fails is left to a clean-up
// in the background (the record dies after its patience in any case).
func (s *Store) clearWaiting(ctx context.Context, key string, patience time.Duration) {
	p := s.dir(key) + "/" + waiterName
	sent := time.Now()
	if err := s.delete(ctx, p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.undoNode(key, p, patience, sent)
	}
}

// markWaiting writes key's exclusive waiter's record with patience as its
// TTL and token as the attempt that wrote it last: it resets the record's
// data, which makes its mtime the server's time of the write, or creates
// it when there is none. exists says which to try first (what the
// attempt's listing showed).
func (s *Store) markWaiting(ctx context.Context, key, token string, patience time.Duration, exists bool) error {
	dir := s.dir(key)
	p := dir + "/" + waiterName
	data := recordData(patience, token)
	set := func() error {
		_, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(p, data, -1) })
		return err
	}
	create := func() error {
		_, err := call(ctx, func() (string, error) { return s.conn.Create(p, data, zk.FlagEphemeral, s.acl) })
		return err
	}
	var err error
	for try := 0; try < 4; try++ {
		if exists {
			if err = set(); errors.Is(err, zk.ErrNoNode) {
				exists = false // expired and deleted, taken, or gone with a session
				continue
			}
		} else {
			err = create()
			switch {
			case errors.Is(err, zk.ErrNodeExists):
				exists = true // made meanwhile by another waiter
				continue
			case errors.Is(err, zk.ErrNoNode):
				if err = s.makeDir(ctx, dir); err == nil {
					continue
				}
			}
		}
		break
	}
	return err
}
