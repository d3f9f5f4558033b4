package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
)

// This file is the fair queue (core.Queuer, for core.WithFair). The
// children of a key's parent node are already a queue in arrival order:
// Curator's InterProcessMutex grants the lock to the lowest node, and each
// waiter watches only the node right before its own. A waiter keeps its
// node between polls instead of deleting it, and renews it at each poll;
// its node's TTL is its patience, so that the node of a waiter that
// stopped polling dies after its patience, by the server's clock, and the
// next contender deletes it.

var _ core.Queuer = (*Store)(nil)

// minGrant is the least TTL that Grants hands to a waiter; a grant with
// less left is left to the waiter's next poll, which renews it.
const minGrant = 5 * time.Millisecond

// Enqueue is TryAcquire for a waiter that keeps its place in line. Its
// first call creates the waiter's node, at the tail; later calls renew it
// (a SetData, pipelined with the listing of the children: two round trips
// per poll, the second a read of the lowest node) and keep its place. The
// node holds the waiter's patience as its TTL: a waiter that stops
// polling is dead patience after its last poll, and the contender behind
// it deletes its node once it is the lowest. A waiter whose node is the
// lowest (every node ahead released, dequeued or dead) holds the lock: the
// grant's TTL is the smaller of ttl and patience, from this call; a Locker
// extends it to ttl. Its fence is the parent's pzxid in the listing that
// showed the node lowest.
//
// A waiter whose node died meanwhile (deleted as dead after a stall, or
// with its session) queues again at the tail. A call that fails deletes
// the waiter's node in the background: a waiter does not use its token
// again after an error.
func (s *Store) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	if err := s.checkTTL(ttl); err != nil {
		return core.Grant{}, err
	}
	if patience <= 0 {
		return core.Grant{}, fmt.Errorf("zkstore: patience %v is not positive", patience)
	}
	dir := s.dir(key)
	data := encodeTTL(patience)
	sent := time.Now()
	session := s.conn.SessionID()
	n, known := s.lookup(key, token)
	var v verdict
	var err error
	if known {
		var st *zk.Stat
		var list listing
		var lerr error
		st, err, list, lerr = both(ctx,
			func() (*zk.Stat, error) { return s.conn.Set(n.path, data, -1) },
			func() (listing, error) { names, st, err := s.conn.Children(dir); return listing{names, st}, err })
		switch {
		case errors.Is(err, zk.ErrNoNode): // our node died: queue again
			s.forget(key, token)
			known = false
		case err == nil && lerr != nil && !errors.Is(lerr, zk.ErrNoNode):
			err = lerr
		}
		if err == nil {
			s.learnSkew(st.Mtime, sent)
			n.version, n.mtime = st.Version, st.Mtime
			v, err = s.settle(ctx, dir, n.path, token, st.Mtime, &list)
		}
	}
	if !known {
		p, cerr := s.create(ctx, dir, token, data)
		if cerr != nil {
			if mayHaveApplied(cerr) {
				s.undoToken(key, token, patience, sent)
			}
			return core.Grant{}, wrap("enqueue", key, cerr)
		}
		n = node{path: p, session: session}
		v, err = s.settle(ctx, dir, p, token, 0, nil)
		if err == nil && v.own != nil {
			s.learnSkew(v.own.Ctime, sent)
			n.session, n.version, n.mtime = v.own.EphemeralOwner, v.own.Version, v.own.Mtime
		}
	}
	if err != nil {
		s.forget(key, token)
		s.undoToken(key, token, patience, sent)
		return core.Grant{}, wrap("enqueue", key, err)
	}
	n.ttl, n.sent, n.want, n.fenced = ttlMillis(patience), sent, ttl, fenced
	switch v.state {
	case lowest:
		n.held = true
		s.remember(key, token, n)
		g := core.Grant{OK: true, TTL: min(ttl, patience)}
		if fenced {
			g.Fence = v.fence
		}
		return g, nil
	case ahead:
		n.held = false
		s.remember(key, token, n)
		return core.Grant{}, nil
	case twin:
		// An older node of this token (a create whose reply was lost) is
		// ahead: it is the waiter's place; the newer one goes.
		s.drop(ctx, key, n.path, patience, sent)
		s.remember(key, token, node{path: v.twin, sent: sent, want: ttl, fenced: fenced})
		return core.Grant{}, nil
	default: // vanished: queue again at the next poll
		s.forget(key, token)
		return core.Grant{}, nil
	}
}

// Poll renews the nodes of waiters, all at once: their SetData calls (a
// create for a waiter whose node died, or that has none yet, followed by a
// read of its stat) are pipelined on the connection with one listing of
// the children, so that a poll takes the same round trips for one waiter
// as for many (at most pollParallel calls in flight). Then the first of
// them in the queue is settled as Enqueue settles a waiter (one more round
// trip, a read of the lowest node): if it is the lowest, it holds the
// lock, and Poll returns its index. A poll that fails fails for all its
// waiters: their nodes are deleted in the background (a waiter does not
// use its token again after an error).
func (s *Store) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	if patience <= 0 {
		return -1, core.Grant{}, fmt.Errorf("zkstore: patience %v is not positive", patience)
	}
	for _, w := range waiters {
		if err := s.checkTTL(w.TTL); err != nil {
			return -1, core.Grant{}, err
		}
	}
	if len(waiters) == 0 {
		return -1, core.Grant{}, nil
	}
	dir := s.dir(key)
	sent := time.Now()
	places, list, err := s.renewAll(ctx, key, dir, waiters, encodeTTL(patience))
	if err != nil {
		s.dropAll(key, waiters, patience, sent)
		return -1, core.Grant{}, wrap("poll", key, err)
	}
	// The first place in the queue, in a listing that shows every place
	// (the listing may have been read before a create).
	names := nameSet(list.names)
	first, all := firstPlace(places, names)
	if !all {
		if list, err = call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err }); err != nil && !errors.Is(err, zk.ErrNoNode) {
			s.dropAll(key, waiters, patience, sent)
			return -1, core.Grant{}, wrap("poll", key, err)
		}
		names = nameSet(list.names)
		first, _ = firstPlace(places, names)
	}
	var now int64 // the server's time: the latest write of the poll
	for _, p := range places {
		if p.stat != nil {
			now = max(now, p.stat.Mtime)
		}
	}
	if now > 0 {
		s.learnSkew(now, sent)
	}
	v := verdict{state: vanished}
	if first >= 0 {
		if v, err = s.settle(ctx, dir, places[first].path, waiters[first].Token, now, &list); err != nil {
			s.dropAll(key, waiters, patience, sent)
			return -1, core.Grant{}, wrap("poll", key, err)
		}
	}
	held, grant := -1, core.Grant{}
	for i, w := range waiters {
		p := places[i]
		if p.stat == nil || !names[path.Base(p.path)] {
			s.forget(key, w.Token) // its node died: it queues again at the next poll
			continue
		}
		n := node{path: p.path, session: p.stat.EphemeralOwner, version: p.stat.Version, mtime: p.stat.Mtime,
			ttl: ttlMillis(patience), sent: sent, want: w.TTL, fenced: fenced}
		if i == first {
			switch v.state {
			case lowest:
				n.held = true
				held, grant = i, core.Grant{OK: true, TTL: min(w.TTL, patience)}
				if fenced {
					grant.Fence = v.fence
				}
			case twin:
				// An older node of this token is ahead: it is the
				// waiter's place, renewed at the next poll; the newer
				// one goes.
				s.drop(ctx, key, p.path, patience, sent)
				n = node{path: v.twin, sent: sent, want: w.TTL, fenced: fenced}
			case vanished:
				s.forget(key, w.Token)
				continue
			}
		}
		s.remember(key, w.Token, n)
	}
	return held, grant, nil
}

// pollParallel bounds the calls of a poll in flight at once.
const pollParallel = 128

// place is a waiter's node after a poll renewed or created it.
type place struct {
	path string
	stat *zk.Stat // after the poll's write; nil if the node vanished meanwhile
}

// renewAll renews the node of each waiter (or creates one), pipelined with
// a listing of dir's children, and returns their places and the listing.
func (s *Store) renewAll(ctx context.Context, key, dir string, waiters []core.Waiter, data []byte) ([]place, listing, error) {
	places := make([]place, len(waiters))
	errs := make([]error, len(waiters))
	sem := make(chan struct{}, pollParallel)
	var wg sync.WaitGroup
	for i, w := range waiters {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			places[i], errs[i] = s.renewPlace(ctx, key, dir, w.Token, data)
		})
	}
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	wg.Wait()
	if errors.Is(err, zk.ErrNoNode) { // made by a create meanwhile
		err = nil
	}
	for _, e := range errs {
		if e != nil {
			return places, list, e
		}
	}
	return places, list, err
}

// renewPlace renews the node of token's waiter, or creates one when the
// waiter has none (its first poll, or its node died), and reads its stat.
func (s *Store) renewPlace(ctx context.Context, key, dir, token string, data []byte) (place, error) {
	if n, ok := s.lookup(key, token); ok {
		st, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(n.path, data, -1) })
		if !errors.Is(err, zk.ErrNoNode) {
			return place{path: n.path, stat: st}, err
		}
		s.forget(key, token) // its node died: queue again
	}
	p, err := s.create(ctx, dir, token, data)
	if err != nil {
		return place{}, err
	}
	ex, err := call(ctx, func() (existence, error) { ok, st, err := s.conn.Exists(p); return existence{ok, st}, err })
	if err != nil || !ex.ok {
		return place{path: p}, err
	}
	return place{path: p, stat: ex.stat}, nil
}

// nameSet returns the set of names.
func nameSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// firstPlace returns the index of the place that comes first in the queue
// among those in names, or -1 if names has none, and whether names has
// every place that has a node.
func firstPlace(places []place, names map[string]bool) (first int, all bool) {
	first, all = -1, true
	var seq int64
	for i, p := range places {
		if p.stat == nil {
			continue
		}
		c, ok := parseChild(path.Base(p.path))
		switch {
		case !ok || !names[c.name]:
			all = false
		case first < 0 || c.seq < seq:
			first, seq = i, c.seq
		}
	}
	return first, all && first >= 0
}

// dropAll forgets the nodes of the waiters of a poll that failed and
// deletes them in the background.
func (s *Store) dropAll(key string, waiters []core.Waiter, patience time.Duration, sent time.Time) {
	for _, w := range waiters {
		s.forget(key, w.Token)
		s.undoToken(key, w.Token, patience, sent)
	}
}

// Dequeue deletes the waiter's node: it leaves the queue, and if a release
// had granted it the lock, the deletion releases it, and ZooKeeper wakes
// the waiter behind. One round trip; a Dequeue that fails is retried in
// the background (and the node dies after the waiter's patience in any
// case).
func (s *Store) Dequeue(ctx context.Context, key, token string) error {
	dir := s.dir(key)
	n, ok := s.lookup(key, token)
	s.forget(key, token)
	if !ok {
		list, err := call(ctx, func() (listing, error) { names, st, err := s.conn.Children(dir); return listing{names, st}, err })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil
		case err != nil:
			return wrap("dequeue", key, err)
		}
		children := sortChildren(list.names)
		i := findToken(children, escape(token))
		if i < 0 {
			return nil
		}
		n = node{path: dir + "/" + children[i].name}
	}
	err := s.delete(ctx, n.path, -1)
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	ttl := time.Minute // the node's TTL, when unknown
	if n.ttl > 0 {
		ttl = time.Duration(n.ttl) * time.Millisecond
	}
	s.undoToken(key, token, ttl, time.Now())
	return wrap("dequeue", key, err)
}

// Grants returns a channel that receives token's grant of key. A goroutine
// watches the node right before the waiter's (a data watch: no herd); when
// it goes, it lists the children, and if the waiter's node is now the
// lowest it sends the grant: the fence is the listing's pzxid, the TTL
// what is left of the waiter's patience since its last poll (at most the
// TTL it asked for). With too little left it sends an empty Grant instead,
// which asks the waiter to poll now. The goroutine ends with stop, once it
// has sent a grant, or once a poll found that the waiter holds the lock.
func (s *Store) Grants(key, token string) (<-chan core.Grant, func()) {
	c := make(chan core.Grant, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return c, func() {}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.grants(ctx, key, token, c)
	}()
	return c, cancel
}

// grants is the goroutine of Grants.
func (s *Store) grants(ctx context.Context, key, token string, c chan<- core.Grant) {
	dir := s.dir(key)
	var event <-chan zk.Event
	pred := "" // the node watched, right before the waiter's
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		recheck := false
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		case ev := <-event:
			event = nil
			switch ev.Type {
			case zk.EventNotWatching:
				retry.Reset(retryInterval)
				continue
			case zk.EventNodeDataChanged:
				recheck = true // renewed, probably: watch it again
			}
		}
		n, ok := s.lookup(key, token)
		switch {
		case !ok: // not queued yet, or queued again at the next poll
			retry.Reset(retryInterval)
			continue
		case n.held: // the waiter's poll found it holds the lock
			return
		}
		cctx, cancel := context.WithTimeout(ctx, bgTimeout)
		if recheck && pred != "" {
			ev, ok, err := s.watchData(cctx, pred)
			if err == nil && ok {
				cancel()
				event = ev
				continue
			}
		}
		list, err := call(cctx, func() (listing, error) { names, st, err := s.conn.Children(dir); return listing{names, st}, err })
		if err != nil {
			cancel()
			retry.Reset(retryInterval)
			continue
		}
		children := sortChildren(list.names)
		i := find(children, path.Base(n.path))
		switch {
		case i < 0: // its node died: the next poll queues again
			cancel()
			retry.Reset(retryInterval)
			continue
		case i == 0:
			cancel()
			g := s.grant(key, token, n, list.stat.Pzxid)
			select {
			case c <- g:
			default: // a poll request not yet taken
			}
			if g.OK {
				return
			}
			retry.Reset(retryInterval) // the poll renews the node and takes the lock
			continue
		}
		pred = dir + "/" + children[i-1].name
		ev, ok, err := s.watchData(cctx, pred)
		cancel()
		switch {
		case err != nil:
			retry.Reset(retryInterval)
		case !ok:
			retry.Reset(0) // gone meanwhile: list again
		default:
			event = ev
		}
	}
}

// grant returns the grant of the waiter's node n, found lowest in a
// listing with pzxid, and records that it holds the lock.
func (s *Store) grant(key, token string, n node, pzxid int64) core.Grant {
	left := time.Until(n.sent.Add(time.Duration(n.ttl) * time.Millisecond))
	if left < minGrant {
		return core.Grant{} // the waiter's poll renews its node and takes it
	}
	s.markHeld(key, token, n.path)
	g := core.Grant{OK: true, TTL: min(n.want, left)}
	if n.fenced {
		g.Fence = pzxid
	}
	return g
}

// watchData sets a data watch on the node at p; ok is false if it does
// not exist. (A read of a missing node sets no watch with getData, while
// exists would set one that waits for the node's creation: for ever, as
// no sequential node's name comes back.)
func (s *Store) watchData(ctx context.Context, p string) (<-chan zk.Event, bool, error) {
	got, err := call(ctx, func() (watched, error) {
		_, _, ev, err := s.conn.GetW(p)
		return watched{event: ev}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return got.event, true, nil
}
