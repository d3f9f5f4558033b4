package etcdstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

func call(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acquire takes key for token, failing the test if it cannot.
func acquire(t *testing.T, s *etcdstore.Store, key, token string, ttl time.Duration, fenced bool) int64 {
	t.Helper()
	ok, fence, err := s.TryAcquire(call(t), key, token, ttl, fenced)
	if err != nil || !ok {
		t.Fatalf("TryAcquire(%q) of a free key: %v, %v", key, ok, err)
	}
	return fence
}

// release releases key for token, failing the test if it cannot.
func release(t *testing.T, s *etcdstore.Store, key, token string) {
	t.Helper()
	if ok, err := s.Release(call(t), key, token); err != nil || !ok {
		t.Fatalf("Release(%q) by its holder: %v, %v", key, ok, err)
	}
}

// get reads the etcd key of key, nil if there is none.
func get(t *testing.T, c *clientv3.Client, s *etcdstore.Store, key string) *clientv3.GetResponse {
	t.Helper()
	resp, err := c.Get(call(t), s.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestFenceIsCreateRevision: a fenced acquire's fence is the key's create
// revision, it increases from holder to holder, and a fenced Extend draws
// the key's new mod revision, higher still.
func TestFenceIsCreateRevision(t *testing.T) {
	c := newClient(t, "")
	a, b := newStore(t, c), newStore(t, newClient(t, ""))
	key := uniq(t)

	first := acquire(t, a, key, "one", 10*time.Second, true)
	kv := get(t, c, a, key).Kvs[0]
	if first != kv.CreateRevision {
		t.Fatalf("fence %d; the key's create revision is %d", first, kv.CreateRevision)
	}
	ok, extended, err := a.Extend(call(t), key, "one", 10*time.Second, true)
	if err != nil || !ok {
		t.Fatalf("fenced Extend by the holder: %v, %v", ok, err)
	}
	kv = get(t, c, a, key).Kvs[0]
	if extended <= first || extended != kv.ModRevision || kv.CreateRevision != first {
		t.Fatalf("fenced Extend drew %d after %d; the key's revisions are create %d, mod %d", extended, first, kv.CreateRevision, kv.ModRevision)
	}
	release(t, a, key, "one")

	second := acquire(t, b, key, "two", 10*time.Second, true)
	if second <= extended {
		t.Fatalf("the next holder's fence %d is not above the last one's %d", second, extended)
	}
	if kv := get(t, c, b, key).Kvs[0]; second != kv.CreateRevision {
		t.Fatalf("fence %d; the key's create revision is %d", second, kv.CreateRevision)
	}
	if _, fence, _ := b.Extend(call(t), key, "two", 10*time.Second, false); fence != 0 {
		t.Errorf("an Extend without fencing returned fence %d", fence)
	}
	release(t, b, key, "two")
}

// wait waits up to d for a notice on c.
func wait(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// seeHeld makes s find key held (with Announce), as a waiter's failed
// attempt does, so that the watch of key that s starts next begins at that
// revision: a release that comes before the etcd watch is in place still
// wakes it.
func seeHeld(t *testing.T, s *etcdstore.Store, key string) {
	t.Helper()
	s.Announce()
	if ok, _, err := s.TryAcquire(call(t), key, "waiter:"+token(), 30*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire of a held key: %v, %v", ok, err)
	}
}

// TestReleaseWakesWatchers: every watcher of a key, in two stores, gets a
// notice when another client releases it, and none before; a watcher that
// stopped does not hold the others' watch.
func TestReleaseWakesWatchers(t *testing.T) {
	leakCheck(t)
	holder := newStore(t, newClient(t, ""))
	w1 := newStore(t, newClient(t, ""))
	w2 := newStore(t, newClient(t, ""))
	key := uniq(t)
	acquire(t, holder, key, "held", 30*time.Second, false)
	// The watches start where the watchers found the key held, as a
	// waiter's do: they see the release whenever their etcd watch is in
	// place, even after it.
	seeHeld(t, w1, key)
	seeHeld(t, w2, key)

	c1, stop1 := w1.Watch(key)
	c2, stop2 := w1.Watch(key) // shares w1's watch
	c3, stop3 := w2.Watch(key)
	defer stop2()
	defer stop3()
	if wait(c1, 200*time.Millisecond) || wait(c2, 0) || wait(c3, 0) {
		t.Fatal("a notice while nothing was released")
	}
	stop1()
	stop1() // idempotent
	release(t, holder, key, "held")
	for i, c := range []<-chan struct{}{c2, c3} {
		if !wait(c, 10*time.Second) {
			t.Fatalf("watcher %d: no notice within 10s of a release", i+2)
		}
	}
	if wait(c1, 200*time.Millisecond) {
		t.Error("a stopped watcher got a notice")
	}
}

// TestExpiryWakesWatcher: the expiry of a holder's lease wakes the key's
// watchers too, without a release.
func TestExpiryWakesWatcher(t *testing.T) {
	leakCheck(t)
	holder := newStore(t, newClient(t, ""))
	watcher := newStore(t, newClient(t, ""))
	key := uniq(t)
	start := time.Now()
	acquire(t, holder, key, "left", time.Second, false)
	// The watch starts where the watcher found the key held: it sees the
	// expiry even if the lease runs out before the etcd watch is in place.
	seeHeld(t, watcher, key)
	c, stop := watcher.Watch(key)
	defer stop()
	if !wait(c, 10*time.Second) {
		t.Fatalf("no notice within 10s of a lock taken for 1s and never released")
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("a notice %v after a lock was taken for 1s", took)
	}
	ok, _, err := watcher.TryAcquire(call(t), key, "next", time.Second, false)
	if err != nil || !ok {
		t.Fatalf("TryAcquire after the expiry's notice: %v, %v", ok, err)
	}
}

// TestWatchStartsWhereTheKeyWasSeenHeld: with Announce, a waiter's watch
// starts at the revision at which its attempt found the key held, so that a
// release between the attempt and the watch still wakes it.
func TestWatchStartsWhereTheKeyWasSeenHeld(t *testing.T) {
	leakCheck(t)
	holder := newStore(t, newClient(t, ""))
	waiter := newStore(t, newClient(t, ""))
	waiter.Announce()
	key := uniq(t)
	acquire(t, holder, key, "held", 30*time.Second, false)
	if ok, _, err := waiter.TryAcquire(call(t), key, "waits", 30*time.Second, false); err != nil || ok {
		t.Fatalf("TryAcquire of a held key: %v, %v", ok, err)
	}
	release(t, holder, key, "held") // before the waiter watches
	c, stop := waiter.Watch(key)
	defer stop()
	if !wait(c, 10*time.Second) {
		t.Fatal("no notice of a release that came between the failed attempt and the watch")
	}
}

// TestExtendChangesTTL: an Extend to another TTL moves the key to a lease
// of that TTL: shorter, the lock expires sooner.
func TestExtendChangesTTL(t *testing.T) {
	a, b := newStore(t, newClient(t, "")), newStore(t, newClient(t, ""))
	key := uniq(t)
	acquire(t, a, key, "holder", 30*time.Second, false)
	start := time.Now()
	if ok, _, err := a.Extend(call(t), key, "holder", time.Second, false); err != nil || !ok {
		t.Fatalf("Extend by the holder: %v, %v", ok, err)
	}
	for {
		ok, _, err := b.TryAcquire(call(t), key, "next", 30*time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("a lock taken for 30s and extended to 1s was still held 10s later")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ok, _, _ := a.Extend(call(t), key, "holder", 30*time.Second, false); ok {
		t.Fatal("Extend by the former holder, after another took the key, reported true")
	}
	release(t, b, key, "next")
}

// TestNewErrors: New refuses a nil client and invalid options, with errors
// of core.ErrInvalidOption.
func TestNewErrors(t *testing.T) {
	c := newClient(t, "")
	cases := []struct {
		name   string
		client *clientv3.Client
		opts   []etcdstore.Option
		want   string
	}{
		{"nil client", nil, nil, "client is nil"},
		{"zero client", &clientv3.Client{}, nil, "clientv3.New"},
		{"nil option", c, []etcdstore.Option{etcdstore.WithPrefix("/x/"), nil}, "option 1 is nil"},
		{"negative pool", c, []etcdstore.Option{etcdstore.WithLeasePool(-1)}, "WithLeasePool(-1)"},
	}
	for _, tc := range cases {
		s, err := etcdstore.New(tc.client, tc.opts...)
		if s != nil || !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "etcdstore: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New returned %v, %v; want no store and an etcdstore error of core.ErrInvalidOption about %q", tc.name, s, err, tc.want)
		}
	}
	if s, err := etcdstore.New(c, etcdstore.WithPrefix(""), etcdstore.WithLeasePool(0)); err != nil || s == nil {
		t.Errorf("New with an empty prefix and no pool: %v", err)
	}
}

// TestCloseKeepsClient: closing a Store, with watches running, leaves the
// client to its owner, and the store still answers.
func TestCloseKeepsClient(t *testing.T) {
	leakCheck(t)
	c := newClient(t, "")
	s, err := etcdstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	key := uniq(t)
	_, stop := s.Watch(key)
	defer stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Ctx().Err() != nil {
		t.Fatal("the store closed its client")
	}
	if _, err := c.Get(call(t), "any"); err != nil {
		t.Fatalf("the client after the store's Close: %v", err)
	}
	acquire(t, s, key, "after", 10*time.Second, false)
	release(t, s, key, "after")
	if wc, stopAfter := s.Watch(key); wait(wc, 100*time.Millisecond) {
		t.Fatal("a Watch after Close got a notice")
	} else {
		stopAfter()
	}
}

// TestPrefix: keys live under the store's prefix, "/reqlock/" by default.
func TestPrefix(t *testing.T) {
	c := newClient(t, "")
	def, own := newStore(t, c), newStore(t, c, etcdstore.WithPrefix("/locks/test/"))
	key := uniq(t)
	acquire(t, def, key, "a", 10*time.Second, false)
	acquire(t, own, key, "b", 10*time.Second, false) // another etcd key
	for _, want := range []string{"/reqlock/" + key, "/locks/test/" + key} {
		resp, err := c.Get(call(t), want)
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("no etcd key %q: %v", want, err)
		}
	}
	release(t, def, key, "a")
	release(t, own, key, "b")
}

// TestFailedAttemptLeavesNoLock: an attempt whose context ends while its
// transaction is on its way (applied by etcd, its answer not yet back)
// fails, and the store revokes its lease, which deletes the key the late
// transaction set, long before the lease's TTL. The context ends when etcd
// has applied the transaction and before its answer reaches the store (a
// client interceptor holds the answer): no race with a timer decides which
// comes first.
func TestFailedAttemptLeavesNoLock(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var armed atomic.Bool
	cfg := clientConfig(shared.Addr())
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
		func(c context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method != "/etcdserverpb.KV/Txn" || !armed.CompareAndSwap(true, false) {
				return invoker(c, method, req, reply, cc, opts...)
			}
			if err := invoker(c, method, req, reply, cc, opts...); err != nil {
				return err
			}
			// Applied; the attempt's context ends before the answer is
			// handed back, as when it comes too late.
			cancel()
			return status.FromContextError(c.Err()).Err()
		}))
	client, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client, etcdstore.WithLeasePool(0))
	direct := newClient(t, "")
	key := uniq(t)
	// See the late transaction's write.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	writes := direct.Watch(wctx, s.Key(key), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	<-writes

	armed.Store(true)
	ok, _, err := s.TryAcquire(ctx, key, "late", time.Minute, false)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire whose context ended while its transaction was on its way: %v, %v; want the context's error", ok, err)
	}
	select {
	case resp := <-writes:
		if len(resp.Events) == 0 || string(resp.Events[0].Kv.Value) != "late" {
			t.Fatalf("unexpected watch response %+v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed attempt's transaction never reached etcd: nothing to check")
	}
	start := time.Now()
	for len(get(t, direct, s, key).Kvs) > 0 {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the key of a failed attempt, set for 1m, was still there 20s after it was set")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// counter counts a client's calls to etcd: one per unary call (KV, lease
// grant and revoke) and one per stream (a lease's KeepAliveOnce).
type counter struct{ unary, streams atomic.Int64 }

func (c *counter) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.unary.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.streams.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

func (c *counter) take() (unary, streams int64) {
	return c.unary.Swap(0), c.streams.Swap(0)
}

// countingClient returns a client of addr whose calls n counts.
func countingClient(t testing.TB, addr string, n *counter) *clientv3.Client {
	t.Helper()
	cfg := clientConfig(addr)
	cfg.DialOptions = append(cfg.DialOptions, n.options()...)
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCallsPerAcquireRelease counts the calls of an uncontended acquire and
// release: a new lease and a transaction, then a transaction; with the
// released lease kept, the next acquire is a transaction and a keep-alive
// sent in parallel (one round trip), and an Extend of the same TTL too.
// (A kept lease is reused within half its TTL: a TTL of a minute leaves
// the test half a minute.)
func TestCallsPerAcquireRelease(t *testing.T) {
	var n counter
	s := newStore(t, countingClient(t, shared.Addr(), &n))
	key := uniq(t)
	if _, err := s.Release(call(t), key, "nobody"); err != nil { // connects
		t.Fatal(err)
	}
	check := func(what string, unary, streams int64) {
		t.Helper()
		if u, st := n.take(); u != unary || st != streams {
			t.Errorf("%s: %d unary calls and %d streams; want %d and %d", what, u, st, unary, streams)
		}
	}
	n.take()
	acquire(t, s, key, "first", time.Minute, false)
	check("the first acquire (grant, transaction)", 2, 0)
	release(t, s, key, "first")
	check("a release (transaction)", 1, 0)
	acquire(t, s, key, "second", time.Minute, false)
	check("an acquire with a kept lease (transaction ∥ keep-alive)", 1, 1)
	if ok, _, err := s.Extend(call(t), key, "second", time.Minute, true); err != nil || !ok {
		t.Fatalf("Extend: %v, %v", ok, err)
	}
	check("an Extend of the same TTL (transaction ∥ keep-alive)", 1, 1)
	release(t, s, key, "second")
	check("a release (transaction)", 1, 0)
}

// TestServerMinimumTTL: a server with etcd's default timings (election
// timeout 1 s) grants leases of 2 s at least; the store learns it and
// reuses such leases for 1 s locks. A kept lease is reused within half its
// TTL (1 s here) from its grant: a round whose acquire came later than that
// (a loaded machine) shows nothing and is tried again, with a new store.
func TestServerMinimumTTL(t *testing.T) {
	srv := servers.Start(t, servers.EtcdSpecTimings(100*time.Millisecond, time.Second)) // etcd's defaults
	var n counter
	c := countingClient(t, srv.Addr(), &n)
	for round := 1; ; round++ {
		s, err := etcdstore.New(c)
		if err != nil {
			t.Fatal(err)
		}
		key := uniq(t)
		start := time.Now() // before the grant
		acquire(t, s, key, "one", time.Second, false)
		release(t, s, key, "one")
		n.take()
		acquire(t, s, key, "two", time.Second, false)
		u, st := n.take()
		inTime := time.Since(start) < time.Second // the kept lease was usable
		kv := get(t, c, s, key).Kvs[0]
		ttl, err := c.TimeToLive(call(t), clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		release(t, s, key, "two")
		_ = s.Close()
		if ttl.GrantedTTL != 2 {
			t.Fatalf("a lease asked for 1s was granted %ds; etcd's minimum with an election timeout of 1s is 2s", ttl.GrantedTTL)
		}
		if inTime {
			if u != 1 || st != 1 {
				t.Errorf("an acquire for 1s after a release of a lock for 1s made %d unary calls and %d streams; want 1 and 1 (the kept 2s lease)", u, st)
			}
			return
		}
		if round == 20 {
			t.Fatalf("in %d rounds, no acquire came within 1s of the grant of the lease before it", round)
		}
		t.Logf("round %d: the second acquire came more than 1s after the first's grant; again", round)
	}
}

func token() string { return rand.Text() }

// TestServerRestart: etcd keeps locks on disk: a lock taken before the
// server restarts is still held after it, its holder releases it, and the
// release wakes a watcher whose watch outlived the restart.
func TestServerRestart(t *testing.T) {
	leakCheck(t)
	srv := servers.StartEtcd(t)
	holder := newStore(t, newClient(t, srv.Addr()))
	other := newStore(t, newClient(t, srv.Addr()))
	key := uniq(t)
	acquire(t, holder, key, "before", 30*time.Second, true)
	c, stop := other.Watch(key)
	defer stop()

	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, _, err := other.TryAcquire(ctx, key, "during", 30*time.Second, false); !downErr(err, srv.Addr()) {
		t.Errorf("TryAcquire while etcd is down: %v; want the context's deadline, or an error naming %s", err, srv.Addr())
	}
	cancel()
	srv.Restart(t)

	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, _, err := other.TryAcquire(ctx, key, "after", 30*time.Second, false)
		cancel()
		if err == nil {
			if ok {
				t.Fatal("a lock taken before etcd restarted was free after it")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer 15s after etcd restarted: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wait(c, 0) {
		t.Fatal("a notice before the release")
	}
	release(t, holder, key, "before")
	if !wait(c, 5*time.Second) {
		t.Fatal("no notice of a release after etcd restarted")
	}
}

// TestLockerWakesWaiter: through Lockers built WithNotify, a waiter whose
// sleep is 30s gets the lock soon after another process releases it: the
// watch woke it.
func TestLockerWakesWaiter(t *testing.T) {
	leakCheck(t)
	newLocker := func() *core.Locker {
		l := core.NewWithStore(newStore(t, newClient(t, "")),
			core.WithTTL(time.Minute), core.WithWait(time.Minute),
			core.WithSpin(30*time.Second, time.Millisecond), core.WithNotify())
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	first, second := newLocker(), newLocker()
	name := uniq(t)
	lease, err := first.Acquire(call(t), name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var acquiredAt atomic.Int64
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := second.Acquire(ctx, name)
		if err == nil {
			acquiredAt.Store(time.Now().UnixNano())
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter's first attempt fails; it sleeps
	released := time.Now()
	if err := lease.Release(call(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter's Acquire: %v", err)
	}
	if took := time.Unix(0, acquiredAt.Load()).Sub(released); took > 15*time.Second {
		t.Fatalf("the waiter got the lock %v after the release: not woken by the watch (its sleep is 30s)", took)
	}
}

// TestRevokedKeptLeaseIsReplaced: a kept lease that is gone from the server
// (revoked here; expired in life) makes the acquisition's transaction fail
// with no effect, and the acquisition grants a new lease instead.
func TestRevokedKeptLeaseIsReplaced(t *testing.T) {
	c := newClient(t, "")
	s := newStore(t, c)
	key := uniq(t)
	acquire(t, s, key, "first", 10*time.Second, false)
	kept := clientv3.LeaseID(get(t, c, s, key).Kvs[0].Lease)
	release(t, s, key, "first") // kept for reuse
	if _, err := c.Revoke(call(t), kept); err != nil {
		t.Fatal(err)
	}
	acquire(t, s, key, "second", 10*time.Second, false)
	kv := get(t, c, s, key).Kvs[0]
	if string(kv.Value) != "second" || kv.Lease == 0 || clientv3.LeaseID(kv.Lease) == kept {
		t.Fatalf("after an acquire whose kept lease was revoked, the key is %q on lease %x (the revoked one: %x)", kv.Value, kv.Lease, kept)
	}
	ttl, err := c.TimeToLive(call(t), clientv3.LeaseID(kv.Lease))
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("the key's new lease: %+v, %v", ttl, err)
	}
	release(t, s, key, "second")
}

// TestWatchdogSeesLostLease: with core.WithWatchdog, a lease that etcd no
// longer has (revoked here; expired during an outage in life) ends the
// Lease: the watchdog's next renewal reports it, and Done closes. The TTL
// leaves a renewal seconds of slack, and the test waits for a renewal (the
// lease's validity moves) rather than for a fixed time.
func TestWatchdogSeesLostLease(t *testing.T) {
	leakCheck(t)
	c := newClient(t, "")
	s := newStore(t, c)
	l := core.NewWithStore(s, core.WithTTL(9*time.Second), core.WithWatchdog())
	defer l.Close()
	lease, err := l.Acquire(call(t), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	first := lease.ValidUntil()
	deadline := time.Now().Add(30 * time.Second)
	for !lease.ValidUntil().After(first) { // renewed once
		select {
		case <-lease.Done():
			t.Fatal("Done closed while the lease was renewed")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal within 30s of a lease of 9s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-lease.Done():
		t.Fatal("Done closed while the lease was renewed")
	default:
	}
	id := clientv3.LeaseID(get(t, c, s, lease.Key()).Kvs[0].Lease)
	if _, err := c.Revoke(call(t), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done still open 30s after the lease was revoked")
	}
	if !lease.Lost() {
		t.Error("Lost reports false after Done closed on a revoked lease")
	}
}

// downErr reports the error of a call that could not reach etcd at addr:
// the context's deadline (no reply on a connection, or no connection yet),
// or the error that names the endpoint and the connection's last error
// (the client had given up connecting for now).
func downErr(err error, addr string) bool {
	return errors.Is(err, context.DeadlineExceeded) ||
		(err != nil && strings.Contains(err.Error(), "no connection to etcd at "+addr))
}

// TestPartition: while the link to etcd swallows everything (a network
// partition), calls end with their context's deadline (or, once the client
// has found the connection dead and failed to make another, with an error
// that names the endpoint); once it heals, the store answers again.
func TestPartition(t *testing.T) {
	leakCheck(t)
	proxy := redistest.NewProxy(t, shared.Addr())
	s := newStore(t, newClient(t, proxy.Addr()))
	key := uniq(t)
	acquire(t, s, key, "held", 30*time.Second, false)
	release(t, s, key, "held") // the store keeps a lease: the next acquire is a transaction and a keep-alive

	proxy.Blackhole()
	calls := map[string]func(context.Context) error{
		"TryAcquire": func(ctx context.Context) error {
			_, _, err := s.TryAcquire(ctx, key, "cut", 30*time.Second, false)
			return err
		},
		"Extend": func(ctx context.Context) error {
			_, _, err := s.Extend(ctx, key, "cut", 30*time.Second, true)
			return err
		},
		"Release": func(ctx context.Context) error {
			_, err := s.Release(ctx, key, "cut")
			return err
		},
	}
	for name, f := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := f(ctx)
		cancel()
		if !downErr(err, proxy.Addr()) || !strings.HasPrefix(err.Error(), "etcdstore: ") {
			t.Errorf("%s across a partition: %v; want an etcdstore error wrapping the context's deadline, or naming %s", name, err, proxy.Addr())
		}
	}
	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, _, err := s.TryAcquire(ctx, key, "healed", 30*time.Second, false)
		cancel()
		if err == nil {
			if !ok {
				t.Fatal("the key was held after the partition, which no attempt reached")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer 15s after the partition healed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	release(t, s, key, "healed")
}

// TestTransactionAppliedTwiceKeepsItsLease: an acquiring transaction that
// etcd applies twice (its first answer lost, the transmission sent again)
// finds the key bound to its own lease. The lease stays the lock's: it does
// not go back to the pool (from which another acquisition would bind its
// key to it too) and the key is not moved to another lease (a further
// transaction).
func TestTransactionAppliedTwiceKeepsItsLease(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	var armed atomic.Bool
	var txns atomic.Int64
	cfg := clientConfig(shared.Addr())
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
		func(c context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" {
				txns.Add(1)
				if armed.CompareAndSwap(true, false) {
					// The first transmission is applied, its answer lost.
					txns.Add(1)
					if err := invoker(c, method, req, reply, cc, opts...); err != nil {
						return err
					}
				}
			}
			return invoker(c, method, req, reply, cc, opts...)
		}))
	client, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client)
	direct := newClient(t, "")
	key := uniq(t)
	armed.Store(true)
	ok, _, err := s.TryAcquire(ctx, key, "twice", time.Minute, false)
	if err != nil || !ok {
		t.Fatalf("TryAcquire whose transaction was applied twice = %v, %v; want true", ok, err)
	}
	if n := txns.Load(); n != 2 {
		t.Fatalf("the acquire sent %d transactions, want 2 (one, applied twice): it moved the key to another lease", n)
	}
	bound := clientv3.LeaseID(get(t, direct, s, key).Kvs[0].Lease)
	// The next acquisition of another key must not be bound to the lock's
	// lease.
	other := uniq(t)
	if ok, _, err := s.TryAcquire(ctx, other, "other", time.Minute, false); err != nil || !ok {
		t.Fatalf("TryAcquire of another key = %v, %v", ok, err)
	}
	if l := clientv3.LeaseID(get(t, direct, s, other).Kvs[0].Lease); l == bound {
		t.Fatalf("another key was bound to the lease %x of the lock whose transaction was applied twice", l)
	}
	release(t, s, key, "twice")
	release(t, s, other, "other")
}
