package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/core"
)

// This file is the store's core.MultiAcquirer: several keys in one
// transaction.

// maxAllKeys is the largest number of keys TryAcquireAll takes in one
// transaction: etcd refuses a transaction of more than --max-txn-ops
// compares (128 by default), and each key has two.
const maxAllKeys = 64

// TryAcquireAll is part of core.MultiAcquirer: it takes every key for token
// in one transaction, which compares, for each key, that it does not exist
// and that no share of it is live, and then puts them all, bound to one
// lease of ttl (rounded as TryAcquire rounds it); else it reads them. So it
// takes all of them or none. With fenced, each key's fence is its create
// revision: the transaction's revision, the same for all of them.
//
// The lease is shared by the keys, so it is never kept for reuse
// (WithLeasePool) once one of them is released. When the keys all hold
// token already (an attempt sent again), they are bound to a lease of this
// attempt's TTL in one more transaction. More than 64 keys (etcd's default
// limit of operations in a transaction), or a transaction that etcd refuses
// as too large, is an error wrapping core.ErrNotAtomic, and nothing is
// taken. Duplicate keys are an error wrapping core.ErrInvalidOption.
func (s *Store) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if len(keys) == 0 {
		return false, nil, fmt.Errorf("etcdstore: acquire all: %w: no keys", core.ErrInvalidOption)
	}
	if len(keys) > maxAllKeys {
		return false, nil, fmt.Errorf("etcdstore: acquire all: %w: %d keys, more than %d in one transaction", core.ErrNotAtomic, len(keys), maxAllKeys)
	}
	ks := make([]string, len(keys))
	seen := make(map[string]bool, len(keys))
	for i, key := range keys {
		if seen[key] {
			return false, nil, fmt.Errorf("etcdstore: acquire all: %w: the key %q is given twice", core.ErrInvalidOption, key)
		}
		seen[key] = true
		ks[i] = s.prefix + key
	}
	secs := seconds(ttl)
	start := time.Now()
	resp, l, err := s.txnWithLease(ctx, secs, func(id clientv3.LeaseID) clientv3.Op {
		cmps := make([]clientv3.Cmp, 0, 2*len(ks))
		puts := make([]clientv3.Op, len(ks))
		gets := make([]clientv3.Op, len(ks))
		for i, k := range ks {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0), noShares(k))
			puts[i] = clientv3.OpPut(k, token, clientv3.WithLease(id))
			gets[i] = clientv3.OpGet(k)
		}
		return clientv3.OpTxn(cmps, puts, gets)
	})
	switch {
	case errors.Is(err, errLeaseLost):
		return false, nil, nil
	case errors.Is(err, rpctypes.ErrTooManyOps):
		s.put(l) // refused: nothing is bound to it
		return false, nil, fmt.Errorf("etcdstore: acquire all: %w: %w", core.ErrNotAtomic, err)
	case err != nil:
		s.undo(ctx, l.id, start, l.expiry())
		return false, nil, s.errorf("acquire all", keys[0], err)
	case resp.Succeeded:
		return true, s.holdAll(ks, token, l, fenced, resp.Header.Revision, nil), nil
	}
	mine, twice := 0, true
	revs := make([]int64, len(ks))
	for i := range ks {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 1 && string(kvs[0].Value) == token {
			mine++
			revs[i] = kvs[0].CreateRevision
			twice = twice && l.id != clientv3.NoLease && clientv3.LeaseID(kvs[0].Lease) == l.id
		}
	}
	switch {
	case mine == len(ks) && twice:
		// This very transaction, applied twice (see TryAcquire).
		return true, s.holdAll(ks, token, l, fenced, 0, revs), nil
	case mine == len(ks):
		// An attempt sent again: bind the keys to a lease of this TTL.
		s.put(l)
		return s.reattachAll(ctx, keys, ks, token, secs, fenced, revs)
	case mine > 0:
		// Some of them only: an attempt sent again that lost some keys
		// since (they expired). Take none.
		for _, key := range keys {
			s.Undo(ctx, key, token, ttl, start)
		}
	}
	s.put(l)
	return false, nil, nil
}

// holdAll records l as the lease of the keys ks of token, shared by them,
// and returns their fences: rev for each, or revs.
func (s *Store) holdAll(ks []string, token string, l lease, fenced bool, rev int64, revs []int64) []int64 {
	var fences []int64
	if fenced {
		fences = make([]int64, len(ks))
	}
	for i, k := range ks {
		s.holdLease(k, token, heldLease{lease: l, multi: true})
		if fenced {
			fences[i] = rev
			if revs != nil {
				fences[i] = revs[i]
			}
		}
	}
	return fences
}

// reattachAll binds the keys ks, which hold token, to a lease of secs in
// one transaction guarded by their values (see reattach).
func (s *Store) reattachAll(ctx context.Context, keys, ks []string, token string, secs int64, fenced bool, revs []int64) (bool, []int64, error) {
	start := time.Now()
	resp, l, err := s.txnWithLease(ctx, secs, func(id clientv3.LeaseID) clientv3.Op {
		cmps := make([]clientv3.Cmp, len(ks))
		puts := make([]clientv3.Op, len(ks))
		for i, k := range ks {
			cmps[i] = clientv3.Compare(clientv3.Value(k), "=", token)
			puts[i] = clientv3.OpPut(k, token, clientv3.WithLease(id))
		}
		return clientv3.OpTxn(cmps, puts, nil)
	})
	switch {
	case errors.Is(err, errLeaseLost):
		return false, nil, nil
	case err != nil:
		s.undo(ctx, l.id, start, l.expiry())
		return false, nil, s.errorf("acquire all", keys[0], err)
	case !resp.Succeeded:
		s.put(l)
		return false, nil, nil
	}
	for _, k := range ks {
		s.forget(k, token)
	}
	return true, s.holdAll(ks, token, l, fenced, 0, revs), nil
}
