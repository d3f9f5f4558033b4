package etcdstore

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the store's memory of its leases: the pool of unused ones
// (WithLeasePool) and the leases of the locks it holds, so that an Extend
// is a keep-alive of a known lease and a Release can keep its lease for
// reuse.
//
// A lease serves one acquisition at a time: it is taken out of the pool
// by one transaction and put back only when no key is bound to it any more
// (the attempt found the key held, the key was released, or it moved to
// another lease). So revoking or renewing a lease acts on one lock only.
// (A renewal of a holder's Extend still on its way while the same holder
// releases can reach the lease after another acquisition of this store
// took it: it then renews that lock's lease, which the acquisition has just
// renewed itself, by the same TTL.)

// minSweep is the least number of held entries at which expired ones are
// swept.
const minSweep = 1024

// usable reports whether l may be reused at now: within the first half of
// its TTL since it was last renewed, so that the renewal sent in parallel
// with the next transaction nearly always reaches it alive (and when it does
// not, the transaction fails with no effect, and is retried with a new
// grant).
func (l lease) usable(now time.Time) bool {
	return l.id != clientv3.NoLease && now.Sub(l.fresh) < time.Duration(l.ttl)*time.Second/2
}

// take returns a kept lease for a TTL of secs seconds, the newest first, and
// whether there was one.
func (s *Store) take(secs int64) (lease, bool) {
	ttl := s.leaseSecs(secs)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	spares := s.pool[ttl]
	for n := len(spares); n > 0; n = len(spares) {
		l := spares[n-1]
		spares[n-1] = lease{}
		spares = spares[:n-1]
		s.pooled--
		if l.usable(now) {
			s.pool[ttl] = spares
			return l, true
		}
		// The older ones are staler still: they expire on the server.
		s.pooled -= len(spares)
		clear(spares)
		spares = spares[:0]
	}
	delete(s.pool, ttl)
	return lease{}, false
}

// put keeps l, a lease with no key bound to it, for reuse. A full pool
// drops the oldest lease of l's TTL, or l itself; a dropped lease expires
// on the server.
func (s *Store) put(l lease) {
	if !l.usable(time.Now()) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.spares == 0 {
		return
	}
	spares := s.pool[l.ttl]
	if s.pooled >= s.spares {
		if len(spares) == 0 {
			return
		}
		copy(spares, spares[1:])
		spares = spares[:len(spares)-1]
		s.pooled--
	}
	s.pool[l.ttl] = append(spares, l)
	s.pooled++
}

// hold records l as the lease of the lock of token on key k.
func (s *Store) hold(k, token string, l lease) {
	s.holdLease(k, token, heldLease{lease: l})
}

// holdLease records h as the lease of the lock of token on key k.
func (s *Store) holdLease(k, token string, h heldLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[heldKey{k, token}] = h
	if len(s.held) < s.sweepAt {
		return
	}
	// Locks that expired without a release leave their entries: drop those
	// whose lease has expired, amortized over the inserts.
	now := time.Now()
	for hk, h := range s.held {
		if now.Sub(h.fresh) > time.Duration(h.ttl)*time.Second {
			delete(s.held, hk)
		}
	}
	for hk, ck := range s.shares {
		if _, ok := s.held[heldKey{ck, hk.token}]; !ok {
			delete(s.shares, hk)
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.held))
}

// holdShare records l as the lease of token's share of key k, kept in the
// etcd key ck.
func (s *Store) holdShare(k, ck, token string, l lease) {
	s.mu.Lock()
	s.shares[heldKey{k, token}] = ck
	s.mu.Unlock()
	s.hold(ck, token, l)
}

// shareKey returns the etcd key of token's share of key k, if this store
// took it.
func (s *Store) shareKey(k, token string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ck, ok := s.shares[heldKey{k, token}]
	return ck, ok
}

// forgetShare drops the memory of token's share of key k.
func (s *Store) forgetShare(k, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shares, heldKey{k, token})
}

// renewed records that lease id of the lock of token on key k was renewed
// at sent, unless the lock was released meanwhile.
func (s *Store) renewed(k, token string, id clientv3.LeaseID, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hk := heldKey{k, token}
	if h, ok := s.held[hk]; ok && h.id == id && sent.After(h.fresh) {
		h.fresh = sent
		s.held[hk] = h
	}
}

// heldLease returns the lease of the lock of token on key k, if this store
// took it.
func (s *Store) heldLease(k, token string) (heldLease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[heldKey{k, token}]
	return h, ok
}

// forget drops and returns the lease of the lock of token on key k.
func (s *Store) forget(k, token string) (heldLease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hk := heldKey{k, token}
	h, ok := s.held[hk]
	delete(s.held, hk)
	return h, ok
}
