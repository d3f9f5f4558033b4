package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// redlockEnv is a Redlock Locker on its own clients of the nodes.
func redlockEnv(t *testing.T, nodes redistest.Nodes, opts ...core.Option) *core.Locker {
	t.Helper()
	l := core.NewRedlock(nodes.Clients(t), opts...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// valueOn returns the value of key on node s ("" when absent or down).
func valueOn(s *redistest.Server, key string) string {
	c := redis.NewClient(s.Options())
	defer c.Close()
	return c.Get(context.Background(), key).Val()
}

// holders counts the running nodes whose key holds token.
func holders(nodes redistest.Nodes, key, token string) int {
	n := 0
	for _, s := range nodes {
		if s.Running() && valueOn(s, key) == token {
			n++
		}
	}
	return n
}

func TestRedlockMutualExclusion(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 5)
	name := uniq(t)
	opts := []core.Option{core.WithWait(time.Minute), core.WithSpin(time.Millisecond, 3*time.Millisecond), core.WithFencing(), core.WithNotify()}
	var o redistest.Overlap
	var mu sync.Mutex
	var fences []int64
	ls := []*core.Locker{redlockEnv(t, nodes, opts...), redlockEnv(t, nodes, opts...), redlockEnv(t, nodes, opts...)}
	contend(t, ls, 3, 8, name, func(lease *core.Lease) {
		exit := o.Enter()
		mu.Lock()
		fences = append(fences, lease.Fence()) // in lock order: appended inside the section
		mu.Unlock()
		time.Sleep(time.Millisecond)
		exit()
		if err := lease.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	})
	t.Logf("redlock on 5 nodes: %d sections by 9 holders, %d overlaps", o.Entries(), o.Overlaps())
	if o.Overlaps() != 0 || o.Entries() != 72 {
		t.Fatalf("%d overlaps in %d of 72 sections", o.Overlaps(), o.Entries())
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d followed %d: not strictly increasing", fences[i], fences[i-1])
		}
	}
}

// TestFaultRedlockNodesDown stops nodes one by one: with 2 of 5 down the
// lock works; with 3 down Acquire fails at once with ErrStorage and leaves no
// key behind; once the nodes are back it works again.
//
// "At once" is checked against the wait budget (5 s), which an Acquire that
// took the failure for a busy lock would spend; the I/O timeout (1 s) is
// what the running nodes get to answer on a loaded machine.
func TestFaultRedlockNodesDown(t *testing.T) {
	leakCheck(t)
	const wait = 5 * time.Second
	nodes := redistest.StartNodes(t, 5)
	l := redlockEnv(t, nodes, core.WithWait(wait), core.WithIOTimeout(time.Second), core.WithTTL(time.Minute))
	other := redlockEnv(t, nodes, core.WithWait(0))
	ctx := context.Background()
	name := uniq(t)
	key, _ := l.Key(name)

	nodes[0].Stop()
	nodes[1].Stop()
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("with 2 of 5 nodes down: %v", err)
	}
	if n := holders(nodes, key, lease.Token()); n != 3 {
		t.Fatalf("the lock is on %d nodes, want the 3 running", n)
	}
	if _, err := other.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a second holder with 2 nodes down: %v, want ErrTimeout", err)
	}
	if err := lease.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("extend with 2 nodes down: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release with 2 nodes down: %v", err)
	}
	if n := holders(nodes, key, lease.Token()); n != 0 {
		t.Fatalf("the release left the lock on %d nodes", n)
	}

	nodes[2].Stop()
	start := time.Now()
	_, err = l.Acquire(ctx, name)
	took := time.Since(start)
	t.Logf("redlock with 3 of 5 nodes down: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, core.ErrStorage) || errors.Is(err, core.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with 3 of 5 nodes down: err = %v, want ErrStorage only", err)
	}
	if took >= wait {
		t.Fatalf("the failure took %v, the whole wait budget: it should be immediate", took)
	}
	// The nodes that had not answered when the quorum was out of reach are
	// released in the background, once their call ends: well within the
	// lock's TTL of a minute.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := 0
		for _, s := range nodes[3:] {
			if valueOn(s, key) != "" {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a failed Redlock attempt left its key on %d running nodes", left)
		}
	}

	for _, s := range nodes[:3] {
		s.Restart(t)
	}
	lease, err = l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("after the nodes came back: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockMinorityHeldElsewhere: a foreign lock on 3 of 5 nodes makes
// every attempt fail, and the failed attempts leave nothing on the other 2.
func TestRedlockMinorityHeldElsewhere(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 5)
	l := redlockEnv(t, nodes, core.WithWait(100*time.Millisecond), core.WithSpin(10*time.Millisecond, 10*time.Millisecond))
	ctx := context.Background()
	name := uniq(t)
	key, _ := l.Key(name)
	for _, s := range nodes[:3] {
		c := redis.NewClient(s.Options())
		c.Set(ctx, key, "foreign", time.Minute)
		_ = c.Close()
	}
	if _, err := l.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	_ = l.Close() // the clean-ups of the nodes slower than the outcome are done
	for i, s := range nodes {
		want := ""
		if i < 3 {
			want = "foreign"
		}
		if got := valueOn(s, key); got != want {
			t.Fatalf("node %d holds %q, want %q", i, got, want)
		}
	}
}

// TestFaultRedlockWatchdogAndDone renews a Redlock lease past its TTL, then
// loses the quorum: Done closes before the keys expire on the nodes left.
//
// Renewals come every third of the TTL (1.5 s), each with about as long
// to succeed before the watchdog gives up. It gives up an interval before
// the lock can expire: the keys on the nodes left outlive Done by 1.5 s, a
// margin that a loaded machine's stall before the test reads them does not
// eat, as it would the 333 ms of a TTL of a second.
func TestFaultRedlockWatchdogAndDone(t *testing.T) {
	leakCheck(t)
	const ttl = 4500 * time.Millisecond
	nodes := redistest.StartNodes(t, 5)
	l := redlockEnv(t, nodes, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(time.Second))
	ctx := context.Background()
	acquired := time.Now()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	done := lease.Done()
	for time.Since(acquired) < 3*ttl/2 { // renewed past the TTL
		if !waitRenewed(t, lease) {
			t.Fatal("the watchdog lost a Redlock lease with every node up")
		}
	}
	// Renewals run on in the background on the nodes slower than the
	// quorum, so the lock is normally on all 5; a quorum is what must hold.
	if n := holders(nodes, lease.Key(), lease.Token()); n < 3 {
		t.Fatalf("after 1.5 TTLs the lock is on %d nodes, want a quorum renewed", n)
	}
	select {
	case <-done:
		t.Fatal("the watchdog lost a Redlock lease with every node up")
	default:
	}
	nodes[0].Stop()
	nodes[1].Stop()
	nodes[2].Stop()
	cut := time.Now()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done stayed open after the quorum was lost")
	}
	toDone := time.Since(cut)
	c := redis.NewClient(nodes[4].Options())
	defer c.Close()
	left := c.PTTL(ctx, lease.Key()).Val()
	t.Logf("redlock: Done closed %v after 3 of 5 nodes died, the key's PTTL on a surviving node still %v (TTL %v)", toDone.Round(time.Millisecond), left, ttl)
	if left <= 0 || toDone >= ttl {
		t.Fatalf("Done closed %v after the loss, with PTTL %v left: not before the lock expired", toDone, left)
	}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrStorage) {
		t.Fatal(err)
	}
}

// TestRedlockFencesStayIncreasingWhenCountersDiverge gives the nodes'
// fence counters different histories, through nodes that are down for one
// holder and back (empty) for the next: the quorum write-back keeps tokens
// strictly increasing where the bare highest counter of each quorum would not.
// Fences are drawn from the counter and the node's clock (whichever is
// higher): node 2's counter is set an hour ahead of the clocks, as if it had
// drawn fences on a clock an hour fast.
func TestRedlockFencesStayIncreasingWhenCountersDiverge(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 3)
	clients := nodes.Clients(t)
	l := core.NewRedlock(clients, core.WithFencing(), core.WithIOTimeout(2*time.Second))
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	name := uniq(t)
	key, _ := l.Key(name)
	c := redis.NewClient(nodes[2].Options())
	ahead := c.Time(ctx).Val().Add(time.Hour).UnixMicro()
	c.Set(ctx, key+":fence", ahead, 0) // node 2 has seen more holders than the others
	_ = c.Close()

	nodes[0].Stop() // the first holder's quorum: nodes 1 and 2
	first, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if first.Fence() != ahead+1 {
		t.Fatalf("first fence %d, want %d (node 2's counter + 1)", first.Fence(), ahead+1)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nodes[0].Restart(t) // back, with its counter at 0
	// The Locker's client of node 0 still holds connections to the stopped
	// server: let it find them dead and dial again, so that the acquire
	// below measures the fences, not go-redis's reconnection against the
	// I/O timeout.
	for deadline := time.Now().Add(15 * time.Second); clients[0].Ping(ctx).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("node 0 does not answer after its restart")
		}
	}
	nodes[2].Stop() // the second holder's quorum: nodes 0 and 1
	second, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if second.Fence() <= first.Fence() {
		t.Fatalf("second fence %d is not above the first's %d", second.Fence(), first.Fence())
	}
}

func TestRedlockBadInput(t *testing.T) {
	if err := core.NewRedlock(nil).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("no clients: %v", err)
	}
	var typedNil *redis.Client
	if err := core.NewRedlock([]redis.UniversalClient{shared.Client(t), typedNil}).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("a nil client: %v", err)
	}
	if err := core.NewRedlock([]redis.UniversalClient{shared.Client(t)}, core.WithTTL(0)).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("a bad option: %v", err)
	}
}

// partitioned returns clients of the nodes in which the last k nodes are
// reached through proxies, and the proxies: Blackhole partitions a node (its
// connections stay open and nothing comes back), as a network partition does.
func partitioned(t *testing.T, nodes redistest.Nodes, k int) ([]redis.UniversalClient, []*redistest.Proxy) {
	t.Helper()
	clients := nodes[:len(nodes)-k].Clients(t)
	var proxies []*redistest.Proxy
	for _, s := range nodes[len(nodes)-k:] {
		c, p := s.ProxiedClient(t)
		clients = append(clients, c)
		proxies = append(proxies, p)
	}
	return clients, proxies
}

// TestRedlockPartitionedNode partitions one node of five (no reply, no
// reset): acquires, with and without fencing, must not wait for it until
// their deadline, and a lease kept by the watchdog must not be lost.
//
// An acquire or release that waited for the partitioned node would return
// at its deadline, the I/O timeout (3 s), at the earliest; one that did not
// returns once a quorum answered and as long again (the grace for the
// nodes behind it), which leaves a loaded machine 1.5 s per quorum.
func TestRedlockPartitionedNode(t *testing.T) {
	leakCheck(t)
	const ioTimeout = 3 * time.Second
	nodes := redistest.StartNodes(t, 5)
	ctx := context.Background()
	for _, fencing := range []bool{false, true} {
		clients, ps := partitioned(t, nodes, 1)
		p := ps[0]
		opts := []core.Option{core.WithIOTimeout(ioTimeout), core.WithWait(0)}
		if fencing {
			opts = append(opts, core.WithFencing())
		}
		l := core.NewRedlock(clients, opts...)
		t.Cleanup(func() { _ = l.Close() })
		p.Blackhole()
		for i := 0; i < 3; i++ {
			start := time.Now()
			lease, err := l.Acquire(ctx, uniq(t))
			took := time.Since(start)
			if err != nil {
				t.Fatalf("fencing %v: acquire with 1 of 5 nodes partitioned: %v (after %v)", fencing, err, took)
			}
			if took >= ioTimeout {
				t.Fatalf("fencing %v: the acquire took %v: it waited for the partitioned node (I/O timeout %v)", fencing, took, ioTimeout)
			}
			if n := holders(nodes[:4], lease.Key(), lease.Token()); n < 3 {
				t.Fatalf("fencing %v: the lock is on %d reachable nodes", fencing, n)
			}
			start = time.Now()
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("fencing %v: release: %v", fencing, err)
			}
			if d := time.Since(start); d >= ioTimeout {
				t.Fatalf("fencing %v: the release took %v: it waited for the partitioned node", fencing, d)
			}
			t.Logf("fencing %v: acquired in %v with 1 of 5 nodes partitioned", fencing, took.Round(time.Millisecond))
		}
		p.Restore()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The watchdog keeps a lease past its TTL: renewals every 500 ms, each
	// with about 2 s to succeed before the watchdog gives up.
	const ttl = 3 * time.Second
	clients, ps := partitioned(t, nodes, 1)
	p := ps[0]
	l := core.NewRedlock(clients, core.WithTTL(ttl), core.WithWatchdog(), core.WithWatchdogInterval(500*time.Millisecond), core.WithFencing())
	t.Cleanup(func() { _ = l.Close() })
	p.Blackhole()
	acquired := time.Now()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	for time.Since(acquired) < 3*ttl/2 {
		if !waitRenewed(t, lease) {
			t.Fatal("the watchdog lost the lease with 1 of 5 nodes partitioned")
		}
	}
	if n := holders(nodes[:4], lease.Key(), lease.Token()); n < 3 {
		t.Fatalf("after 1.5 TTLs the lock is on %d reachable nodes", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.Restore()
}

// TestRedlockSlowQuorumIsAStorageError: one node of five is held by another
// client and two are partitioned, so that a quorum could only come from the
// partitioned nodes. Their silence is a storage failure, not contention:
// Acquire must fail with ErrStorage (not ErrTimeout after its whole wait),
// and an Extend must fail with ErrStorage without losing the lease, which
// the watchdog would then retry.
func TestRedlockSlowQuorumIsAStorageError(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 5)
	clients, proxies := partitioned(t, nodes, 2)
	// The I/O timeout (2 s) is the deadline of the calls that fail here, and
	// what the nodes get to answer where they should on a loaded machine.
	l := core.NewRedlock(clients, core.WithTTL(10*time.Second), core.WithIOTimeout(2*time.Second), core.WithWait(5*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	name := uniq(t)
	key, _ := l.Key(name)
	foreign := redis.NewClient(nodes[2].Options())
	defer foreign.Close()
	foreign.Set(ctx, key, "foreign", time.Minute)
	for _, p := range proxies {
		p.Blackhole()
	}
	start := time.Now()
	_, err := l.Acquire(ctx, name)
	took := time.Since(start)
	if !errors.Is(err, core.ErrStorage) || errors.Is(err, core.ErrTimeout) {
		t.Fatalf("acquire without a quorum in time = %v after %v, want ErrStorage", err, took)
	}
	t.Logf("acquire: %v after %v", err, took.Round(time.Millisecond))
	for _, p := range proxies {
		p.Restore()
	}
	foreign.Del(ctx, key)

	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns once a quorum has the key; the other nodes get it
	// in the background, through connections the partition ended.
	for deadline := time.Now().Add(15 * time.Second); holders(nodes, key, lease.Token()) < 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lock reached only %d of 5 nodes", holders(nodes, key, lease.Token()))
		}
	}
	foreign.Set(ctx, key, "foreign", time.Minute) // lost on node 2 only
	for _, p := range proxies {
		p.Blackhole()
	}
	if err := lease.Extend(ctx, 10*time.Second); !errors.Is(err, core.ErrStorage) {
		t.Fatalf("extend without a quorum in time = %v, want ErrStorage", err)
	}
	if lease.Lost() {
		t.Fatal("an extend that got no quorum in time marked the lease lost")
	}
	for _, p := range proxies {
		p.Restore()
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedlockCloseWhileAcquiring closes a Redlock Locker over and over while
// it acquires and releases (Close waits for the calls left in the
// background, which Acquires keep starting): no race, no panic, and the
// Locker keeps working.
func TestRedlockCloseWhileAcquiring(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 3)
	l := redlockEnv(t, nodes, core.WithWait(time.Minute), core.WithSpin(time.Millisecond, time.Millisecond))
	ctx := context.Background()
	name := uniq(t)
	var workers sync.WaitGroup
	for g := 0; g < 3; g++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; i < 30; i++ {
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if err := lease.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		workers.Wait()
		close(finished)
	}()
	closes := 0
	for done := false; !done; closes++ {
		_ = l.Close()
		select {
		case <-finished:
			done = true
		default:
		}
	}
	t.Logf("%d Closes during 90 acquires", closes)
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("acquire after Close: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
