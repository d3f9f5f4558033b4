package core_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

// TestCallOptionPrecedence checks the one precedence rule of Locker.Acquire,
// level by level, by reading the TTL back from Redis and the budget from the
// AcquireCall a Handler sees.
func TestCallOptionPrecedence(t *testing.T) {
	leakCheck(t)
	var deadline time.Time
	var start time.Time
	var route string
	probe := core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		deadline, start, route = req.Deadline, req.Start, req.Route
		_, err := next(ctx, req)
		return err
	}}
	e := newEnv(t, nil, core.WithTTL(10*time.Second), core.WithWait(3*time.Second), core.WithHandlers(probe))
	ctxTTL := core.ContextWithTTL(context.Background(), 20*time.Second)
	ctxWait := core.ContextWithWait(context.Background(), 5*time.Second)
	ctxRoute := core.ContextWithRoute(context.Background(), "/from/context")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		opts  []core.CallOption
		ttl   time.Duration
		wait  time.Duration
		route string
	}{
		{"the Locker's", context.Background(), nil, 10 * time.Second, 3 * time.Second, ""},
		{"a route's default beats the Locker", context.Background(),
			[]core.CallOption{core.RouteTTL(40 * time.Second), core.RouteWait(time.Second)}, 40 * time.Second, time.Second, ""},
		{"the context beats the route", ctxTTL,
			[]core.CallOption{core.RouteTTL(40 * time.Second)}, 20 * time.Second, 3 * time.Second, ""},
		{"the context's wait beats the route's", ctxWait,
			[]core.CallOption{core.RouteWait(time.Second)}, 10 * time.Second, 5 * time.Second, ""},
		{"the call beats the context", ctxTTL,
			[]core.CallOption{core.TTL(30 * time.Second), core.RouteTTL(40 * time.Second)}, 30 * time.Second, 3 * time.Second, ""},
		{"the call's wait beats the context's", ctxWait,
			[]core.CallOption{core.Wait(2 * time.Second), core.RouteWait(time.Second)}, 10 * time.Second, 2 * time.Second, ""},
		{"route from the context", ctxRoute, nil, 10 * time.Second, 3 * time.Second, "/from/context"},
		{"route from the call", ctxRoute, []core.CallOption{core.Route("/from/call")}, 10 * time.Second, 3 * time.Second, "/from/call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease, err := e.locker.Acquire(tc.ctx, uniq(t), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(context.Background())
			// Slack for a slow reply; the TTLs checked are 10 s apart.
			if got := pttl(t, e, lease.Key()); got > tc.ttl || got < tc.ttl-3*time.Second {
				t.Errorf("PTTL = %v, want %v", got, tc.ttl)
			}
			if lease.TTL() != tc.ttl {
				t.Errorf("Lease.TTL = %v, want %v", lease.TTL(), tc.ttl)
			}
			if got := deadline.Sub(start); got != tc.wait {
				t.Errorf("wait budget = %v, want %v", got, tc.wait)
			}
			if route != tc.route {
				t.Errorf("route = %q, want %q", route, tc.route)
			}
		})
	}
}

// TestBadCallOptions: a bad call option fails the Acquire before any I/O,
// and CheckCallOptions finds it without a Locker.
func TestBadCallOptions(t *testing.T) {
	e := newEnv(t, nil)
	for _, opt := range []core.CallOption{core.TTL(0), core.TTL(core.MaxTTL + time.Hour), core.RouteTTL(-time.Second), core.Wait(-1), core.RouteWait(-1), nil} {
		if _, err := e.locker.Acquire(context.Background(), uniq(t), opt); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("Acquire with a bad call option: %v, want ErrInvalidOption", err)
		}
		if err := core.CheckCallOptions(opt); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("CheckCallOptions: %v, want ErrInvalidOption", err)
		}
	}
	if n := e.rt.N.Load(); n != 0 {
		t.Fatalf("bad call options sent %d commands", n)
	}
	if err := core.CheckCallOptions(core.TTL(time.Second), core.Wait(0), core.Route("/x")); err != nil {
		t.Fatal(err)
	}
}

// TestNewWithStore: a Locker on NewRedisStore locks like New, a nil store
// is an option error, and closing the Locker leaves a store it did not build
// open.
func TestNewWithStore(t *testing.T) {
	leakCheck(t)
	c := shared.Client(t)
	store := core.NewRedisStore(c)
	a := core.NewWithStore(store, core.WithWait(0))
	b := core.New(c, core.WithWait(0))
	name := uniq(t)
	lease, err := a.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(context.Background(), name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("New on the same Redis: %v, want ErrTimeout", err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := store.TryAcquire(context.Background(), "after-close:"+name, "t", time.Second, false); !ok || err != nil {
		t.Fatalf("the store after the Locker's Close: %v, %v", ok, err)
	}
	_ = b.Close()
	_ = store.(interface{ Close() error }).Close()
	for _, s := range []core.Store{nil, (*nilStore)(nil)} {
		if err := core.NewWithStore(s).Err(); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("NewWithStore(%T nil): Err = %v, want ErrInvalidOption", s, err)
		}
	}
}

type nilStore struct{ core.Store }

// TestHandlerContractByTypes: a Handler that returns nil without calling
// next fails the Acquire; one that calls next twice gets an error from the
// second call; one whose Release skips next still releases in the store.
func TestHandlerContractByTypes(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	skip := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error { return nil },
	}))
	if lease, err := skip.locker.Acquire(ctx, uniq(t)); lease != nil || err == nil {
		t.Fatalf("a Handler that skipped next: %v, %v; want an error", lease, err)
	}
	var second error
	twice := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			_, err := next(ctx, req)
			_, second = next(ctx, req)
			return err
		},
	}))
	lease, err := twice.locker.Acquire(ctx, uniq(t))
	if err != nil || second == nil {
		t.Fatalf("next twice: %v, second call %v; want the lease, and an error from the second call", err, second)
	}
	_ = lease.Release(ctx)
	keep := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error { return nil },
	}))
	lease, err = keep.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := keep.client.Exists(ctx, lease.Key()).Val(); n != 0 {
		t.Fatal("a Release Handler that skipped next kept the lock in Redis")
	}
}

// TestPluginSlotsIgnoreOrder: an Observer sees the same events whether it is
// given before or after the Handlers and the local queue.
func TestPluginSlotsIgnoreOrder(t *testing.T) {
	leakCheck(t)
	run := func(order func(core.Observer, core.LocalQueue) []core.Option) string {
		var seen []string
		obs := observerFunc(func(e core.AcquireEvent) core.LeaseObserver {
			seen = append(seen, fmt.Sprintf("acquire %v local=%v", e.Outcome, e.HandedOver))
			return releaseFunc(func(e core.ReleaseEvent) { seen = append(seen, "release "+e.Outcome.String()) })
		})
		q := &parkingQueue{parked: make(chan *core.Lease, 1)}
		q.pass.Store(true)
		e := newEnv(t, nil, order(obs, q)...)
		ctx := context.Background()
		name := uniq(t)
		for range 2 {
			lease, err := e.locker.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if prev := <-q.parked; prev != nil { // the last release parked its lease: end it
			_ = e.client.Del(ctx, prev.Key())
		}
		return strings.Join(seen, ",")
	}
	user := core.WithHandlers(core.HandlerFuncs{})
	first := run(func(o core.Observer, q core.LocalQueue) []core.Option {
		return []core.Option{core.WithObservers(o), user, core.WithLocalQueue(q)}
	})
	last := run(func(o core.Observer, q core.LocalQueue) []core.Option {
		return []core.Option{core.WithLocalQueue(q), user, core.WithObservers(o)}
	})
	want := "acquire acquired local=false,release handed_off,acquire acquired local=true,release handed_off"
	if first != want || last != want {
		t.Fatalf("observer saw\n%s\n%s\nwant\n%s", first, last, want)
	}
	if err := core.New(shared.Client(t), core.WithLocalQueue(&parkingQueue{}), core.WithLocalQueue(&parkingQueue{})).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("two local queues: Err = %v, want ErrInvalidOption", err)
	}
}

// TestClassify: one outcome per error, whatever else it wraps.
func TestClassify(t *testing.T) {
	storageDeadline := fmt.Errorf("%w: no reply: %w", core.ErrStorage, os.ErrDeadlineExceeded)
	for _, tc := range []struct {
		err  error
		want core.Outcome
	}{
		{nil, core.OutcomeAcquired},
		{fmt.Errorf("x: %w", core.ErrTimeout), core.OutcomeBusy},
		{storageDeadline, core.OutcomeUnavailable},
		{context.Canceled, core.OutcomeCanceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), core.OutcomeDeadline},
		{core.ErrInvalidName, core.OutcomeInvalid},
		{core.ErrInvalidOption, core.OutcomeInvalid},
		{core.ErrNotHeld, core.OutcomeNotHeld},
		{errors.New("boom"), core.OutcomeError},
	} {
		if got := core.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for _, o := range []core.Outcome{core.OutcomeExpired, core.OutcomeNotHeld, core.OutcomeGaveUp} {
		if !o.Lost() {
			t.Errorf("%v is not a lost outcome", o)
		}
	}
	if core.OutcomeReleased.Lost() || core.OutcomeHandedOff.Lost() || core.Outcome(0).String() != "unknown" {
		t.Error("released and handed off are not lost; the zero outcome is unknown")
	}
}

// TestWarnsWithoutContextTimeout: New logs a warning for a client whose
// reads a context deadline cannot cut, and none for one that can.
func TestWarnsWithoutContextTimeout(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	without := redis.NewClient(&redis.Options{Addr: shared.Addr()})
	with := redis.NewClient(&redis.Options{Addr: shared.Addr(), ContextTimeoutEnabled: true})
	defer without.Close()
	defer with.Close()
	core.New(with)
	if buf.Len() != 0 {
		t.Fatalf("a warning for a client with ContextTimeoutEnabled: %s", buf.String())
	}
	core.New(without)
	if !strings.Contains(buf.String(), "ContextTimeoutEnabled") {
		t.Fatalf("no warning for a client without ContextTimeoutEnabled: %q", buf.String())
	}
}

// deadlineStore answers every call with an error of its own the moment the
// call's deadline passes, as a client whose socket deadline fires before the
// caller's context timer does.
type deadlineStore struct{ core.Store }

func (deadlineStore) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if dl, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(dl))
	}
	return false, 0, errors.New("no reply in time")
}

// TestCallerDeadlineDuringAStoreCall: when the caller's deadline passes
// during a store call, Acquire reports context.DeadlineExceeded, whichever
// of the store's error and the context's timer comes first.
func TestCallerDeadlineDuringAStoreCall(t *testing.T) {
	l := core.NewWithStore(deadlineStore{}, core.WithIOTimeout(time.Minute))
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		_, err := l.Acquire(ctx, "order:42")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrStorage) {
			t.Fatalf("acquire %d: %v, want context.DeadlineExceeded alone", i, err)
		}
	}
}
