package etcdstore

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the store's core.Notifier: waiters watch their key's
// deletion with an etcd watch instead of waiting out their sleep. One watch
// per key with waiters, shared by them, ended when the last one stops.

const (
	// rewatchPause is the pause before a watch that ended on its own (its
	// member lost its leader, the client was closed) is made again.
	rewatchPause = 500 * time.Millisecond
	// busyMemory is how long the revision at which a key was seen held is
	// kept for the watch that its waiter may start next.
	busyMemory = 10 * time.Second
	// maxBusy bounds the number of such revisions kept.
	maxBusy = 4096
)

// group is the shared watch of one key and its waiters' channels.
type group struct {
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
}

// busy is the revision at which a key was last seen held, and when.
type busy struct {
	rev int64
	at  time.Time
}

// Announce is part of core.Notifier. A Store needs no announcing: every
// deletion of a key reaches its watchers, whichever client made it, and so
// does the expiry of its lease. Announce only lets the store remember the
// revision at which an attempt found a key held, so that the watch its
// waiter starts next begins there and misses no release in between.
func (s *Store) Announce() { s.announced.Store(true) }

// Watch returns a channel that receives a value when key is deleted, or one
// of its shares (see Sharer in the package documentation): by a release
// through any client, or by the expiry of its holder's lease. The
// watchers of one key share one etcd watch of the key's deletions, started
// at the revision at which this store last found the key held (when that
// was recent and Announce was called), so that a release in between is not
// missed; it ends when the last watcher calls stop. Notices may still be
// lost (a watch that its member ended is started again after a pause).
// After Close, the channel never receives.
func (s *Store) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return c, func() {}
	}
	g := s.groups[key]
	if g == nil {
		ctx, cancel := context.WithCancel(s.ctx)
		g = &group{subs: make(map[chan struct{}]struct{}), cancel: cancel}
		s.groups[key] = g
		var rev int64
		if b, ok := s.busyRev[key]; ok && time.Since(b.at) < busyMemory {
			rev = b.rev
		}
		delete(s.busyRev, key)
		s.wg.Add(1)
		go s.watch(ctx, key, g, rev)
	}
	g.subs[c] = struct{}{}
	var once sync.Once
	return c, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(g.subs, c)
			if len(g.subs) == 0 && s.groups[key] == g {
				delete(s.groups, key)
				g.cancel()
			}
		})
	}
}

// sawHeld records that an attempt found key held at revision rev.
func (s *Store) sawHeld(key string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, watched := s.groups[key]; watched {
		return
	}
	if len(s.busyRev) >= maxBusy {
		clear(s.busyRev)
	}
	s.busyRev[key] = busy{rev: rev, at: time.Now()}
}

// watch runs the etcd watch of the deletions of key and its shares for group g until ctx ends,
// from the revision after rev when rev > 0, from now otherwise; a watch
// that ends on its own is made again after a pause, from the revision
// after the last deletion it reported.
func (s *Store) watch(ctx context.Context, key string, g *group, rev int64) {
	defer s.wg.Done()
	k := s.prefix + key
	for {
		// The range from k to the end of its holders' range: k and its
		// shares (the waiter record sorts after it).
		opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithRange(clientv3.GetPrefixRangeEnd(holders(k)))}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		// A member that loses its leader ends the watch (instead of
		// keeping it silent), so that it is made again, maybe elsewhere.
		for resp := range s.client.Watch(clientv3.WithRequireLeader(ctx), k, opts...) {
			if resp.CompactRevision != 0 {
				rev = 0 // compacted past rev: start again from now
			}
			deleted := false
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					deleted = true
					rev = max(rev, ev.Kv.ModRevision)
				}
			}
			if deleted {
				s.wake(g)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rewatchPause):
		}
	}
}

// wake sends a notice to every watcher of g that has none pending.
func (s *Store) wake(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range g.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
