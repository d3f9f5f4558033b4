package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/core"
)

// This file is the store's core.Sharer: shared holds and numbered permits.
//
// Each share is an etcd key of its own, bound to a lease of its own, so that
// it expires on its own, in the holders' range of its lock key k (k, a NUL
// byte, "h/"):
//
//	k \x00 h/s/<token>      a shared hold of token
//	k \x00 h/p/<n>/<slot>   permit <slot> of Permits(n), whose value is its token
//	k \x00 w                the record of a waiting exclusive holder
//
// Every transaction compares whole ranges of keys (etcd's range compares:
// "no key in [a, b)" is a create revision of 0 over the range), so that no
// marker in k is needed to keep the two kinds of holders apart: an exclusive
// acquisition puts k only if no key is in the holders' range; a share is put
// only if k does not exist, the waiter record does not exist, no share of
// another mode is live (the mode, shared or n, is part of the key), and, for
// permits, its slot's key does not exist. At most n permits are live since
// there are n slot keys. The exclusive Release, Extend and Undo compare k's
// value with their token and so never touch a share.

// holders returns the prefix of the keys of the shares of the lock key k.
func holders(k string) string { return k + "\x00h/" }

// sharedKey returns the etcd key of token's shared hold of k.
func sharedKey(k, token string) string { return holders(k) + "s/" + token }

// permitsPrefix returns the prefix of the keys of the permits of k under
// Permits(n).
func permitsPrefix(k string, n int) string { return holders(k) + "p/" + strconv.Itoa(n) + "/" }

// modePrefix returns the prefix of the keys of the shares of k in mode h.
func modePrefix(k string, h core.Hold) string {
	if h.Shared() {
		return holders(k) + "s/"
	}
	return permitsPrefix(k, h.N)
}

// waiterKey returns the etcd key of the record of a waiting exclusive
// holder of k (TryAcquireWaiting).
func waiterKey(k string) string { return k + "\x00w" }

// noneIn compares that no key is in [start, end).
func noneIn(start, end string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(start), "=", 0).WithRange(end)
}

// noShares compares that no share of k is live.
func noShares(k string) clientv3.Cmp {
	h := holders(k)
	return noneIn(h, clientv3.GetPrefixRangeEnd(h))
}

// maxShareTries bounds the transactions of one TryAcquireShare of permits
// whose slot was taken between two of them.
const maxShareTries = 8

// TryAcquireShare is part of core.Sharer: it takes a share of key for token
// in mode h, for ttl (rounded as TryAcquire rounds it), in one transaction
// that puts the share's key, bound to a lease of ttl, if key is not held
// exclusively, no exclusive holder waits (TryAcquireWaiting), no share of
// another mode is live, and (permits) the slot is free; else it reads key,
// the waiter record and the live shares. The first transaction of permits
// tries slot 0; when it is taken, the next tries the lowest free slot that
// the read shows. A token that holds a share already (an attempt sent again)
// keeps its slot, and its key is bound to a lease of this ttl. With fenced,
// the fence is the share key's create revision, drawn from etcd's revision
// counter like the fences of exclusive holds. A failed transaction's lease
// is revoked as TryAcquire's is. Live shares of another mode are an error
// wrapping core.ErrModeMismatch.
func (s *Store) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	if err := h.Check(); err != nil {
		return false, 0, 0, fmt.Errorf("etcdstore: acquire %q: %w", key, err)
	}
	k := s.prefix + key
	secs := seconds(ttl)
	mine := modePrefix(k, h)
	hp := holders(k)
	slot := 0
	for try := 1; ; try++ {
		ck := sharedKey(k, token)
		if !h.Shared() {
			ck = mine + strconv.Itoa(slot)
		}
		start := time.Now()
		resp, l, err := s.txnWithLease(ctx, secs, func(id clientv3.LeaseID) clientv3.Op {
			return clientv3.OpTxn(
				[]clientv3.Cmp{
					clientv3.Compare(clientv3.CreateRevision(k), "=", 0),
					clientv3.Compare(clientv3.CreateRevision(waiterKey(k)), "=", 0),
					noneIn(hp, mine),
					noneIn(clientv3.GetPrefixRangeEnd(mine), clientv3.GetPrefixRangeEnd(hp)),
					clientv3.Compare(clientv3.CreateRevision(ck), "=", 0),
				},
				[]clientv3.Op{clientv3.OpPut(ck, token, clientv3.WithLease(id))},
				[]clientv3.Op{clientv3.OpGet(k), clientv3.OpGet(waiterKey(k)), clientv3.OpGet(hp, clientv3.WithPrefix())},
			)
		})
		switch {
		case errors.Is(err, errLeaseLost):
			return false, 0, 0, nil
		case err != nil:
			s.undo(ctx, l.id, start, l.expiry())
			return false, 0, 0, s.errorf("acquire", key, err)
		case resp.Succeeded:
			s.holdShare(k, ck, token, l)
			return true, slot, fenceOf(fenced, resp.Header.Revision), nil
		}
		st := readShares(resp, k, token, mine, h)
		if st.own != nil {
			return s.reacquireShare(ctx, key, k, token, secs, fenced, st, l, start)
		}
		s.put(l)
		switch {
		case st.held:
		case st.other != "":
			return false, 0, 0, fmt.Errorf("etcdstore: acquire %q as %s: %w: it is held as %s", key, h, core.ErrModeMismatch, st.other)
		case st.waiter:
		case h.Shared() && try < maxShareTries:
			continue // nothing in the way any more
		case st.free >= 0 && try < maxShareTries:
			slot = st.free
			continue
		}
		if s.announced.Load() {
			s.sawHeld(key, resp.Header.Revision)
		}
		return false, 0, 0, nil
	}
}

// shares is what the failed transaction of a TryAcquireShare read.
type shares struct {
	held, waiter bool             // key is held exclusively; an exclusive holder waits
	own          *mvccpb.KeyValue // the share of the attempt's token, if any
	ownSlot      int              // its slot
	other        string           // the mode of a live share of another mode, if any
	free         int              // the lowest free slot (permits), -1 if none
}

// readShares reads the failed transaction of a TryAcquireShare of token in
// mode h (whose keys begin with mine) on k.
func readShares(resp *clientv3.TxnResponse, k, token, mine string, h core.Hold) shares {
	st := shares{
		held:   len(resp.Responses[0].GetResponseRange().GetKvs()) > 0,
		waiter: len(resp.Responses[1].GetResponseRange().GetKvs()) > 0,
		free:   -1,
	}
	used := make(map[int]bool)
	for _, kv := range resp.Responses[2].GetResponseRange().GetKvs() {
		mode, slot := shareOf(k, string(kv.Key))
		if string(kv.Value) == token {
			st.own, st.ownSlot = kv, slot
		}
		if !strings.HasPrefix(string(kv.Key), mine) {
			st.other = mode
			continue
		}
		used[slot] = true
	}
	if !h.Shared() {
		for i := range h.N {
			if !used[i] {
				st.free = i
				break
			}
		}
	}
	return st
}

// shareOf returns the mode ("shared", "permits(n)") and the slot of the
// share whose etcd key is ck, a key of k's holders' range.
func shareOf(k, ck string) (mode string, slot int) {
	rest := strings.TrimPrefix(ck, holders(k))
	if strings.HasPrefix(rest, "s/") {
		return "shared", 0
	}
	if p, ok := strings.CutPrefix(rest, "p/"); ok {
		if n, sl, ok := strings.Cut(p, "/"); ok {
			slot, _ = strconv.Atoi(sl)
			return "permits(" + n + ")", slot
		}
	}
	return fmt.Sprintf("%q", rest), 0
}

// reacquireShare ends a TryAcquireShare that found token's share live: an
// attempt sent again. l is the attempt's lease, start when it began.
func (s *Store) reacquireShare(ctx context.Context, key, k, token string, secs int64, fenced bool, st shares, l lease, start time.Time) (bool, int, int64, error) {
	ck := string(st.own.Key)
	if l.id != clientv3.NoLease && clientv3.LeaseID(st.own.Lease) == l.id {
		// This very transaction, applied twice (see TryAcquire).
		s.holdShare(k, ck, token, l)
		return true, st.ownSlot, fenceOf(fenced, st.own.CreateRevision), nil
	}
	s.put(l)
	ok, _, used, err := s.reattach(ctx, ck, token, secs, false)
	if err != nil {
		s.undo(ctx, clientv3.LeaseID(st.own.Lease), start, time.Now().Add(time.Duration(s.leaseSecs(secs))*time.Second))
		s.undo(ctx, used.id, start, used.expiry())
		return false, 0, 0, s.errorf("acquire", key, err)
	}
	if !ok {
		return false, 0, 0, nil
	}
	s.mu.Lock()
	s.shares[heldKey{k, token}] = ck
	s.mu.Unlock()
	return true, st.ownSlot, fenceOf(fenced, st.own.CreateRevision), nil
}

// findShare returns the etcd key of token's share of k: the one this store
// took, or else the one the holders' range holds (a read).
func (s *Store) findShare(ctx context.Context, op, key, k, token string) (string, bool, error) {
	if ck, ok := s.shareKey(k, token); ok {
		return ck, true, nil
	}
	resp, err := s.client.Get(ctx, holders(k), clientv3.WithPrefix())
	if err != nil {
		return "", false, s.errorf(op, key, err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == token {
			return string(kv.Key), true, nil
		}
	}
	return "", false, nil
}

// ReleaseShare is part of core.Sharer: it deletes token's share of key if
// it is live, in one transaction guarded by the share key's value (as
// Release), and reports whether it did. The share's key is the one this
// store took; a share that another Store took is looked up first (one more
// round trip).
func (s *Store) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	k := s.prefix + key
	ck, ok, err := s.findShare(ctx, "release", key, k, token)
	if err != nil || !ok {
		return false, err
	}
	ok, err = s.release(ctx, "release", key, ck, token)
	if err == nil {
		s.forgetShare(k, token)
	}
	return ok, err
}

// ExtendShare is part of core.Sharer: it resets the TTL of token's share of
// key to ttl if it is live, as Extend does for a key (a keep-alive of its
// lease, one round trip, when the TTL is the same), and with fenced draws a
// new fence: the share key's new mod revision.
func (s *Store) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	k := s.prefix + key
	ck, ok, err := s.findShare(ctx, "extend", key, k, token)
	if err != nil || !ok {
		return false, 0, err
	}
	ok, fence, err := s.extend(ctx, "extend", key, ck, token, ttl, fenced)
	if err == nil && !ok {
		s.forgetShare(k, token)
	}
	return ok, fence, err
}

// TryAcquireWaiting is part of core.Sharer: TryAcquire, whose transaction
// also deletes key's waiter record when it takes key. When it fails because
// shares of key are live, a second transaction puts the waiter record,
// bound to a lease of patience (rounded up to whole seconds, as TTLs are),
// whose value is token (Inspect reports it as the key's Writer):
// TryAcquireShare fails while it exists. Each waiting attempt puts it again,
// on the lease of the last one, renewed in parallel (one round trip; two
// with a new grant); a waiter that gives up lets it expire.
func (s *Store) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, byShares, err := s.tryAcquire(ctx, key, token, ttl, fenced, true)
	if err != nil || !byShares {
		return ok, fence, err
	}
	wk := waiterKey(s.prefix + key)
	start := time.Now()
	_, l, err := s.txnWith(ctx, seconds(patience), func(secs int64) (lease, bool) { return s.waiterLease(wk, secs) },
		func(id clientv3.LeaseID) clientv3.Op {
			return clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(wk, token, clientv3.WithLease(id))}, nil)
		})
	switch {
	case errors.Is(err, errLeaseLost):
		// Expired at once: the next attempt records the waiter again.
	case err != nil:
		s.undo(ctx, l.id, start, l.expiry())
		return false, 0, s.errorf("acquire", key, err)
	default:
		s.mu.Lock()
		s.waiting[wk] = l
		s.mu.Unlock()
	}
	return false, 0, nil
}

// waiterLease returns the lease of the waiter record wk that this store put
// last, if it has a TTL of secs and can be renewed (see usable): the next
// attempts of a waiter renew it in parallel with their put instead of
// granting a lease each. Such a lease serves waiter records of wk only, and
// is never kept in the pool: a key of another lock bound to it would keep
// the record alive. It expires by itself once no waiter renews it.
func (s *Store) waiterLease(wk string, secs int64) (lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.waiting[wk]
	if !ok || l.ttl != s.leaseSecs(secs) || !l.usable(time.Now()) {
		if len(s.waiting) >= maxBusy {
			clear(s.waiting) // they expire by themselves
		}
		delete(s.waiting, wk)
		return lease{}, false
	}
	return l, true
}
