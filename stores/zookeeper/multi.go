package zkstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
)

// This file is the MultiAcquirer (core.Locker.AcquireAll): several keys in
// one step. ZooKeeper's multi-operation creates the contenders' nodes of
// every key at once, or none; each key is then settled as TryAcquire
// settles it, all keys pipelined; if one of them is busy, one more
// multi-operation deletes every node again.

var _ core.MultiAcquirer = (*Store)(nil)

// TryAcquireAll takes every key of keys for token, or none
// (core.MultiAcquirer). One multi-operation creates the token's node in
// every key's queue (all or none of them, whatever the keys: ZooKeeper
// never answers ErrNotAtomic); then every key is settled as TryAcquire
// settles it, pipelined: its children listed and its node's stat read (one
// round trip for all keys), and the nodes ahead read, and deleted if dead.
// If every node is the lowest, token holds every key, each with its fence
// (the parent's pzxid, as TryAcquire's); otherwise one more
// multi-operation deletes every node of the attempt, and it reports false.
// So an uncontended TryAcquireAll takes two round trips whatever the
// number of keys (four the first time a key's parent node is made), and a
// busy one four (the holder's node read, then the deletion), as
// TryAcquire of one key.
//
// While the attempt runs, its nodes that are the lowest hold their keys
// for a moment, as the nodes of a one-by-one attempt would: a contender of
// one of them meanwhile finds it busy. Once it returns, the token holds
// all of the keys or none.
//
// keys must be distinct and not empty. A TryAcquireAll that finds every
// key held by token already (a re-sent attempt) resets their TTLs. An
// attempt that fails after its create may have reached the server deletes
// the token's nodes of every key in the background (see undo.go).
func (s *Store) TryAcquireAll(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, nil, err
	}
	if len(keys) == 0 {
		return false, nil, errors.New("zkstore: acquire all: no keys")
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return false, nil, fmt.Errorf("zkstore: acquire all: key %q appears twice", k)
		}
		seen[k] = true
	}
	if ok, fences, err := s.renewEvery(ctx, keys, token, ttl, fenced); err != nil || ok {
		return ok, fences, err
	}
	sent := time.Now()
	session := s.conn.SessionID()
	undoAll := func() {
		for _, k := range keys {
			s.forget(k, token)
			s.undoToken(k, token, ttl, sent)
		}
	}
	paths, err := s.createAll(ctx, keys, token, encodeTTL(ttl))
	if err != nil {
		if mayHaveApplied(err) {
			undoAll()
		}
		return false, nil, wrapAll(keys, err)
	}
	verdicts := make([]verdict, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { verdicts[i], errs[i] = s.settle(ctx, s.dir(k), paths[i], token, 0, nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		undoAll()
		return false, nil, wrapAll(keys, err)
	}
	all := true
	for _, v := range verdicts {
		if v.state != lowest {
			all = false
		}
		if v.own != nil {
			s.learnSkew(v.own.Ctime, sent)
		}
	}
	if !all {
		if s.conn.SessionID() != session {
			return false, nil, wrapAll(keys, errGone)
		}
		s.dropNodes(ctx, keys, paths, ttl, sent)
		for i, v := range verdicts {
			if v.state == twin {
				// An older node of the token (a re-sent attempt whose
				// store forgot it): it goes too, by its path, as the
				// token may be used again.
				s.drop(ctx, keys[i], v.twin, ttl, sent)
			}
		}
		return false, nil, nil
	}
	var fences []int64
	if fenced {
		fences = make([]int64, len(keys))
	}
	for i, k := range keys {
		v := verdicts[i]
		s.remember(k, token, node{path: paths[i], session: v.own.EphemeralOwner, version: v.own.Version, mtime: v.own.Mtime, ttl: ttlMillis(ttl), held: true})
		if fenced {
			fences[i] = v.fence
		}
	}
	return true, fences, nil
}

// wrapAll prefixes an error of TryAcquireAll with the package.
func wrapAll(keys []string, err error) error {
	return fmt.Errorf("zkstore: acquire all %q: %w", keys, err)
}

// renewEvery is TryAcquireAll of a token that the store knows holds every
// key (a re-sent attempt): it renews every node, pipelined. If one of them
// is lost, it releases the others and reports false: TryAcquireAll then
// makes a fresh attempt.
func (s *Store) renewEvery(ctx context.Context, keys []string, token string, ttl time.Duration, fenced bool) (bool, []int64, error) {
	nodes := make([]node, len(keys))
	for i, k := range keys {
		n, ok := s.lookup(k, token)
		if !ok || !n.held {
			return false, nil, nil
		}
		nodes[i] = n
	}
	oks := make([]bool, len(keys))
	fences := make([]int64, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { oks[i], fences[i], errs[i] = s.renew(ctx, lockKey(k, token), nodes[i], ttl, fenced) })
	}
	wg.Wait()
	all := true
	for _, ok := range oks {
		all = all && ok
	}
	if err := errors.Join(errs...); err != nil {
		// The token is not used again after an error: delete its nodes.
		for _, k := range keys {
			s.forget(k, token)
			s.undoToken(k, token, ttl, time.Now())
		}
		return false, nil, wrapAll(keys, err)
	}
	if !all {
		// Release the keys still held; the fresh attempt that follows may
		// use the token again, so only these nodes go, by their paths.
		for i, k := range keys {
			n, held := s.lookup(k, token)
			if !oks[i] || !held {
				continue
			}
			if _, err := s.release(ctx, lockKey(k, token), n); err != nil {
				s.forget(k, token)
				s.undoNode(k, n.path, ttl, time.Now())
			}
		}
		return false, nil, nil
	}
	if !fenced {
		fences = nil
	}
	return true, fences, nil
}

// createAll creates the node of token under every key's parent node in one
// multi-operation, making the parent nodes first when one is missing, and
// returns their paths in the order of keys.
func (s *Store) createAll(ctx context.Context, keys []string, token string, data []byte) ([]string, error) {
	ops := make([]any, len(keys))
	for i, k := range keys {
		ops[i] = &zk.CreateRequest{Path: s.dir(k) + "/" + nodePrefix + escape(token) + "-", Data: data, Acl: s.acl, Flags: zk.FlagEphemeral | zk.FlagSequence}
	}
	for try := 0; ; try++ {
		res, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
		if errors.Is(err, zk.ErrNoNode) && try < 3 {
			// A parent node is missing: make those that are.
			errs := make([]error, len(keys))
			var wg sync.WaitGroup
			for i, k := range keys {
				if res != nil && i < len(res) && !errors.Is(res[i].Error, zk.ErrNoNode) {
					continue
				}
				wg.Go(func() { errs[i] = s.makeDir(ctx, s.dir(k)) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(res) != len(keys) {
			return nil, errors.New("multi-operation with a short reply")
		}
		paths := make([]string, len(keys))
		for i, r := range res {
			paths[i] = r.String
		}
		return paths, nil
	}
}

// dropNodes deletes the nodes of a TryAcquireAll that did not take every
// key, in one multi-operation, or leaves them to clean-ups in the
// background if it cannot.
func (s *Store) dropNodes(ctx context.Context, keys, paths []string, ttl time.Duration, sent time.Time) {
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
	}
	_, err := call(ctx, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	if err == nil {
		return
	}
	// One of them may be gone already (found dead, or with the session):
	// delete each on its own.
	for i, p := range paths {
		s.drop(ctx, keys[i], p, ttl, sent)
	}
}
