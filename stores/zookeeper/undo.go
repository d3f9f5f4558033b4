package zkstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/internal/undo"
)

// This file is the clean-up of failed calls (see core.Store.TryAcquire and
// core.Undoer): the nodes they may have created or written are deleted in
// the background. internal/undo holds the queue and its rules, shared with
// the other stores; here are the ZooKeeper calls.
//
// A clean-up that finds nothing proves little: a call sent into a stalled
// server or link may still run when it resumes (a frozen server runs what
// it had received; a create or a renewal queued in a connection that is
// re-established within its session is sent then). So a clean-up is sent
// again every 250 ms until it deleted a node, the server has answered for
// a whole TTL since its first answer, a horizon has passed, or the store is
// closed. A connection's requests run in the order they were sent, so a
// clean-up sent after a late call runs after it.
//
// A clean-up deletes either every node of a token under the key's parent
// node, found by the token in their names (Curator's protected mode; a
// share's name holds its token too): the token of a failed call, which is
// never used again, or one that core.Undoer's Undo is given; or one node whose path it knows: the node of
// an attempt that did not take the key, whose token may still hold another
// node (a twin) or be sent again. An undo.Attempt's Key is the lock's key
// and its Token the target: byToken or byNode, then the token or the path.

// The kinds of target of a clean-up.
const (
	byToken = 't'
	byNode  = 'n'
)

// undoParallel bounds the clean-ups of one round in flight at once.
const undoParallel = 64

// undoCall is a clean-up's deletion in flight. It goes on until the
// connection answers or gives up, past the round that sent it: a stalled
// server is sent one deletion per clean-up at a time, not one per round,
// and a later round takes its outcome.
type undoCall struct {
	done chan struct{} // closed once out is set
	out  undo.Outcome
}

// Undo deletes the nodes of token under key (core.Undoer): the lock token
// holds, its place in key's queue, its share, or what a failed call of
// token may have created or renewed. A node of another token is never
// touched, nor the key's exclusive waiter's record, which is no token's (it
// dies after its patience). It deletes them at once within ctx if ctx has
// time left, then again in the background until it deleted one, or the
// server has answered for ttl since its first answer (a late call has run
// by then; a node it wrote later still dies by its TTL), or the store is
// closed. It never holds the caller past ctx.
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.forget(key, token)
	s.forgetK(shareKey(key, token))
	target := string(byToken) + token
	s.undos.Undo(ctx, key, target, ttl, sent, func(ctx context.Context) undo.Outcome {
		return s.undoOnce(ctx, key, target)
	})
}

// undoToken queues the clean-up of every node of token under key, a token
// that is not used again, sent at sent with ttl.
func (s *Store) undoToken(key, token string, ttl time.Duration, sent time.Time) {
	s.undos.Add(key, string(byToken)+token, ttl, sent)
}

// undoNode queues the clean-up of the node at p under key, written at sent
// with ttl.
func (s *Store) undoNode(key, p string, ttl time.Duration, sent time.Time) {
	s.undos.Add(key, string(byNode)+p, ttl, sent)
}

// sweep is a round of clean-ups (see undo.Queue): the deletion of each,
// pipelined on the connection, at most undoParallel in flight, within ctx.
func (s *Store) sweep(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	out := make([]undo.Outcome, len(batch)) // NoAnswer where ctx ends first
	sem := make(chan struct{}, undoParallel)
	var wg sync.WaitGroup
	for i, a := range batch {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return out
		}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = s.undoOnce(ctx, a.Key, a.Token)
		})
	}
	wg.Wait()
	return out
}

// undoOnce sends the deletion of target under key, or joins the one in
// flight, and waits for its outcome within ctx.
func (s *Store) undoOnce(ctx context.Context, key, target string) undo.Outcome {
	k := nodeKey{key: key, token: target}
	s.mu.Lock()
	c := s.undoing[k]
	if c == nil {
		if s.closed {
			s.mu.Unlock()
			return undo.Done // nothing is sent any more
		}
		c = &undoCall{done: make(chan struct{})}
		s.undoing[k] = c
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.out = s.remove(key, target)
			s.mu.Lock()
			delete(s.undoing, k)
			s.mu.Unlock()
			close(c.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.out
	case <-ctx.Done():
		return undo.NoAnswer
	}
}

// remove deletes target under key: the node it names, or every node of the
// token it names (listed first). It waits for the connection, or for the
// store's Close.
func (s *Store) remove(key, target string) undo.Outcome {
	if target[0] == byNode {
		return undoOutcome(s.delete(s.ctx, target[1:], -1))
	}
	dir, etoken := s.dir(key), escape(target[1:])
	list, err := call(s.ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	if err != nil {
		return undoOutcome(err)
	}
	out := undo.Answered
	for _, name := range list.names {
		if !ownedBy(name, etoken) {
			continue
		}
		switch undoOutcome(s.delete(s.ctx, dir+"/"+name, -1)) {
		case undo.Done:
			out = undo.Done
		case undo.NoAnswer:
			return undo.NoAnswer
		}
	}
	return out
}

// ownedBy reports whether the child name of a key's parent node is a node
// of the escaped token etoken: its lock or place in the queue, or its
// share. The key's exclusive waiter's record is no token's: it dies after
// its patience, or when a waiter takes the key.
func ownedBy(name, etoken string) bool {
	c, ok := parseChild(name)
	if !ok {
		return false
	}
	if c.token == etoken {
		return true
	}
	sn, ok := parseShareTag(c.token)
	return ok && sn.token == etoken
}

// undoOutcome is the outcome of a clean-up's call that returned err.
func undoOutcome(err error) undo.Outcome {
	switch {
	case err == nil:
		return undo.Done
	case errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrSessionExpired):
		// The connection is closed, or its session has ended: every
		// request sent before in the session ended with it, and
		// ZooKeeper deleted the session's ephemeral nodes.
		return undo.Done
	case isReply(err):
		return undo.Answered
	}
	return undo.NoAnswer
}

// isReply reports an error that the server sent in reply to a request:
// the server processes the connection's requests.
func isReply(err error) bool {
	for _, reply := range []error{
		zk.ErrNoNode, zk.ErrNoAuth, zk.ErrBadVersion, zk.ErrNodeExists, zk.ErrNotEmpty,
		zk.ErrNoChildrenForEphemerals, zk.ErrInvalidACL, zk.ErrAuthFailed, zk.ErrAPIError,
		zk.ErrSessionMoved, zk.ErrBadArguments, zk.ErrUnknown,
	} {
		if errors.Is(err, reply) {
			return true
		}
	}
	return false
}

// UndoShare removes token's share of key in the background, as Undo does
// (Undo removes a share as well as a lock): the Locker calls it when a
// share's release failed (core.ShareUndoer).
func (s *Store) UndoShare(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.Undo(ctx, key, token, ttl, sent)
}
