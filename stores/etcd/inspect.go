package etcdstore

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/lockstore"
)

// This file is the store's lockstore.Inspector: List and Inspect, which
// only read.

var _ lockstore.Inspector = (*Store)(nil)

// maxLeaseLookups bounds the leases whose TTL one Inspect asks etcd for
// (LeaseTimeToLive, one round trip each, leaseLookups at a time): a holder
// beyond them is reported with a TTL of 0 (unknown).
const (
	maxLeaseLookups = 256
	leaseLookups    = 8
)

// List is part of lockstore.Inspector: it returns the held lock keys that
// begin with prefix, from one range read of at most limit etcd keys, in key
// order, from the cursor's place on (linearizable, keys only). The range
// holds the lock keys and their companion keys (shares, waiter records),
// which sort right after their lock key: a lock key is listed when it
// exists (an exclusive holder) or when a share key of it does, once, and a
// waiter record alone is not listed. A page may therefore hold fewer keys
// than limit (a lock with many shares fills a page with one key). The
// cursor is the last etcd key the page read, encoded (base64url): a cursor
// that does not decode to a key under prefix is an error wrapping
// lockstore.ErrInvalidOption, as is a limit outside 1..MaxListLimit.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("etcdstore: list %q: %w: the limit %d is not within 1..%d", prefix, lockstore.ErrInvalidOption, limit, lockstore.MaxListLimit)
	}
	p := s.prefix + prefix
	start := p
	var after string // the lock key of the cursor's etcd key: listed already
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !strings.HasPrefix(string(raw), prefix) {
			return nil, "", fmt.Errorf("etcdstore: list %q: %w: the cursor %q is not one this listing handed out", prefix, lockstore.ErrInvalidOption, cursor)
		}
		start = s.prefix + string(raw) + "\x00" // the next key in etcd's byte order
		after, _ = lockOf(string(raw))
	}
	resp, err := s.client.Get(ctx, start,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(p)),
		clientv3.WithKeysOnly(),
		clientv3.WithLimit(int64(limit)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, "", s.errorf("list", prefix, err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		lk, waiter := lockOf(strings.TrimPrefix(string(kv.Key), s.prefix))
		switch {
		case waiter, cursor != "" && lk == after, !strings.HasPrefix(lk, prefix):
		case len(keys) > 0 && keys[len(keys)-1] == lk: // another share of it
		default:
			keys = append(keys, lk)
		}
	}
	next := ""
	if resp.More && len(resp.Kvs) > 0 {
		last := strings.TrimPrefix(string(resp.Kvs[len(resp.Kvs)-1].Key), s.prefix)
		next = base64.RawURLEncoding.EncodeToString([]byte(last))
	}
	return keys, next, nil
}

// lockOf returns the lock key of rel, an etcd key without the store's
// prefix: rel itself, or the lock key of a share key (the lock key, a NUL
// byte, "h/s/<token>" or "h/p/<n>/<slot>") or of a waiter record (the lock
// key, a NUL byte, "w"), for which waiter is set.
func lockOf(rel string) (key string, waiter bool) {
	if k, ok := strings.CutSuffix(rel, "\x00w"); ok {
		return k, true
	}
	i := strings.LastIndex(rel, "\x00h/")
	if i < 0 {
		return rel, false
	}
	if _, _, ok := parseShare(rel[i+len("\x00h/"):]); ok {
		return rel[:i], false
	}
	return rel, false
}

// parseShare reads the end of a share key after the holders' range's
// prefix: "s/<token>" (a shared hold) or "p/<n>/<slot>" (a permit).
func parseShare(rest string) (h lockstore.Hold, slot int, ok bool) {
	if t, ok := strings.CutPrefix(rest, "s/"); ok {
		return lockstore.Hold{}, 0, t != ""
	}
	p, ok := strings.CutPrefix(rest, "p/")
	if !ok {
		return lockstore.Hold{}, 0, false
	}
	ns, ss, ok := strings.Cut(p, "/")
	if !ok {
		return lockstore.Hold{}, 0, false
	}
	n, err1 := strconv.Atoi(ns)
	slot, err2 := strconv.Atoi(ss)
	if err1 != nil || err2 != nil || n < 1 || slot < 0 || slot >= n {
		return lockstore.Hold{}, 0, false
	}
	return lockstore.Hold{N: n}, slot, true
}

// holderKV is a holder that Inspect read, with its lease and revisions.
type holderKV struct {
	lockstore.HolderState
	lease  clientv3.LeaseID
	create int64 // its key's create revision: the order of shared holds
}

// Inspect is part of lockstore.Inspector: one range read of key's etcd key
// and its companion keys (the holders' range and the waiter record, which
// sort right after it), then the TTL left of each holder's lease
// (LeaseTimeToLive, one round trip per distinct lease, up to 8 at a time
// and 256 in all: holders beyond that have a TTL of 0). A holder whose
// lease expired between the two reads is left out.
//
// The holders are the exclusive holder (the key's value) or the shares,
// permits in slot order and shared holds in the order they were taken
// (their keys' create revisions). Each holder's Fence is its key's mod
// revision: the fence its acquisition drew, or its last fenced Extend (an
// Extend to another TTL binds the key to a new lease, which moves it too);
// the key's Fence is the highest of its holders', 0 when it is free (etcd
// draws fences from its revision counter and keeps no per-key counter).
// Writer is the token of the exclusive holder that waits for the shares to
// drain (TryAcquireWaiting records its token). The store is no Queuer:
// Waiters is empty.
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	st := lockstore.KeyState{Key: key}
	k := s.prefix + key
	resp, err := s.client.Get(ctx, k, clientv3.WithRange(k+"\x01"))
	if err != nil {
		return st, s.errorf("inspect", key, err)
	}
	hp, wk := holders(k), waiterKey(k)
	var hs []holderKV
	for _, kv := range resp.Kvs {
		ck := string(kv.Key)
		h := holderKV{
			HolderState: lockstore.HolderState{Token: string(kv.Value), Fence: kv.ModRevision},
			lease:       clientv3.LeaseID(kv.Lease),
			create:      kv.CreateRevision,
		}
		switch {
		case ck == k:
			h.Exclusive = true
		case ck == wk:
			st.Writer = string(kv.Value)
			continue
		case strings.HasPrefix(ck, hp):
			hold, slot, ok := parseShare(ck[len(hp):])
			if !ok {
				continue
			}
			h.Hold, h.Slot = hold, slot
		default: // a key of another lock (its key has a NUL byte)
			continue
		}
		hs = append(hs, h)
	}
	slices.SortStableFunc(hs, func(a, b holderKV) int {
		return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.create, b.create))
	})
	ttls, err := s.leaseTTLs(ctx, hs)
	if err != nil {
		return st, s.errorf("inspect", key, err)
	}
	for _, h := range hs {
		ttl, ok := ttls[h.lease]
		if ok && ttl < 0 {
			continue // expired since the read
		}
		h.TTL = max(ttl, 0)
		st.Holders = append(st.Holders, h.HolderState)
		st.Fence = max(st.Fence, h.Fence)
	}
	return st, nil
}

// leaseTTLs asks etcd for the TTL left of the leases of hs (the first
// maxLeaseLookups distinct ones), leaseLookups at a time: -1 for a lease
// that has expired.
func (s *Store) leaseTTLs(ctx context.Context, hs []holderKV) (map[clientv3.LeaseID]time.Duration, error) {
	var ids []clientv3.LeaseID
	seen := make(map[clientv3.LeaseID]bool)
	for _, h := range hs {
		if h.lease != clientv3.NoLease && !seen[h.lease] && len(ids) < maxLeaseLookups {
			seen[h.lease] = true
			ids = append(ids, h.lease)
		}
	}
	ttls := make(map[clientv3.LeaseID]time.Duration, len(ids))
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, leaseLookups)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, err := s.client.TimeToLive(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				ttls[id] = -1
			case err != nil:
				errs = append(errs, err)
			case resp.TTL < 0:
				ttls[id] = -1
			default:
				ttls[id] = time.Duration(resp.TTL) * time.Second
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return ttls, nil
}
