package core_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// shared is the redis-server most tests use; each test locks names of its
// own. Tests that stop or pause Redis start a server of their own.
var shared *redistest.Server

// redisAddr is the address the examples connect to.
var redisAddr string

// quiet drops go-redis's own log lines (dial retries while a test has Redis
// stopped); the tests check the errors that reach the caller instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	testmain.Run(m, func() (func(), error) {
		var err error
		shared, err = redistest.Launch()
		if err != nil {
			return nil, err
		}
		redisAddr = shared.Addr()
		return shared.Close, nil
	})
}

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run, so that
// tests sharing a server (and runs with -count) never see each other's keys.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
}

// leakCheck fails the test if it leaves goroutines behind. Call it first, so
// that it runs after the test's other clean-ups (clients closed, servers
// stopped). The goroutines those clean-ups stop get testmain.LeakPatience
// to end: a loaded machine may take well over goleak's own half second.
func leakCheck(t *testing.T) {
	before := goleak.IgnoreCurrent() // the shared server's and other tests' goroutines
	t.Cleanup(func() {
		if err := testmain.FindLeaks(before); err != nil {
			t.Error(err)
		}
	})
}

// env is one client of a server with a round-trip counter, and a Locker on it.
type env struct {
	client *redis.Client
	rt     *redistest.RoundTrips
	locker *core.Locker
}

// newEnv builds a Locker on its own client of srv (shared when nil), as a
// separate service instance would have; both are closed when the test ends.
func newEnv(t testing.TB, srv *redistest.Server, opts ...core.Option) *env {
	t.Helper()
	if srv == nil {
		srv = shared
	}
	c := srv.Client(t)
	rt := &redistest.RoundTrips{}
	c.AddHook(rt)
	if err := c.Ping(context.Background()).Err(); err != nil { // dial now, so that rt counts lock commands only
		t.Fatal(err)
	}
	rt.N.Store(0)
	l := core.New(c, opts...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // ends the clean-ups of failed attempts, before the leak check
	return &env{client: c, rt: rt, locker: l}
}

// hold takes name with e's Locker for the rest of the test.
func hold(t *testing.T, e *env, name string) *core.Lease {
	t.Helper()
	lease, err := e.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

// observerFunc is an Observer made of a function.
type observerFunc func(core.AcquireEvent) core.LeaseObserver

func (f observerFunc) ObserveAcquire(_ context.Context, e core.AcquireEvent) core.LeaseObserver {
	return f(e)
}

// releaseFunc is a LeaseObserver made of a function.
type releaseFunc func(core.ReleaseEvent)

func (f releaseFunc) ObserveRelease(_ context.Context, e core.ReleaseEvent) { f(e) }

// ctxRoundTrips is a go-redis hook that counts the round trips (commands and
// pipelines) made on contexts that mark returned: those of one operation,
// and not those that a watchdog or a poller makes on the same client in the
// background meanwhile, on contexts of their own.
type ctxRoundTrips struct{ n atomic.Int64 }

type ctxRoundTripsKey struct{}

// mark returns ctx marked for c: the calls made on it (or on a context
// derived from it) are counted.
func (c *ctxRoundTrips) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxRoundTripsKey{}, c)
}

func (c *ctxRoundTrips) count(ctx context.Context) {
	if ctx.Value(ctxRoundTripsKey{}) == c {
		c.n.Add(1)
	}
}

func (c *ctxRoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *ctxRoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(ctx)
		return next(ctx, cmd)
	}
}

func (c *ctxRoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(ctx)
		return next(ctx, cmds)
	}
}

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
