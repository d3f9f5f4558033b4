package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
)

// The capabilities of a Store, checked by the compiler.
var (
	_ core.Store         = (*Store)(nil)
	_ core.Notifier      = (*Store)(nil)
	_ core.Undoer        = (*Store)(nil)
	_ core.TTLRounder    = (*Store)(nil)
	_ core.Sharer        = (*Store)(nil)
	_ core.ShareUndoer   = (*Store)(nil)
	_ core.MultiAcquirer = (*Store)(nil)
	_ io.Closer          = (*Store)(nil)
)

// Store is a core.Store that keeps locks in etcd. Build it with New and
// give it to core.NewWithStore; it is safe for concurrent use.
type Store struct {
	client *clientv3.Client
	leases etcdserverpb.LeaseClient // for keep-alives (keepAliveOnce)
	prefix string
	spares int // the pool's capacity (WithLeasePool)

	// minTTL is the server's minimum lease TTL in seconds, learned from a
	// grant that raised the TTL it was asked for; 0 until then.
	minTTL    atomic.Int64
	announced atomic.Bool

	mu      sync.Mutex
	closed  bool
	pool    map[int64][]lease     // unused leases by granted TTL, oldest first (pool.go)
	pooled  int                   // leases in pool
	held    map[heldKey]heldLease // the leases of locks taken through this store
	shares  map[heldKey]string    // the etcd keys of shares taken through this store, by lock key and token
	waiting map[string]lease      // the lease of the waiter record this store last put, by its etcd key
	sweepAt int                   // len(held) at which expired entries are swept
	groups  map[string]*group     // the shared watches of keys with waiters (notify.go)
	busyRev map[string]busy       // the revision at which a key was last seen held (notify.go)
	undos   int                   // clean-ups running in the background (undo.go)

	ctx    context.Context // cancelled by Close: ends watches and clean-ups
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines of watches and clean-ups
}

// lease is an etcd lease of this store.
type lease struct {
	id  clientv3.LeaseID
	ttl int64 // the TTL the server granted, in seconds
	// fresh is when the grant or the last keep-alive of the lease was sent
	// (this process's clock): the server lets the lease expire after
	// fresh + ttl at the earliest.
	fresh time.Time
}

// expiry is when l expires at the earliest, by this process's clock.
func (l lease) expiry() time.Time { return l.fresh.Add(time.Duration(l.ttl) * time.Second) }

// heldKey names a lock taken through this store: its etcd key and token.
type heldKey struct{ key, token string }

// heldLease is the lease of a held lock.
type heldLease struct {
	lease
	// multi marks a lease that several keys share (TryAcquireAll): it is
	// never kept for reuse, since a key may still be bound to it.
	multi bool
}

// New returns a Store that keeps its locks in the etcd cluster behind
// client. The Store does not close client: close it after the Store (and
// after the Lockers that use it). A nil client (or one not made by
// clientv3.New), or an invalid or nil option, returns an error wrapping
// core.ErrInvalidOption, and no Store.
//
// New does no I/O: an endpoint that cannot be reached is reported by the
// first call, when its context (the Locker's I/O timeout) ends, with an
// error that names the endpoints and the connection's last error (see
// "Failures" in the package documentation).
func New(client *clientv3.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("etcdstore: %w: the client is nil", core.ErrInvalidOption)
	}
	if client.ActiveConnection() == nil {
		return nil, fmt.Errorf("etcdstore: %w: the client has no connection: make it with clientv3.New", core.ErrInvalidOption)
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, fmt.Errorf("etcdstore: %w: option %d is nil", core.ErrInvalidOption, i))
			continue
		}
		opt(&cfg)
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	s := &Store{
		client:  client,
		leases:  clientv3.RetryLeaseClient(client),
		prefix:  cfg.prefix,
		spares:  cfg.pool,
		pool:    make(map[int64][]lease),
		held:    make(map[heldKey]heldLease),
		shares:  make(map[heldKey]string),
		waiting: make(map[string]lease),
		sweepAt: minSweep,
		groups:  make(map[string]*group),
		busyRev: make(map[string]busy),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Key returns the etcd key of a lock key: the prefix (WithPrefix) and key.
func (s *Store) Key(key string) string { return s.prefix + key }

// seconds returns ttl in whole seconds, rounded up, at least 1: etcd
// leases count whole seconds.
func seconds(ttl time.Duration) int64 {
	return max(1, int64((ttl+time.Second-1)/time.Second))
}

// leaseSecs returns the TTL in seconds of the lease that holds a lock asked
// for secs: secs, raised to the server's minimum lease TTL once a grant
// has shown it.
func (s *Store) leaseSecs(secs int64) int64 {
	return max(secs, s.minTTL.Load())
}

// StoreTTL is part of core.TTLRounder: it returns how long the store holds
// a lock asked for ttl, which the Locker reports as Lease.TTL and counts
// the lease's validity from. etcd leases count whole seconds, so ttl is
// rounded up to the next second; and etcd raises a lease to its minimum TTL
// (1.5 election timeouts, rounded up to whole seconds: 2 s with etcd's
// default election timeout of 1 s), which the store learns from the first
// grant it raises (by the time the Locker asks, the acquisition has made
// that grant). So TTL(300ms) is held, and reported, as 2 s by default.
//
// The store asks every grant for at least this TTL, so a lock is never held
// for less than StoreTTL reports, as long as every member of the cluster has
// the same minimum (the same election timeout), as etcd's tuning guide
// recommends: a leader with a lower minimum than a grant has shown grants
// what it is asked, and one with a higher minimum grants more.
func (s *Store) StoreTTL(ttl time.Duration) time.Duration {
	return time.Duration(s.leaseSecs(seconds(ttl))) * time.Second
}

// TryAcquire takes key for token in one transaction: if the key does not
// exist (its create revision is 0) and no share of it is live (no key in
// its holders' range: see Sharer in the package documentation), put it with
// token as its value, bound to a lease of ttl (rounded up to whole
// seconds); else read it. A key that
// holds token already (an attempt sent again) counts as acquired and is
// bound to a new lease of ttl, which resets its TTL. With fenced, the fence
// is the key's create revision: etcd's revision counter only grows, so every
// later holder's fence is higher (Kleppmann's fencing tokens, as etcd's
// concurrency.Mutex uses the create revision for its queue order).
//
// The lease is a kept one (WithLeasePool), renewed by a keep-alive sent in
// parallel with the transaction: one round trip; or, with none at hand, a
// new grant: two round trips.
//
// When the transaction fails after it may have reached the server, the
// attempt's lease is revoked, which deletes the key if the transaction set
// it and makes a transaction still on its way fail (a put to a revoked
// lease is refused): at once within ctx, then in the background every 250
// ms until etcd confirms it, or until the lease has expired by itself, or
// until Close. The lease's TTL is the bound that holds whatever happens: a
// key the attempt may have set lives at most the lease's TTL, counted by
// the etcd leader from the grant or the last renewal; the revocation only
// frees it sooner.
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, _, err := s.tryAcquire(ctx, key, token, ttl, fenced, false)
	return ok, fence, err
}

// tryAcquire is TryAcquire; with waiting, the transaction that takes key
// also deletes its waiter record (see TryAcquireWaiting). byShares reports
// an attempt that failed because shares of key are live.
func (s *Store) tryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced, waiting bool) (ok bool, fence int64, byShares bool, err error) {
	k := s.prefix + key
	secs := seconds(ttl)
	start := time.Now()
	resp, l, err := s.txnWithLease(ctx, secs, func(id clientv3.LeaseID) clientv3.Op {
		then := []clientv3.Op{clientv3.OpPut(k, token, clientv3.WithLease(id))}
		if waiting {
			then = append(then, clientv3.OpDelete(waiterKey(k)))
		}
		return clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0), noShares(k)},
			then,
			[]clientv3.Op{clientv3.OpGet(k), clientv3.OpGet(holders(k), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))},
		)
	})
	switch {
	case errors.Is(err, errLeaseLost):
		return false, 0, false, nil
	case err != nil:
		s.undo(ctx, l.id, start, l.expiry())
		return false, 0, false, s.errorf("acquire", key, err)
	case resp.Succeeded:
		s.hold(k, token, l)
		return true, fenceOf(fenced, resp.Header.Revision), false, nil
	}
	kv := rangeKV(resp)
	if kv == nil || string(kv.Value) != token {
		s.put(l)
		byShares = kv == nil && len(resp.Responses) > 1 && len(resp.Responses[1].GetResponseRange().GetKvs()) > 0
		if (kv != nil || byShares) && s.announced.Load() {
			s.sawHeld(key, resp.Header.Revision)
		}
		return false, 0, byShares, nil
	}
	if l.id != clientv3.NoLease && clientv3.LeaseID(kv.Lease) == l.id {
		// This very transaction was applied twice (a transmission whose
		// answer was lost, sent again): the key is bound to this
		// attempt's lease, which must not go back to the pool, where
		// another acquisition would bind its key to it too (and a revoke
		// or an expiry of one would end both).
		s.hold(k, token, l)
		return true, fenceOf(fenced, kv.CreateRevision), false, nil
	}
	// An attempt sent again: the key is ours, bound to the lease of the
	// first transmission. Bind it to a lease of this attempt's TTL.
	s.put(l)
	ok, _, used, err := s.reattach(ctx, k, token, secs, false)
	if err != nil {
		// The key may be bound to either lease: revoke both.
		s.undo(ctx, clientv3.LeaseID(kv.Lease), start, time.Now().Add(time.Duration(s.leaseSecs(secs))*time.Second))
		s.undo(ctx, used.id, start, used.expiry())
		return false, 0, false, s.errorf("acquire", key, err)
	}
	if ok && waiting {
		// The first transmission deleted the waiter record, which a
		// waiter may have put again since: the holder clears it.
		_, _ = s.client.Delete(ctx, waiterKey(k))
	}
	return ok, fenceOf(ok && fenced, kv.CreateRevision), false, nil
}

// Release deletes key in one transaction if its value is token, and
// reports whether it did. The key's lease, now unused, is kept for the next
// acquisition with the same TTL (WithLeasePool), or left to expire on the
// server: no round trip is spent on revoking it. The deletion wakes the
// watchers of key (see Watch).
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	return s.release(ctx, "release", key, s.prefix+key, token)
}

// release deletes k, the etcd key of key or of one of its shares, if its
// value is token (see Release).
func (s *Store) release(ctx context.Context, op, key, k, token string) (bool, error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k), "=", token)).
		Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return false, s.errorf(op, key, err)
	}
	h, had := s.forget(k, token)
	if !resp.Succeeded {
		return false, nil
	}
	if prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs(); had && !h.multi && len(prev) == 1 && clientv3.LeaseID(prev[0].Lease) == h.id {
		s.put(h.lease)
	}
	return true, nil
}

// Extend resets the TTL of key to ttl (rounded up to whole seconds) if its
// value is token. When key was taken through this store with the same TTL,
// that is a keep-alive of its lease, sent in parallel with a transaction
// that checks the value (and, with fenced, puts it again, keeping the
// lease, to draw the new fence: the key's new mod revision): one round
// trip. Otherwise the key is bound to a lease of ttl in a transaction
// guarded by the value (a kept lease, renewed in parallel: one round trip;
// or a new grant: two). A lost lease reports false.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.extend(ctx, "extend", key, s.prefix+key, token, ttl, fenced)
}

// extend resets the TTL of k, the etcd key of key or of one of its shares,
// if its value is token (see Extend).
func (s *Store) extend(ctx context.Context, op, key, k, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	secs := seconds(ttl)
	if h, ok := s.heldLease(k, token); ok && h.ttl == s.leaseSecs(secs) {
		ok, fence, done, err := s.renew(ctx, k, token, h, fenced)
		if err != nil {
			return false, 0, s.errorf(op, key, err)
		}
		if done {
			return ok, fence, nil
		}
	}
	ok, fence, _, err := s.reattach(ctx, k, token, secs, fenced)
	if err != nil {
		return false, 0, s.errorf(op, key, err)
	}
	return ok, fence, nil
}

// renew keeps the lease h of key alive while a transaction checks that key
// holds token and is bound to h. done is false when key holds token but is
// bound to another lease: the caller reattaches it.
func (s *Store) renew(ctx context.Context, k, token string, h heldLease, fenced bool) (ok bool, fence int64, done bool, err error) {
	read := clientv3.OpGet(k)
	if fenced {
		read = clientv3.OpPut(k, token, clientv3.WithIgnoreLease(), clientv3.WithPrevKV())
	}
	sent := time.Now()
	ka := s.keepAlive(ctx, h.id)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k), "=", token)).
		Then(read).
		Commit()
	kaErr := ka.wait()
	switch {
	case err != nil:
		return false, 0, true, err
	case !resp.Succeeded:
		s.forget(k, token)
		return false, 0, true, nil
	}
	kv := rangeKV(resp)
	if fenced {
		kv = resp.Responses[0].GetResponsePut().GetPrevKv()
	}
	if kv == nil || clientv3.LeaseID(kv.Lease) != h.id {
		return false, 0, false, nil
	}
	switch {
	case errors.Is(kaErr, rpctypes.ErrLeaseNotFound):
		// Expired between the two: the server is deleting the key.
		s.forget(k, token)
		return false, 0, true, nil
	case kaErr != nil:
		return false, 0, true, kaErr
	}
	s.renewed(k, token, h.id, sent)
	return true, fenceOf(fenced, resp.Header.Revision), true, nil
}

// reattach binds key to a lease of secs in a transaction guarded by its
// value, token, and reports whether it did. The key's former lease, if this
// store knows it, is kept for reuse. With fenced, the fence is the revision
// of the put. On an error, used is the lease the key may now be bound to.
func (s *Store) reattach(ctx context.Context, k, token string, secs int64, fenced bool) (ok bool, fence int64, used lease, err error) {
	resp, l, err := s.txnWithLease(ctx, secs, func(id clientv3.LeaseID) clientv3.Op {
		return clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "=", token)},
			[]clientv3.Op{clientv3.OpPut(k, token, clientv3.WithLease(id), clientv3.WithPrevKV())},
			nil,
		)
	})
	switch {
	case errors.Is(err, errLeaseLost):
		s.forget(k, token)
		return false, 0, lease{}, nil
	case err != nil:
		// The new lease expires by itself; the key keeps its former one
		// if the put did not apply.
		return false, 0, l, err
	case !resp.Succeeded:
		s.put(l)
		s.forget(k, token)
		return false, 0, lease{}, nil
	}
	old, had := s.forget(k, token)
	s.hold(k, token, l)
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); had && !old.multi && prev != nil && clientv3.LeaseID(prev.Lease) == old.id && old.id != l.id {
		s.put(old.lease)
	}
	return true, fenceOf(fenced, resp.Header.Revision), lease{}, nil
}

// errLeaseLost reports a transaction that bound a key to a kept lease whose
// renewal found it expired: the key goes with it.
var errLeaseLost = errors.New("etcdstore: the lease expired before its renewal")

// txnWithLease commits the transaction that op builds around a lease of
// secs seconds: a kept one, renewed in parallel, or a new grant. It returns
// the lease, also on an error after the transaction was sent (for its
// clean-up); a zero lease otherwise. It retries once with a new grant when
// the kept lease had expired before the transaction reached the server (the
// server refuses a put to an unknown lease, and writes nothing). When the
// transaction succeeded but the kept lease's renewal failed, the error is
// errLeaseLost (the lease had expired) or the renewal's.
func (s *Store) txnWithLease(ctx context.Context, secs int64, op func(clientv3.LeaseID) clientv3.Op) (*clientv3.TxnResponse, lease, error) {
	return s.txnWith(ctx, secs, s.take, op)
}

// txnWith is txnWithLease with the kept lease that take returns, if any.
func (s *Store) txnWith(ctx context.Context, secs int64, take func(secs int64) (lease, bool), op func(clientv3.LeaseID) clientv3.Op) (*clientv3.TxnResponse, lease, error) {
	for retry := false; ; retry = true {
		var l lease
		kept := false
		if !retry {
			l, kept = take(secs)
		}
		if !kept {
			var err error
			if l, err = s.grant(ctx, secs); err != nil {
				return nil, lease{}, err
			}
		}
		sent := time.Now()
		var ka *keepAlive
		if kept {
			ka = s.keepAlive(ctx, l.id)
		}
		r, err := s.client.Do(ctx, op(l.id))
		kaErr := ka.wait()
		if kept && kaErr == nil {
			l.fresh = sent
		}
		if err != nil {
			if kept && errors.Is(err, rpctypes.ErrLeaseNotFound) {
				continue // nothing was written: grant a new lease
			}
			return nil, l, err
		}
		resp := r.Txn()
		switch {
		case kaErr == nil:
		case resp.Succeeded && errors.Is(kaErr, rpctypes.ErrLeaseNotFound):
			return resp, lease{}, errLeaseLost
		case resp.Succeeded:
			return resp, l, kaErr
		default: // nothing is bound to it, and its state is unknown: drop it
			l = lease{}
		}
		return resp, l, nil
	}
}

// grant grants a new lease of secs seconds (at least the server's minimum
// TTL once known: see StoreTTL), and learns that minimum from a grant that
// raised the TTL it asked for.
func (s *Store) grant(ctx context.Context, secs int64) (lease, error) {
	secs = s.leaseSecs(secs)
	sent := time.Now()
	resp, err := s.client.Grant(ctx, secs)
	if err != nil {
		return lease{}, err
	}
	if resp.TTL > secs && resp.TTL > s.minTTL.Load() {
		s.minTTL.Store(resp.TTL)
	}
	return lease{id: resp.ID, ttl: resp.TTL, fresh: sent}, nil
}

// keepAlive is a keep-alive of a lease running in parallel with a
// transaction.
type keepAlive struct {
	done chan struct{}
	err  error
}

// keepAlive sends one keep-alive of id on a goroutine of its own; wait
// returns its outcome.
func (s *Store) keepAlive(ctx context.Context, id clientv3.LeaseID) *keepAlive {
	ka := &keepAlive{done: make(chan struct{})}
	go func() {
		defer close(ka.done)
		ka.err = s.keepAliveOnce(ctx, id)
	}()
	return ka
}

// keepAliveOnce renews lease id once: one request on a keep-alive stream
// of its own. Unlike the client's KeepAliveOnce, which tries again at once
// for as long as the server answers Unavailable (a member without a
// leader), it makes one try: the Locker decides when to try again.
func (s *Store) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) error {
	ctx, cancel := context.WithCancel(ctx) // ends the stream
	defer cancel()
	stream, err := s.leases.LeaseKeepAlive(ctx, grpc.WaitForReady(true))
	if err != nil {
		return clientv3.ContextError(ctx, err)
	}
	if err := stream.Send(&etcdserverpb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		return clientv3.ContextError(ctx, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return clientv3.ContextError(ctx, err)
	}
	if resp.TTL <= 0 {
		return rpctypes.ErrLeaseNotFound
	}
	return nil
}

// wait waits for the keep-alive and returns its error; nil-safe (no
// keep-alive: nil).
func (ka *keepAlive) wait() error {
	if ka == nil {
		return nil
	}
	<-ka.done
	return ka.err
}

// rangeKV returns the key that the first operation of a transaction read,
// nil if none.
func rangeKV(resp *clientv3.TxnResponse) *mvccpb.KeyValue {
	if len(resp.Responses) == 0 {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// fenceOf returns rev as the fence when fenced, 0 otherwise.
func fenceOf(fenced bool, rev int64) int64 {
	if fenced {
		return rev
	}
	return 0
}

// errorf wraps an error of an operation on key. The caller's context
// errors stay reachable with errors.Is (etcd's client returns them as they
// are), but for a deadline that passed while the client could not connect:
// that error says why it could not, naming the endpoints (see unreachable).
func (s *Store) errorf(op, key string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		if u := s.unreachable(s.prefix + key); u != nil {
			err = u
		}
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, key, err)
}

// probeTimeout bounds the call with which unreachable asks the client's
// connection for its last error. The call fails at once while the
// connection is in transient failure (it makes no connection attempt of its
// own); the bound only matters when the connection recovers meanwhile.
const probeTimeout = 250 * time.Millisecond

// unreachable returns why the client cannot reach etcd, or nil when it can
// or does not know. etcd's client waits for a connection until a call's
// deadline (gRPC's WaitForReady) and then returns the context's error
// alone: an endpoint that refuses connections, or that TLS rejects, would
// be reported as "context deadline exceeded". While the client's connection
// is in transient failure (its attempts to connect failed), a call that
// does not wait for it (k's count, serializable) fails at once with the
// connection's last error, which names the endpoint and the cause.
func (s *Store) unreachable(k string) error {
	conn := s.client.ActiveConnection()
	if conn == nil || conn.GetState() != connectivity.TransientFailure {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	_, err := etcdserverpb.NewKVClient(conn).Range(ctx,
		&etcdserverpb.RangeRequest{Key: []byte(k), CountOnly: true, Serializable: true},
		grpc.WaitForReady(false))
	if status.Code(err) != codes.Unavailable {
		return nil
	}
	return &unreachableError{endpoints: s.client.Endpoints(), err: err}
}

// unreachableError is the error of a call that ran out of time while the
// client could not connect to etcd: the endpoints, and the connection's
// last error (a gRPC status of code Unavailable, wrapped).
type unreachableError struct {
	endpoints []string
	err       error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("no connection to etcd at %s: %s", strings.Join(e.endpoints, ","), status.Convert(e.err).Message())
}

func (e *unreachableError) Unwrap() error { return e.err }

// Close ends the watches of Watch and the clean-ups of failed attempts and
// failed releases (Undo) that are still retrying (a key they could not
// remove yet goes with its lease's TTL), and waits for their goroutines. It
// does not close the client, and sends nothing: kept leases expire on the
// server by themselves. The Store still takes, releases and extends locks
// after Close, without watches or background clean-ups. Close is idempotent
// and returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	clear(s.pool)
	s.pooled = 0
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
