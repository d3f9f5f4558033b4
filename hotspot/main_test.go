package hotspot_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// shared is the redis-server the tests use; each test locks names of its own.
var shared *redistest.Server

// redisAddr is the address the examples connect to.
var redisAddr string

func TestMain(m *testing.M) {
	var err error
	if shared, err = redistest.Launch(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = shared.Addr()
	code := m.Run()
	shared.Close()
	if code == 0 {
		if err := testmain.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakCheck fails the test if it leaves goroutines behind. Call it first, so
// that it runs after the test's other clean-ups.
func leakCheck(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := testmain.FindLeaks(before); err != nil { // patient: see testmain.LeakPatience
			t.Error(err)
		}
	})
}

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
}

// instance is one service instance: its own client (with a round-trip
// counter), its own Guard and a Locker using both.
type instance struct {
	client *redis.Client
	rt     *redistest.RoundTrips
	guard  *hotspot.Guard
	locker *core.Locker
}

// fastSpin keeps contended tests short.
var fastSpin = core.WithSpin(time.Millisecond, time.Millisecond)

// newInstance builds an instance on the shared server, with the Guard in its
// Locker's local-queue slot (through core.WithHandlers, as users write it)
// and a wait budget of 30 s unless opts set one;
// its client and Locker are closed when the test ends.
func newInstance(t testing.TB, guardOpts []hotspot.Option, opts ...core.Option) *instance {
	t.Helper()
	c := shared.Client(t)
	rt := &redistest.RoundTrips{}
	c.AddHook(rt)
	if err := c.Ping(context.Background()).Err(); err != nil { // dial now, so that rt counts lock commands only
		t.Fatal(err)
	}
	rt.N.Store(0)
	g := hotspot.New(guardOpts...)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	// A wait budget far above what any acquire needs, even a starved one on
	// a loaded machine; tests of timeouts pass their own.
	l := core.New(c, append([]core.Option{core.WithHandlers(g), core.WithWait(30 * time.Second)}, opts...)...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // ends the clean-ups of failed attempts, before the leak check
	// Load the release script, so that round trips counted later are one
	// per command.
	lease, err := l.Acquire(context.Background(), "warm-up:"+uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.N.Store(0)
	return &instance{client: c, rt: rt, guard: g, locker: l}
}

// key returns the Redis key of name in in's Locker.
func (in *instance) key(t testing.TB, name string) string {
	t.Helper()
	k, err := in.locker.Key(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// hold takes name for the test; the returned function releases it.
func (in *instance) hold(t testing.TB, name string) (*core.Lease, func()) {
	t.Helper()
	lease, err := in.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease, func() {
		if err := lease.Release(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// once acquires name, runs a critical section checked by o (when not nil)
// and releases it, reporting errors to t.
func (in *instance) once(t testing.TB, name string, o *redistest.Overlap) {
	lease, err := in.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Error(err)
		return
	}
	if o != nil {
		o.Enter()()
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Error(err)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// parked waits until n goroutines hold or wait for name's local lock in in,
// and until the n-1 waiters among them are parked in the Guard's wait: from
// then on a release or a hand-off reaches them, and the local wait they
// report includes any time that passes. It needs no sleep, so it holds on a
// machine however busy.
func (in *instance) parked(t testing.TB, name string, n int) {
	t.Helper()
	key := in.key(t, name)
	waitFor(t, fmt.Sprintf("%d goroutines are on %s, %d of them parked", n, name, n-1), func() bool {
		return in.guard.Waiters(key) == n && parkedInWait() >= n-1
	})
}

// parkedInWait counts the goroutines of the process blocked in the select of
// the Guard's wait for a local lock, from a dump of their stacks.
func parkedInWait() int {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	parked := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "hotspot.(*Guard).wait(") {
			parked++
		}
	}
	return parked
}

// settled checks that in's Guard holds nothing for name any more and that
// the lock is free in Redis (within 4 s, well below the TTLs used: a loaded
// machine may take a while to run the undo below, and a stranded lock would
// stay for the whole TTL).
func (in *instance) settled(t testing.TB, name string) {
	t.Helper()
	if n := in.guard.InFlight(); n != 0 {
		t.Errorf("%d acquires still counted in flight", n)
	}
	if n := in.guard.Waiters(in.key(t, name)); n != 0 {
		t.Errorf("%d goroutines still on the local lock", n)
	}
	// An acquire cut by its context during its SET removes what the SET may
	// have stored in the background (core's undo): give it a moment. A lock
	// stranded without a holder would stay for its TTL.
	key := in.key(t, name)
	deadline := time.Now().Add(4 * time.Second)
	for {
		n, err := in.client.Exists(context.Background(), key).Result()
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the lock is still in Redis after 4s (exists=%d, err=%v)", n, err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
