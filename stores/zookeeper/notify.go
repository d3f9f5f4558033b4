package zkstore

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file is the Notifier: the waiters of a key in this process share
// one goroutine that watches the key's holder, the lowest child of the
// key's parent node, with a ZooKeeper data watch, and wakes them when that
// node is deleted or its TTL runs out.

// keyWatch is the shared watch of one key.
type keyWatch struct {
	subs  map[chan struct{}]struct{}
	since time.Time     // when subs became empty
	kick  chan struct{} // capacity 1: subs became empty
}

// Watch returns a channel that receives a value when the holder of key
// goes: its node is deleted (a release, the expiry of its session, or a
// contender that found it dead) or, by the server's clock as last seen by
// this store, its TTL runs out. Every waiter of key in this process shares
// one goroutine and one ZooKeeper watch on the holder's node (no herd: the
// watch is on that node, not on the list of children); the watch stays
// set for the store's watch linger after the last stop (WithWatchLinger).
// Notices may be lost (a session that expires drops its watches); waiters
// retry at the end of their sleep all the same.
func (s *Store) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return c, func() {}
	}
	w := s.watches[key]
	if w == nil {
		w = &keyWatch{subs: make(map[chan struct{}]struct{}), kick: make(chan struct{}, 1)}
		s.watches[key] = w
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watch(key, w)
		}()
	}
	w.subs[c] = struct{}{}
	var once bool
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if once {
			return
		}
		once = true
		delete(w.subs, c)
		if len(w.subs) == 0 {
			w.since = time.Now()
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	}
}

// notify wakes every watcher of w.
func (s *Store) notify(w *keyWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range w.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// idle reports whether w has had no watcher for the linger, and if so
// removes it (the caller's goroutine then ends); otherwise it returns how
// long w may still linger (0: it has watchers).
func (s *Store) idle(key string, w *keyWatch) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(w.subs) > 0 {
		return false, 0
	}
	left := s.linger - time.Since(w.since)
	if left > 0 {
		return false, left
	}
	delete(s.watches, key)
	return true, 0
}

// watchState is what the loop of a key's watch waits for.
type watchState struct {
	event   <-chan zk.Event // the watch set by the last read
	expires time.Time       // when the holder's TTL runs out, by this process's clock; zero: none
	holder  string          // the holder's path, "" if none
}

// watch is the goroutine of w: it finds the key's holder, watches its node,
// and wakes the waiters when it goes, until the watch has had no watcher
// for the linger or the store is closed.
func (s *Store) watch(key string, w *keyWatch) {
	dir := s.dir(key)
	var st watchState
	retry := time.NewTimer(0)
	defer retry.Stop()
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	var expiry <-chan time.Time
	var expiryTimer *time.Timer
	recheck := true // read the holder seen before first
	defer func() {
		if expiryTimer != nil {
			expiryTimer.Stop()
		}
	}()
	for {
		// Wait for what may change the holder: the watch, the holder's
		// expiry, a retry after an error, the end of the linger.
		select {
		case <-s.ctx.Done():
			return
		case <-w.kick:
			if done, left := s.idle(key, w); done {
				return
			} else if left > 0 {
				linger.Reset(left)
			}
			continue
		case <-linger.C:
			if done, left := s.idle(key, w); done {
				return
			} else if left > 0 {
				linger.Reset(left)
			}
			continue
		case <-retry.C:
		case ev := <-st.event:
			st.event = nil
			switch ev.Type {
			case zk.EventNotWatching: // the session expired, or the connection closed
				retry.Reset(retryInterval)
				continue
			case zk.EventNodeDeleted:
				recheck = false // gone: no need to read it again
			}
		case <-expiry:
			expiry = nil
			s.notify(w)
			continue // the node stays until someone deletes it: keep watching it
		}
		held := st.holder
		if !recheck {
			held = ""
		}
		recheck = true
		next, err := s.look(dir, held)
		if err != nil {
			retry.Reset(retryInterval)
			continue
		}
		if st.holder != "" && next.holder != st.holder {
			s.notify(w) // the holder we watched is gone
		}
		st = next
		if expiryTimer != nil {
			expiryTimer.Stop()
			expiry = nil
		}
		if !st.expires.IsZero() {
			expiryTimer = time.NewTimer(time.Until(st.expires))
			expiry = expiryTimer.C
		}
	}
}

// look finds the holder of the key under dir and sets a watch: a data
// watch on the holder's node, or a watch on the list of children when there
// is none (on the parent's creation when it is missing). held is the
// holder seen before, whose node is read first, alone: if it is still
// there, one round trip re-arms the watch after an Extend.
func (s *Store) look(dir, held string) (watchState, error) {
	ctx, cancel := context.WithTimeout(s.ctx, bgTimeout)
	defer cancel()
	if held != "" {
		if st, ok, err := s.watchNode(ctx, held); err != nil || ok {
			return st, err
		}
	}
	for {
		list, err := call(ctx, func() (watched, error) {
			names, _, ev, err := s.conn.ChildrenW(dir)
			return watched{names: names, event: ev}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			// Nobody holds the key: watch for its parent's creation. (Such
			// a watch stays set in the connection until the parent is
			// made, even after this goroutine has ended: rare, as a waiter
			// watches a key it found held a moment ago, and ZooKeeper
			// deletes an empty parent only after a while.)
			got, err := call(ctx, func() (watched, error) {
				ok, _, ev, err := s.conn.ExistsW(dir)
				return watched{ok: ok, event: ev}, err
			})
			if err != nil {
				return watchState{}, err
			}
			if got.ok {
				continue // made meanwhile
			}
			return watchState{event: got.event}, nil
		}
		if err != nil {
			return watchState{}, err
		}
		children := sortChildren(list.names)
		if len(children) == 0 {
			return watchState{event: list.event}, nil
		}
		st, ok, err := s.watchNode(ctx, dir+"/"+children[0].name)
		if err != nil || ok {
			return st, err
		}
		// Gone meanwhile: list again.
	}
}

// watchNode sets a data watch on the node at p; ok is false if it does not
// exist.
func (s *Store) watchNode(ctx context.Context, p string) (watchState, bool, error) {
	got, err := call(ctx, func() (watched, error) {
		data, st, ev, err := s.conn.GetW(p)
		return watched{data: data, stat: st, event: ev}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return watchState{}, false, nil
	case err != nil:
		return watchState{}, false, err
	}
	st := watchState{event: got.event, holder: p}
	if ms, ok := decodeTTL(got.data); ok {
		st.expires = time.UnixMilli(got.stat.Mtime + ms + 1 - s.skew.Load())
	}
	return st, true, nil
}

// watched is the result of a read that sets a watch.
type watched struct {
	names []string
	data  []byte
	ok    bool
	stat  *zk.Stat
	event <-chan zk.Event
}
