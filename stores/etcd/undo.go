package etcdstore

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the store's background clean-ups: the clean-up of failed
// attempts (see TryAcquire), and core.Undoer, the clean-up of a lock whose
// release failed.
//
// A failed attempt's lease is revoked. A revocation is a compare-and-delete
// by ownership, since the lease serves this attempt alone, and unlike a
// compare-and-delete of a key it is proof against a late write: once the
// lease is gone, a transaction of the attempt that reaches the server later
// fails instead of setting the key. So one confirmed revocation (or the
// server's word that the lease is unknown: it expired) ends a clean-up.
//
// A lock whose release failed is deleted by the release's own transaction,
// compare-and-delete of its token, sent again: nothing can set the key to
// that token again (an acquisition's token is its own, and an Extend only
// rewrites a key that holds it), so one answer ends that clean-up too.

const (
	// undoInterval is the pause between two tries of a clean-up.
	undoInterval = 250 * time.Millisecond
	// undoCall bounds a try when the caller's context had no deadline to
	// take the I/O timeout from.
	undoCall = 2 * time.Second
	// expiryLag is how long etcd may keep a lease past its TTL: the
	// leader looks for expired leases twice a second.
	expiryLag = time.Second
	// maxUndos bounds the clean-ups running in the background; beyond it a
	// failed attempt's lease, or a lock whose release failed, is left to
	// expire.
	maxUndos = 1024
)

// undo revokes lease id of an attempt, sent at start, that failed after its
// transaction may have reached the server: at once within ctx (the
// attempt's context, whose deadline is the Locker's I/O timeout) if ctx
// has time left, then in the background every undoInterval, each call
// bounded by the attempt's I/O timeout, until etcd confirms it, or until
// the lease has expired by itself (at until, judged by this process's clock
// from its last renewal: the server may keep it a little longer, and
// expires it all the same), or the store is closed. It never holds the
// caller past ctx.
func (s *Store) undo(ctx context.Context, id clientv3.LeaseID, start, until time.Time) {
	if id == clientv3.NoLease {
		return
	}
	s.retry(ctx, start, until, func(ctx context.Context) bool { return s.revoke(ctx, id) })
}

// Undo is part of core.Undoer: it deletes key if it holds token, in the
// transaction of Release (compare-and-delete), or else token's share of key
// if this store took one (see ReleaseShare), at once within ctx if ctx
// has time left, then in the background every 250 ms, each try bounded by
// ctx's timeout (the Locker's I/O timeout), until etcd answers one (the key
// is deleted, or holds another token or none: either way nothing of
// token's is left), or until the lock has expired by itself (ttl, as the
// store holds it, after sent, and the second etcd may take to see it), or
// the store is closed. It never deletes a key that another token holds,
// and never holds the caller past ctx.
//
// The Locker calls it when a Release fails with a storage error (the
// transaction may not have reached etcd: a cut link, a member without a
// leader), so that the name is free as soon as etcd is reachable again,
// not at the end of the lock's TTL; and for a lock it holds with no lease
// left to release it.
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	k := s.prefix + key
	ck, share := s.shareKey(k, token)
	s.retry(ctx, sent, sent.Add(s.StoreTTL(ttl)+expiryLag), func(ctx context.Context) bool {
		txn := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(k), "=", token)).
			Then(clientv3.OpDelete(k))
		if share {
			// Or token's share, if this store took one.
			txn = txn.Else(clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(ck), "=", token)},
				[]clientv3.Op{clientv3.OpDelete(ck)},
				nil,
			))
		}
		if _, err := txn.Commit(); err != nil {
			return false
		}
		// Deleted, or not held by token: its lease, if this store took
		// it, expires on the server (its state is not known well enough
		// to keep it for reuse).
		s.forget(k, token)
		if share {
			s.forget(ck, token)
			s.forgetShare(k, token)
		}
		return true
	})
}

// retry runs try, a clean-up begun by a call sent at start: at once within
// ctx if ctx has time left, then in the background every undoInterval, each
// try bounded by the time ctx had from start (undoCall if it had no
// deadline), until try reports it is done, or until, or the store is
// closed. It never holds the caller past ctx.
func (s *Store) retry(ctx context.Context, start, until time.Time, try func(context.Context) bool) {
	call := undoCall
	if dl, ok := ctx.Deadline(); ok && dl.After(start) {
		call = dl.Sub(start)
	}
	if ctx.Err() == nil && try(ctx) {
		return
	}
	s.mu.Lock()
	if s.closed || s.undos >= maxUndos {
		s.mu.Unlock()
		return
	}
	s.undos++
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			s.undos--
			s.mu.Unlock()
		}()
		t := time.NewTimer(undoInterval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(s.ctx, call)
			done := try(ctx)
			cancel()
			if done || time.Now().After(until) {
				return
			}
			t.Reset(undoInterval)
		}
	}()
}

// revoke revokes lease id and reports whether it is gone: revoked now, or
// unknown to the server (expired or revoked before).
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) bool {
	_, err := s.client.Revoke(ctx, id)
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// UndoShare removes token's share of key in the background, as Undo does
// (Undo removes a share this store took as well as a lock): the Locker
// calls it when a share's release failed (core.ShareUndoer).
func (s *Store) UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.Undo(ctx, key, token, ttl, sent)
}
