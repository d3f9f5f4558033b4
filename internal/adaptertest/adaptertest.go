// Package adaptertest holds the test scaffolding that the adapters' tests
// share: a TestMain with a shared redis-server and a leak check, a round-trip
// counter, unique names and a barrier that proves requests run in parallel,
// and the lock-mode scenarios (RunModes) that every HTTP adapter runs with
// a constructor of its own handlers.
package adaptertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// Shared is the redis-server that a package's tests share (set by Main).
var Shared *redistest.Server

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// Main runs a package's tests with Shared started, and fails the run on a
// goroutine leak. Call it from TestMain. The functions before run once
// Shared is up, before the tests: to give examples its address, say.
func Main(m *testing.M, before ...func()) {
	redis.SetLogger(quiet{}) // dial retries while a test has Redis stopped
	var err error
	if Shared, err = redistest.Launch(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range before {
		f()
	}
	code := m.Run()
	Shared.Close()
	if code == 0 {
		if err := testmain.FindLeaks(Ignore...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LeakCheck fails the test if it leaves goroutines behind. Call it first.
func LeakCheck(t *testing.T) {
	opts := append([]goleak.Option{goleak.IgnoreCurrent()}, Ignore...)
	t.Cleanup(func() {
		if err := testmain.FindLeaks(opts...); err != nil {
			t.Error(err)
		}
	})
}

// Ignore lists the goroutines that Main and LeakCheck do not count as
// leaks: those a framework starts once, on its first request, and never
// ends (fasthttp's clock, for Fiber). Set it in TestMain, before Main.
var Ignore []goleak.Option

var seq atomic.Int64

// Uniq returns a string of the test's own, fresh on every call.
func Uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
}

// Env is a client of a server with a round-trip counter, and a Locker on it.
type Env struct {
	Client *redis.Client
	RT     *redistest.RoundTrips
	Locker *core.Locker
}

// NewEnv builds a Locker on a new client of srv (Shared when nil); both are
// closed when the test ends.
func NewEnv(t testing.TB, srv *redistest.Server, opts ...core.Option) *Env {
	t.Helper()
	if srv == nil {
		srv = Shared
	}
	c := srv.Client(t)
	rt := &redistest.RoundTrips{}
	c.AddHook(rt)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	rt.N.Store(0)
	l := core.New(c, opts...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // ends the clean-ups of failed attempts, before the leak check
	return &Env{Client: c, RT: rt, Locker: l}
}

// Exists reports whether the lock of name is in Redis.
func (e *Env) Exists(t testing.TB, name string) bool {
	t.Helper()
	key, err := e.Locker.Key(name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.Client.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Barrier lets n parties meet: Arrive returns once all n have arrived, or
// false after the timeout. Handlers of different resources meeting at a
// barrier prove that they ran at the same time, without timing assertions.
type Barrier struct {
	n       int64
	arrived atomic.Int64
	all     chan struct{}
}

// NewBarrier returns a barrier for n parties.
func NewBarrier(n int) *Barrier {
	return &Barrier{n: int64(n), all: make(chan struct{})}
}

// Arrive registers one party and waits for the others.
func (b *Barrier) Arrive(timeout time.Duration) bool {
	if b.arrived.Add(1) == b.n {
		close(b.all)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-b.all:
		return true
	case <-t.C:
		return false
	}
}

// Hold takes name with e's Locker for the rest of the test, as another
// instance of the service would.
func (e *Env) Hold(t testing.TB, name string) *core.Lease {
	t.Helper()
	lease, err := e.Locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

// Exclusion fires concurrent requests for several orders at a handler and
// checks that requests for one order never overlap while different orders
// run in parallel: the first request of each order waits at a barrier for
// the first of every other order, which only works if they run at once.
type Exclusion struct {
	orders   []string
	perOrder int
	per      map[string]*redistest.Overlap
	first    map[string]*atomic.Bool
	all      redistest.Overlap
	meet     *Barrier
	missed   atomic.Bool
}

// NewExclusion prepares perOrder requests for each of orders.
func NewExclusion(orders []string, perOrder int) *Exclusion {
	x := &Exclusion{orders: orders, perOrder: perOrder, per: map[string]*redistest.Overlap{},
		first: map[string]*atomic.Bool{}, meet: NewBarrier(len(orders))}
	for _, o := range orders {
		x.per[o], x.first[o] = &redistest.Overlap{}, &atomic.Bool{}
	}
	return x
}

// Handle is the critical section of a request for order; handlers call it.
func (x *Exclusion) Handle(order string) {
	defer x.per[order].Enter()()
	defer x.all.Enter()()
	if x.first[order].CompareAndSwap(false, true) && !x.meet.Arrive(10*time.Second) {
		x.missed.Store(true)
	}
	time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
}

// Run sends all the requests at once with call, then checks what the
// handler saw.
func (x *Exclusion) Run(t *testing.T, call func(order string) error) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < x.perOrder; i++ {
		for _, o := range x.orders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := call(o); err != nil {
					t.Errorf("order %s: %v", o, err)
				}
			}()
		}
	}
	wg.Wait()
	for id, o := range x.per {
		if o.Entries() != int64(x.perOrder) || o.Overlaps() != 0 {
			t.Errorf("order %s: %d requests, %d overlapped", id, o.Entries(), o.Overlaps())
		}
	}
	if x.missed.Load() || x.all.Overlaps() == 0 {
		t.Fatalf("different orders did not run in parallel (barrier missed: %v, cross-order overlaps: %d)", x.missed.Load(), x.all.Overlaps())
	}
}

// Stalled returns a Locker, with the options opts, on a "Redis" that accepts
// connections and never replies, as a server does during a failover or
// behind a partition: every call ends at the I/O timeout (core.WithIOTimeout;
// pass a short one).
func Stalled(t testing.TB, opts ...core.Option) *core.Locker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	// One dial attempt, no retry backoff: a clean-up that redials the stalled
	// listener after it is closed ends at once, not after go-redis's 5
	// attempts 100 ms apart, which outlast the leak check's patience.
	client := redis.NewClient(&redis.Options{Addr: lis.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	var l *core.Locker
	t.Cleanup(func() {
		if l != nil {
			_ = l.Close() // ends the clean-ups of failed attempts, before the leak check
		}
		_ = client.Close()
		_ = lis.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	l = core.New(client, opts...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return l
}

// Routes records the route label (core.AcquireCall.Route) of the acquires of
// the Lockers built with core.WithHandlers(routes.Handler()).
type Routes struct{ last atomic.Value }

// Handler returns the core.Handler that records the labels.
func (r *Routes) Handler() core.Handler {
	return core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		r.last.Store(req.Route)
		_, err := next(ctx, req)
		return err
	}}
}

// Last returns the label of the last acquire, "" before any.
func (r *Routes) Last() string {
	s, _ := r.last.Load().(string)
	return s
}

// SlowStore is a Store whose TryAcquire takes Delay more: a test that
// bounds a time measured around a store call (a local wait) against the
// delay stays true on a loaded machine, where a bound of a few
// milliseconds would not.
type SlowStore struct {
	core.Store
	Delay time.Duration
}

// TryAcquire sleeps Delay, then tries the wrapped store.
func (s *SlowStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	time.Sleep(s.Delay)
	return s.Store.TryAcquire(ctx, key, token, ttl, fenced)
}
