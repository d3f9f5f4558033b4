package redisstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/reqlock/reqlock/lockstore"
)

// This file is Redlock's view of its locks for operators
// (lockstore.Inspector), over the Inspectors of its nodes.

var _ lockstore.Inspector = (*Redlock)(nil)

// inspector returns node i as a lockstore.Inspector, or an error.
func (r *Redlock) inspector(i int) (lockstore.Inspector, error) {
	in, ok := r.nodes[i].(lockstore.Inspector)
	if !ok {
		return nil, fmt.Errorf("redisstore: Redlock: store %d (%T) cannot list or inspect its locks (lockstore.Inspector)", i, r.nodes[i])
	}
	return in, nil
}

// redlockCursor is the state of a Redlock listing between List calls: the
// node being listed, its own cursor, and how many nodes could not be
// listed so far.
type redlockCursor struct {
	Node   int    `json:"i"`
	Cursor string `json:"c,omitempty"`
	Failed int    `json:"f,omitempty"`
}

const redlockCursorTag = "rq1."

// List returns the keys held on any of the nodes (the union of their
// listings) that begin with prefix, at most limit of them, and the cursor
// of the next page: the nodes are listed one after the other, each by its
// own List, and a key that a node before holds too is left out, as it was
// listed with that node (a key held on a quorum is listed once). A key
// that only a minority of nodes holds (an attempt that failed, a lease
// being lost) is listed as well: Inspect tells whether a quorum holds it.
// A node that cannot be listed is skipped while a quorum of nodes is left
// (its keys are held on a quorum of the others too); past that, List fails
// with a storage error.
func (r *Redlock) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("%w: redisstore: Redlock: list limit %d is out of 1..%d", lockstore.ErrInvalidOption, limit, lockstore.MaxListLimit)
	}
	cur, err := r.decodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	var errs []error
	for cur.Node < len(r.nodes) {
		in, err := r.inspector(cur.Node)
		if err != nil {
			return nil, "", err
		}
		keys, next, err := in.List(ctx, prefix, cur.Cursor, limit)
		if errors.Is(err, lockstore.ErrInvalidOption) {
			return nil, "", fmt.Errorf("redisstore: Redlock: node %d: %w", cur.Node, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", cur.Node, err))
			if cur.Failed++; cur.Failed > len(r.nodes)-r.quorum {
				return nil, "", &quorumError{failed: cur.Failed, need: r.quorum, errs: errors.Join(errs...)}
			}
			cur.Node, cur.Cursor = cur.Node+1, ""
			continue
		}
		keys = r.firstHeld(ctx, cur.Node, keys)
		if next == "" {
			cur.Node, cur.Cursor = cur.Node+1, ""
		} else {
			cur.Cursor = next
		}
		if cur.Node == len(r.nodes) {
			return keys, "", nil
		}
		return keys, cur.encode(), nil
	}
	return nil, "", nil
}

// firstHeld returns the keys that no node before node holds now. A node
// that cannot tell counts as not holding them: a key may then come twice.
func (r *Redlock) firstHeld(ctx context.Context, node int, keys []string) []string {
	if node == 0 || len(keys) == 0 {
		return keys
	}
	before := make([][]bool, node)
	var wg sync.WaitGroup
	for j := range node {
		wg.Go(func() {
			before[j] = r.heldOn(ctx, j, keys)
		})
	}
	wg.Wait()
	out := keys[:0:0]
	for i, k := range keys {
		seen := false
		for j := range node {
			seen = seen || before[j][i]
		}
		if !seen {
			out = append(out, k)
		}
	}
	return out
}

// heldOn reports which of keys node j holds: one pipeline on a Redis store
// (TYPE), an Inspect per key on another Inspector. Failures count as not
// held.
func (r *Redlock) heldOn(ctx context.Context, j int, keys []string) []bool {
	held := make([]bool, len(keys))
	switch n := r.nodes[j].(type) {
	case *Store:
		if h, err := n.strings(ctx, keys); err == nil {
			copy(held, h)
		}
	case lockstore.Inspector:
		for i, k := range keys {
			st, err := n.Inspect(ctx, k)
			held[i] = err == nil && st.Held()
		}
	}
	return held
}

func (c redlockCursor) encode() string {
	b, _ := json.Marshal(c) // an int, a string and an int: never fails
	return redlockCursorTag + base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of List; "" begins the listing.
func (r *Redlock) decodeCursor(s string) (redlockCursor, error) {
	var c redlockCursor
	if s == "" {
		return c, nil
	}
	bad := fmt.Errorf("%w: redisstore: Redlock: cursor %q was not handed out by List", lockstore.ErrInvalidOption, s)
	raw, ok := strings.CutPrefix(s, redlockCursorTag)
	if !ok {
		return c, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Node < 0 || c.Node >= len(r.nodes) || c.Failed < 0 || c.Failed > len(r.nodes)-r.quorum {
		return redlockCursor{}, bad
	}
	return c, nil
}

// Inspect returns the state of key as a quorum sees it: Inspect on every
// node in parallel (returning once a quorum answered, after a grace as
// long again, as the lock's operations do), then the holders whose token a
// quorum of the nodes hold, each with the smallest TTL among those nodes
// (the lock is held until the first of them expires, as far as a quorum
// goes), and the highest fence of the nodes (Redlock's fence is the
// highest of a quorum). A holder whose quorum counts a node that did not
// answer is not reported. Redlock keeps no fair queue and no shares: no
// waiters, no writer. Fewer than a quorum of answers is a storage error.
func (r *Redlock) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	for i := range r.nodes {
		if _, err := r.inspector(i); err != nil {
			return lockstore.KeyState{}, err
		}
	}
	results := r.fanout(ctx, func(ctx context.Context, n lockstore.Store) nodeResult {
		st, err := n.(lockstore.Inspector).Inspect(ctx, key)
		return nodeResult{ok: err == nil, err: err, state: st}
	})
	ok, failed, _, errs := tally(results)
	if ok < r.quorum {
		return lockstore.KeyState{}, fmt.Errorf("redisstore: Redlock: inspect %s: %w", key, &quorumError{failed: failed, need: r.quorum, errs: errs})
	}
	st := lockstore.KeyState{Key: key}
	seen := make(map[string]*lockstore.HolderState)
	count := make(map[string]int)
	var tokens []string
	for _, res := range results {
		if !res.ok {
			continue
		}
		st.Fence = max(st.Fence, res.state.Fence)
		for _, h := range res.state.Holders {
			if !h.Exclusive {
				continue
			}
			if prev, ok := seen[h.Token]; ok {
				prev.TTL = min(prev.TTL, h.TTL)
			} else {
				seen[h.Token] = &h
				tokens = append(tokens, h.Token)
			}
			count[h.Token]++
		}
	}
	slices.Sort(tokens)
	for _, t := range tokens {
		if count[t] >= r.quorum {
			st.Holders = append(st.Holders, *seen[t])
		}
	}
	return st, nil
}
