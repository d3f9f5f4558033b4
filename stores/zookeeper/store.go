package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// Store keeps reqlock's locks in ZooKeeper. It implements core.Store,
// core.Notifier, core.Queuer, core.Undoer, core.Sharer (shared holds and
// permits), core.MultiAcquirer (several keys at once), lockstore.Inspector
// (List and Inspect, inspect.go) and io.Closer; build it with New.
type Store struct {
	conn    *zk.Conn
	root    string // "" for "/"
	acl     []zk.ACL
	linger  time.Duration
	session time.Duration // WithSessionTimeout; 0: unknown
	undos   *undo.Queue   // the clean-ups of failed calls (undo.go)

	ctx    context.Context // cancelled by Close: ends the background work
	cancel context.CancelFunc
	wg     sync.WaitGroup // the background goroutines

	// skew is the server's clock minus this process's, in milliseconds, as
	// last seen in the reply to a write; Watch uses it to time expiries.
	skew atomic.Int64
	// skewAt is when skew was last learned, in this process's UnixNano; 0:
	// never (inspect.go learns it then).
	skewAt atomic.Int64

	mu      sync.Mutex
	closed  bool
	nodes   map[nodeKey]node // the nodes of this store's locks
	watches map[string]*keyWatch
	undoing map[nodeKey]*undoCall // clean-ups in flight, by key and target
}

var (
	_ core.Store    = (*Store)(nil)
	_ core.Notifier = (*Store)(nil)
	_ core.Undoer   = (*Store)(nil)
)

// New returns a Store on conn, a connection that the caller made with
// zk.Connect and closes after the Store. It needs ZooKeeper 3.5.3 or later
// (container nodes). New does no I/O; a nil conn or an invalid option
// returns an error.
func New(conn *zk.Conn, opts ...Option) (*Store, error) {
	if conn == nil {
		return nil, errors.New("zkstore: New: the connection is nil")
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, fmt.Errorf("zkstore: New: option %d is nil", i))
			continue
		}
		opt(&cfg)
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		conn:    conn,
		root:    cfg.root,
		acl:     cfg.acl,
		linger:  cfg.linger,
		session: cfg.session,
		ctx:     ctx,
		cancel:  cancel,
		nodes:   make(map[nodeKey]node),
		watches: make(map[string]*keyWatch),
		undoing: make(map[nodeKey]*undoCall),
	}
	s.undos = undo.NewQueue(s.sweep, func() time.Duration { return bgTimeout })
	return s, nil
}

// Close ends the store's background work (watches, clean-ups of failed
// attempts) without waiting for a clean-up to succeed. It does not close
// the connection, which stays the caller's; locks held through the store
// stay held until they are released or expire. A Locker built with
// core.NewWithStore does not close its store: close it after the Locker.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.undos.Close()
	s.wg.Wait()
	return nil
}

// bgTimeout bounds each call of the background work.
const bgTimeout = 2 * time.Second

// retryInterval is how long the watches (Watch, Grants) wait before they
// try again after an error.
const retryInterval = 250 * time.Millisecond

// nodeKey names a lock: a key, a token, and the kind of node.
type nodeKey struct {
	key, token string
	kind       byte // lockNode or shareNode
}

// The kinds of node the store remembers.
const (
	lockNode  = 0   // an exclusive lock, or a place in the fair queue
	shareNode = 's' // a share: a shared hold or a permit (shares.go)
)

// lockKey is the nodeKey of key's exclusive lock for token.
func lockKey(key, token string) nodeKey { return nodeKey{key: key, token: token} }

// node is what the store remembers of the node of a lock it holds, so that
// Extend and Release take one round trip.
type node struct {
	path    string
	session int64 // the session of this store's connection that owns the node; 0: unknown
	version int32 // its data version after the last write
	mtime   int64 // the server's time of the last write, in ms
	ttl     int64 // the TTL written then, in ms
	held    bool  // the node was the lowest at the last look: it holds the lock

	// A queue entry's (Enqueue), for Grants:
	sent   time.Time     // when its last write was sent, by this process's clock
	want   time.Duration // the TTL its waiter asked for
	fenced bool          // whether its waiter asked for a fence

	// A share's (shares.go):
	hold core.Hold // its mode
	slot int       // its slot, for permits
}

// deadline returns the server's time after which n is dead.
func (n node) deadline() int64 { return n.mtime + n.ttl }

// remember records n as the node of key's lock for token.
func (s *Store) remember(key, token string, n node) { s.rememberK(lockKey(key, token), n) }

// rememberK records n as the node of k.
func (s *Store) rememberK(k nodeKey, n node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[k] = n
}

// markHeld records that the node at p, of key's lock for token, holds the
// lock.
func (s *Store) markHeld(key, token, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := lockKey(key, token)
	if n, ok := s.nodes[k]; ok && n.path == p {
		n.held = true
		s.nodes[k] = n
	}
}

// lookup returns the node the store remembers for key and token.
func (s *Store) lookup(key, token string) (node, bool) { return s.lookupK(lockKey(key, token)) }

// lookupK returns the node the store remembers for k.
func (s *Store) lookupK(k nodeKey) (node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[k]
	return n, ok
}

// forget drops what the store remembers for key and token.
func (s *Store) forget(key, token string) { s.forgetK(lockKey(key, token)) }

// forgetK drops what the store remembers for k.
func (s *Store) forgetK(k nodeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, k)
}

// dir returns the path of key's parent node.
func (s *Store) dir(key string) string { return s.root + "/" + escape(key) }

// checkTTL reports a TTL that no lock can have, or that outlasts the
// session timeout (see WithSessionTimeout).
func (s *Store) checkTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("zkstore: TTL %v is not positive", ttl)
	case s.session > 0 && ttl > s.session:
		return fmt.Errorf("zkstore: TTL %v is longer than the session timeout %v: a holder cut off from ZooKeeper would lose its lock with its session while its lease still looked valid: %w",
			ttl, s.session, core.ErrInvalidOption)
	}
	return nil
}

// learnSkew records the server's clock (ms) against this process's, seen
// in the reply to a call sent at sent.
func (s *Store) learnSkew(server int64, sent time.Time) {
	now := time.Now()
	mid := sent.Add(now.Sub(sent) / 2)
	s.skew.Store(server - mid.UnixMilli())
	s.skewAt.Store(now.UnixNano())
}

// TryAcquire is the acquire of Curator's InterProcessMutex recipe, with
// zero wait: it creates an EPHEMERAL_SEQUENTIAL node under key's parent
// node, named after token and holding ttl, and lists the parent's
// children. The lowest live child holds the lock. A lower child whose TTL
// has run out by the server's clock (its mtime, the time of its last
// write, plus its TTL, against the ctime of the new node) is deleted,
// guarded by the version read, so that a node extended meanwhile is never
// deleted; if a live child is lower, the new node is deleted and the key is
// busy. An uncontended acquire takes two round trips (the create; the list
// and a read of the new node's stat, pipelined), two more the first time a
// key's parent node is made.
//
// The fence is the parent's pzxid in the listing that showed the node
// lowest: the zxid of the last change of the parent's children, which
// includes the deletion of the previous holder's node, so it is higher than
// any fence the previous holder drew (see Extend).
//
// A TryAcquire that finds key held by token already, a re-sent attempt,
// resets its TTL like Extend. An attempt that fails after its create may
// have reached the server deletes the nodes of token in the background
// (found by the token in their names, Curator's protected mode) until they
// are gone or the server has answered for ttl (see undo.go and
// core.Store.TryAcquire).
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, 0, err
	}
	ok, fence, _, err := s.tryAcquire(ctx, key, token, ttl, fenced)
	return ok, fence, err
}

// seen is what an attempt of tryAcquire saw besides its outcome, for
// TryAcquireWaiting.
type seen struct {
	byShare  bool // it failed because a live share (shares.go) was ahead of its node
	noRecord bool // the listing that decided it showed no exclusive waiter's record
}

// tryAcquire is TryAcquire, and tells what the attempt saw.
func (s *Store) tryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (ok bool, fence int64, saw seen, err error) {
	if n, ok := s.lookup(key, token); ok && n.held {
		ok, fence, err := s.renew(ctx, lockKey(key, token), n, ttl, fenced)
		if err != nil || ok {
			return ok, fence, seen{}, wrap("acquire", key, err)
		}
		// The lock was lost meanwhile: a fresh attempt.
	}
	dir := s.dir(key)
	sent := time.Now()
	session := s.conn.SessionID()
	p, err := s.create(ctx, dir, token, encodeTTL(ttl))
	if err != nil {
		if mayHaveApplied(err) {
			s.undoToken(key, token, ttl, sent)
		}
		return false, 0, seen{}, wrap("acquire", key, err)
	}
	v, err := s.settle(ctx, dir, p, token, 0, nil)
	if err == nil && v.own != nil {
		s.learnSkew(v.own.Ctime, sent)
	}
	switch {
	case err != nil:
		s.undoToken(key, token, ttl, sent)
		return false, 0, seen{}, wrap("acquire", key, err)
	case v.state == lowest:
		s.remember(key, token, node{path: p, session: v.own.EphemeralOwner, version: v.own.Version, mtime: v.own.Mtime, ttl: ttlMillis(ttl), held: true})
		saw := seen{noRecord: v.noRecord}
		if !fenced {
			return true, 0, saw, nil
		}
		return true, v.fence, saw, nil
	case v.state == vanished:
		if s.conn.SessionID() != session {
			return false, 0, seen{}, wrap("acquire", key, errGone)
		}
		// A contender found the new node dead (a TTL shorter than the
		// attempt's round trips) and deleted it: it holds the key now.
		return false, 0, seen{}, nil
	case v.state == twin:
		// A node of this token was there already (a re-sent attempt whose
		// store forgot it): keep the older one, reset its TTL.
		s.drop(ctx, key, p, ttl, sent)
		ok, fence, err := s.adopt(ctx, key, token, v.twin, ttl, fenced)
		return ok, fence, seen{}, wrap("acquire", key, err)
	default: // ahead: busy
		s.drop(ctx, key, p, ttl, sent)
		_, isShare := parseShare(v.block)
		return false, 0, seen{byShare: isShare, noRecord: v.noRecord}, nil
	}
}

// errGone reports a node that vanished while its attempt ran because its
// session expired (ZooKeeper deleted its ephemeral nodes).
var errGone = errors.New("the attempt's node vanished with its session")

// drop deletes the node p under key of an attempt that did not take it
// (the token may still hold another node), or leaves it to a clean-up in
// the background if it cannot within ctx.
func (s *Store) drop(ctx context.Context, key, p string, ttl time.Duration, sent time.Time) {
	err := s.delete(ctx, p, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.undoNode(key, p, ttl, sent)
	}
}

// delete deletes the node at p if its version is version (-1: any).
func (s *Store) delete(ctx context.Context, p string, version int32) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(p, version) })
	return err
}

// create creates the node of token under dir, holding data, and makes dir
// (and the root) first when they are missing. It returns the new node's
// path.
func (s *Store) create(ctx context.Context, dir, token string, data []byte) (string, error) {
	return s.createSeq(ctx, dir, nodePrefix+escape(token)+"-", data)
}

// createSeq creates an EPHEMERAL_SEQUENTIAL node named prefix and its
// sequence number under dir, holding data, and makes dir (and the root)
// first when they are missing. It returns the new node's path.
func (s *Store) createSeq(ctx context.Context, dir, name string, data []byte) (string, error) {
	prefix := dir + "/" + name
	for try := 0; ; try++ {
		p, err := call(ctx, func() (string, error) {
			return s.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.acl)
		})
		if !errors.Is(err, zk.ErrNoNode) || try == 3 {
			return p, err
		}
		// The parent is missing (never made, or deleted by ZooKeeper as an
		// empty container a moment ago): make it and try again.
		if err := s.makeDir(ctx, dir); err != nil {
			return "", err
		}
	}
}

// makeDir creates dir and its missing ancestors as container nodes, which
// ZooKeeper deletes once they have had children and have none left (as
// Curator's creatingParentContainersIfNeeded does).
func (s *Store) makeDir(ctx context.Context, dir string) error {
	mk := func(p string) error {
		_, err := call(ctx, func() (string, error) {
			return s.conn.CreateContainer(p, nil, zk.FlagContainer, s.acl)
		})
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	err := mk(dir)
	if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	parts := strings.Split(dir[1:], "/")
	for i := range parts {
		if err := mk("/" + strings.Join(parts[:i+1], "/")); err != nil {
			return err
		}
	}
	return nil
}

// Verdicts of settle.
const (
	ahead    = iota // a live node is ahead
	lowest          // the node is the lowest: it holds the lock
	vanished        // the node is not there any more
	twin            // an older node of the same token is ahead
)

// verdict is what settle found.
type verdict struct {
	state int
	fence int64    // lowest: the parent's pzxid in the listing that showed it lowest
	own   *zk.Stat // the node's stat, when settle read it
	twin  string   // twin: the older node's path
	block string   // ahead: the name of the live node ahead

	// ahead, lowest: the listing that showed it had no exclusive waiter's
	// record (waiterName) among its names.
	noRecord bool
}

// settle clears the dead nodes ahead of the node at p (of token, under
// dir) and reports whether it is now the lowest. now is the server's time
// (ms) of the node's last write, 0 if unknown: settle then reads the node's
// stat along with the first listing, in the same round trip. A node ahead
// is dead once now is past its mtime plus its TTL; settle deletes it with
// the version it read, so that it never deletes a node that was extended
// meanwhile, and lists the children again. Each round deletes a node or
// ends, so settle ends. first, if not nil, is a listing read after the
// node's last write, used for the first round.
func (s *Store) settle(ctx context.Context, dir, p, token string, now int64, first *listing) (verdict, error) {
	var v verdict
	name := path.Base(p)
	etoken := escape(token)
	for {
		var names []string
		var pst *zk.Stat
		var err error
		if first != nil {
			names, pst, first = first.names, first.stat, nil
		} else if now == 0 {
			var ok bool
			var own *zk.Stat
			var oerr error
			list, lerr, ex, xerr := both(ctx,
				func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err },
				func() (existence, error) { ok, st, err := s.conn.Exists(p); return existence{ok, st}, err })
			names, pst, err = list.names, list.stat, lerr
			ok, own, oerr = ex.ok, ex.stat, xerr
			if err == nil && oerr != nil {
				err = oerr
			}
			if err == nil {
				if !ok {
					return verdict{state: vanished}, nil
				}
				v.own, now = own, own.Mtime
			}
		} else {
			var list listing
			list, err = call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
			names, pst = list.names, list.stat
		}
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return verdict{state: vanished}, nil
		case err != nil:
			return v, err
		}
		children := sortChildren(names)
		i := find(children, name)
		if i < 0 {
			return verdict{state: vanished}, nil
		}
		if j := findToken(children[:i], etoken); j >= 0 {
			return verdict{state: twin, twin: dir + "/" + children[j].name}, nil
		}
		noRecord := !slices.Contains(names, waiterName)
		if i == 0 {
			v.state, v.fence, v.noRecord = lowest, pst.Pzxid, noRecord
			return v, nil
		}
		for _, c := range children[:i] {
			cp := dir + "/" + c.name
			got, err := call(ctx, func() (content, error) { data, st, err := s.conn.Get(cp); return content{data, st}, err })
			switch {
			case errors.Is(err, zk.ErrNoNode):
				continue // gone meanwhile
			case err != nil:
				return v, err
			case !expired(got.stat.Mtime, got.data, now):
				return verdict{state: ahead, own: v.own, block: c.name, noRecord: noRecord}, nil
			}
			err = s.delete(ctx, cp, got.stat.Version)
			switch {
			case errors.Is(err, zk.ErrBadVersion):
				return verdict{state: ahead, own: v.own, block: c.name, noRecord: noRecord}, nil // extended meanwhile
			case err != nil && !errors.Is(err, zk.ErrNoNode):
				return v, err
			}
		}
		// Every node ahead is gone: list again, to see the node lowest in
		// a listing whose pzxid follows the deletions.
	}
}

// The results of reads, for call.
type (
	listing struct {
		names []string
		stat  *zk.Stat
	}
	existence struct {
		ok   bool
		stat *zk.Stat
	}
	content struct {
		data []byte
		stat *zk.Stat
	}
)

// Extend resets the TTL of the lock's node: one SetData guarded by the
// version of the store's last write, which makes the node's mtime the
// server's time of the Extend. If that time is past the node's deadline
// (the mtime of the last write plus its TTL), the lock had expired: the
// node is deleted again and Extend reports false, so that an expired lock
// nobody took is not brought back. With fenced, the new fence is the
// SetData's zxid (the node's mzxid), higher than every zxid before it.
//
// A node of an expired session is gone (ZooKeeper deletes a session's
// ephemeral nodes): Extend then reports false, and a Locker's watchdog
// ends the lease.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := s.checkTTL(ttl); err != nil {
		return false, 0, err
	}
	n, ok := s.lookup(key, token)
	if !ok || !n.held {
		var err error
		if n, ok, err = s.locate(ctx, key, token); err != nil || !ok {
			return false, 0, wrap("extend", key, err)
		}
	}
	ok, fence, err := s.renew(ctx, lockKey(key, token), n, ttl, fenced)
	return ok, fence, wrap("extend", key, err)
}

// renew is Extend on the node n the store knows for k.
func (s *Store) renew(ctx context.Context, k nodeKey, n node, ttl time.Duration, fenced bool) (bool, int64, error) {
	for try := 0; ; try++ {
		if n.session != 0 && n.session != s.conn.SessionID() { // its session has ended, and the node with it
			s.forgetK(k)
			return false, 0, nil
		}
		sent := time.Now()
		st, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(n.path, encodeTTL(ttl), n.version) })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			s.forgetK(k)
			return false, 0, nil
		case errors.Is(err, zk.ErrBadVersion) && try < 3:
			// Another write of this token (a concurrent call): read the
			// node again and retry.
			if n, err = s.read(ctx, n); err != nil {
				if errors.Is(err, zk.ErrNoNode) {
					s.forgetK(k)
					return false, 0, nil
				}
				return false, 0, err
			}
			continue
		case err != nil:
			return false, 0, err
		}
		s.learnSkew(st.Mtime, sent)
		if st.Mtime > n.deadline() {
			// Expired before this write: take it back out.
			s.forgetK(k)
			if err := s.delete(ctx, n.path, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				s.undoNode(k.key, n.path, ttl, sent)
			}
			return false, 0, nil
		}
		n.version, n.mtime, n.ttl = st.Version, st.Mtime, ttlMillis(ttl)
		s.rememberK(k, n)
		if !fenced {
			return true, 0, nil
		}
		return true, st.Mzxid, nil
	}
}

// read refreshes what the store knows of n from the server.
func (s *Store) read(ctx context.Context, n node) (node, error) {
	got, err := call(ctx, func() (content, error) { data, st, err := s.conn.Get(n.path); return content{data, st}, err })
	if err != nil {
		return n, err
	}
	ms, ok := decodeTTL(got.data)
	if !ok {
		return n, fmt.Errorf("node %s holds no TTL", n.path)
	}
	n.version, n.mtime, n.ttl = got.stat.Version, got.stat.Mtime, ms
	return n, nil
}

// locate finds the node of key's lock for token when the store does not
// remember it (a Store other than the one that took it): it must be the
// lowest child of key's parent node. ok is false when token does not hold
// key.
func (s *Store) locate(ctx context.Context, key, token string) (node, bool, error) {
	dir := s.dir(key)
	list, err := call(ctx, func() (listing, error) { n, st, err := s.conn.Children(dir); return listing{n, st}, err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return node{}, false, nil
	case err != nil:
		return node{}, false, err
	}
	children := sortChildren(list.names)
	if len(children) == 0 || children[0].token != escape(token) {
		return node{}, false, nil
	}
	n, err := s.read(ctx, node{path: dir + "/" + children[0].name, held: true})
	if errors.Is(err, zk.ErrNoNode) {
		return node{}, false, nil
	}
	return n, err == nil, err
}

// adopt makes the older node of token at p the lock's, if it is the lowest,
// and resets its TTL.
func (s *Store) adopt(ctx context.Context, key, token, p string, ttl time.Duration, fenced bool) (bool, int64, error) {
	n, ok, err := s.locate(ctx, key, token)
	if err != nil || !ok || n.path != p {
		return false, 0, err
	}
	return s.renew(ctx, lockKey(key, token), n, ttl, fenced)
}

// Release deletes the lock's node if it holds token: one multi-operation
// that deletes the node, guarded by the version of the store's last write,
// and sets the data of the key's parent node, whose reply carries the
// server's time of the release: past the node's deadline, the lock had
// expired and Release reports false (the node is deleted all the same). A
// node of an expired session is gone: Release reports false.
//
// The deletion wakes the watchers of the key (Watch) and the waiter right
// behind the node (Grants) through ZooKeeper's watches.
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	n, ok := s.lookup(key, token)
	if !ok || !n.held {
		var err error
		if n, ok, err = s.locate(ctx, key, token); err != nil || !ok {
			return false, wrap("release", key, err)
		}
	}
	ok, err := s.release(ctx, lockKey(key, token), n)
	return ok, wrap("release", key, err)
}

// release is Release of the node n the store knows for k.
func (s *Store) release(ctx context.Context, k nodeKey, n node) (bool, error) {
	for try := 0; ; try++ {
		if n.session != 0 && n.session != s.conn.SessionID() {
			s.forgetK(k)
			return false, nil
		}
		res, err := call(ctx, func() ([]zk.MultiResponse, error) {
			return s.conn.Multi(
				&zk.DeleteRequest{Path: n.path, Version: n.version},
				&zk.SetDataRequest{Path: path.Dir(n.path), Data: nil, Version: -1},
			)
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			s.forgetK(k)
			return false, nil
		case errors.Is(err, zk.ErrBadVersion) && try < 3:
			if n, err = s.read(ctx, n); err != nil {
				if errors.Is(err, zk.ErrNoNode) {
					s.forgetK(k)
					return false, nil
				}
				return false, err
			}
			continue
		case err != nil:
			return false, err
		}
		s.forgetK(k)
		if len(res) != 2 || res[1].Stat == nil {
			return false, errors.New("multi-operation without a reply")
		}
		return res[1].Stat.Mtime <= n.deadline(), nil
	}
}

// Announce does nothing: ZooKeeper tells the watchers of a node of its
// deletion by itself, whichever client deleted it.
func (s *Store) Announce() {}
