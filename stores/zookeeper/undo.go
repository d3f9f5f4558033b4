package zkstore

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file is the clean-up of failed attempts (see core.Store.TryAcquire):
// the node an attempt may have created is deleted in the background.
//
// A clean-up that finds nothing proves little: the create may still be on
// its way (a frozen server runs what it had received when it resumes). So
// a clean-up that does not know its node's path looks for it by the token
// in its name (Curator's protected mode) every undoInterval until one of
// these:
//
//   - it deleted the node;
//   - the session that sent the create has ended: ZooKeeper deleted its
//     ephemeral nodes, the late one too;
//   - the server has answered for a whole TTL of the attempt since its
//     first answer: a late node has arrived by then, or else it is dead by
//     its TTL when it comes, and the next contender deletes it;
//   - undoHorizon has passed since the attempt;
//   - the store is closed.
//
// A create cut short by its context goes on in go-zookeeper until the
// server answers or the connection gives up: the clean-up waits for that
// outcome first, which names the node's path if it was created.

const (
	undoInterval = 250 * time.Millisecond
	undoHorizon  = 10 * time.Minute
	maxUndos     = 1024
)

// undo deletes in the background what an attempt of token under dir, sent
// at sent with ttl while session was the connection's, may have created:
// the node at p if known, else the node of token, found by its name once
// the create's late outcome (pending, if the create was cut short) is in.
func (s *Store) undo(dir, token, p string, pending <-chan result[string], session int64, ttl time.Duration, sent time.Time) {
	s.mu.Lock()
	if s.closed || s.undos >= maxUndos {
		s.mu.Unlock()
		return
	}
	s.undos++
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			s.undos--
			s.mu.Unlock()
			s.wg.Done()
		}()
		s.sweep(dir, escape(token), p, pending, session, ttl, sent)
	}()
}

// sweep is the loop of one clean-up (see undo).
func (s *Store) sweep(dir, etoken, p string, pending <-chan result[string], session int64, ttl time.Duration, sent time.Time) {
	horizon := time.NewTimer(time.Until(sent.Add(max(ttl, undoHorizon))))
	defer horizon.Stop()
	if pending != nil {
		select {
		case r := <-pending:
			switch {
			case r.err == nil:
				p = r.v
			case !mayHaveApplied(r.err):
				return
			}
		case <-s.ctx.Done():
			return
		case <-horizon.C:
			return
		}
	}
	var until time.Time // set once the server answered without the node
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-horizon.C:
			return
		case <-tick.C:
		}
		if now := s.conn.SessionID(); session != 0 && now != session {
			return // the session ended, its ephemeral nodes with it
		}
		if !until.IsZero() && time.Now().After(until) {
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, bgTimeout)
		if p == "" {
			list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
			if err == nil {
				children := sortChildren(list.names)
				if i := findToken(children, etoken); i >= 0 {
					p = dir + "/" + children[i].name
				}
			}
			if p == "" && (err == nil || errors.Is(err, zk.ErrNoNode)) && until.IsZero() {
				until = time.Now().Add(ttl)
			}
		}
		if p != "" {
			err := s.delete(ctx, p, -1)
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				cancel()
				return
			}
		}
		cancel()
		tick.Reset(undoInterval)
	}
}
