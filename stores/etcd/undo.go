package etcdstore

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file is the clean-up of failed attempts (see TryAcquire): the
// attempt's lease is revoked. A revocation is a compare-and-delete by
// ownership, since the lease serves this attempt alone, and unlike a
// compare-and-delete of a key it is proof against a late write: once the
// lease is gone, a transaction of the attempt that reaches the server later
// fails instead of setting the key. So one confirmed revocation (or the
// server's word that the lease is unknown: it expired) ends a clean-up.

const (
	// undoInterval is the pause between two revocations of a clean-up.
	undoInterval = 250 * time.Millisecond
	// undoCall bounds a revocation when the attempt's context had no
	// deadline to take the I/O timeout from.
	undoCall = 2 * time.Second
	// maxUndos bounds the clean-ups running in the background; beyond it a
	// failed attempt's lease is left to expire.
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
	call := undoCall
	if dl, ok := ctx.Deadline(); ok && dl.After(start) {
		call = dl.Sub(start)
	}
	if ctx.Err() == nil && s.revoke(ctx, id) {
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
			done := s.revoke(ctx, id)
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
