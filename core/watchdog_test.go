package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

func TestWatchdogKeepsTheLockPastItsTTL(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	const ttl = time.Second // the watchdog's margin, a third of it, absorbs a loaded machine's stalls
	e := newEnv(t, nil, core.WithTTL(ttl), core.WithWatchdog())
	other := newEnv(t, nil, core.WithWait(0))
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done := lease.Done()
	for i := 1; i <= 3; i++ {
		time.Sleep(2 * ttl / 3)
		if _, err := other.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
			t.Fatalf("after %d thirds of the TTL another locker got %v, want ErrTimeout: the watchdog did not renew", 2*i, err)
		}
	}
	select {
	case <-done:
		t.Fatal("Done closed while the watchdog kept the lock")
	default:
	}
	if got := e.client.Get(ctx, lease.Key()).Val(); got != lease.Token() {
		t.Fatalf("the key holds %q, want the lease's token", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// No renewal after the release: the round-trip count stays put.
	before := e.rt.N.Load()
	time.Sleep(200 * time.Millisecond)
	if n := e.rt.N.Load() - before; n != 0 {
		t.Fatalf("%d commands after the release: the watchdog did not stop", n)
	}
}

func TestWatchdogIntervalOption(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(10*time.Second), core.WithWatchdogInterval(40*time.Millisecond))
	ctx := context.Background()
	lease := hold(t, e, uniq(t))
	before := e.rt.N.Load()
	time.Sleep(300 * time.Millisecond)
	if n := e.rt.N.Load() - before; n < 3 {
		t.Fatalf("%d renewals in 300ms with a 40ms interval", n)
	}
	if d := pttl(t, e, lease.Key()); d < 9*time.Second {
		t.Fatalf("PTTL = %v, want the full 10s TTL renewed", d)
	}
	// A per-request TTL shorter than two intervals is renewed every third.
	slow := newEnv(t, nil, core.WithWatchdogInterval(time.Second))
	short, err := slow.locker.Acquire(core.ContextWithTTL(ctx, 1200*time.Millisecond), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := e.client.Get(ctx, short.Key()).Val(); got != short.Token() {
		t.Fatal("a lease with a TTL under two intervals was not kept")
	}
	if err := short.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := core.New(e.client, core.WithWatchdogInterval(0)).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("WithWatchdogInterval(0): Err() = %v, want ErrInvalidOption", err)
	}
}

func TestWatchdogClosesDoneWhenTheLockIsGone(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(300*time.Millisecond), core.WithWatchdog())
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	e.client.Set(ctx, lease.Key(), "someone-else", time.Minute) // lost, and taken
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done stayed open after the watchdog found the lock taken")
	}
	if err := lease.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend after the loss = %v, want ErrNotHeld", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Release after the loss = %v, want ErrNotHeld", err)
	}
	if got := e.client.Get(ctx, lease.Key()).Val(); got != "someone-else" {
		t.Fatalf("the other holder's key was touched: %q", got)
	}
}

// TestWatchdogCutClosesDoneBeforeTheLockExpires cuts the network between the
// holder and Redis, both ways a network can fail: connections reset (Cut) and
// packets swallowed (Blackhole). Done must close while the key in Redis is
// still the lease's, so that no one else can hold the name yet.
func TestWatchdogCutClosesDoneBeforeTheLockExpires(t *testing.T) {
	leakCheck(t)
	const ttl = 600 * time.Millisecond
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			client, p := srv.ProxiedClient(t)
			admin := srv.Client(t)
			l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(100*time.Millisecond))
			ctx := context.Background()
			lease, err := l.Acquire(ctx, uniq(t))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(ttl / 2) // at least one renewal
			if fault == "cut" {
				p.Cut()
			} else {
				p.Blackhole()
			}
			cut := time.Now()
			select {
			case <-lease.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done stayed open after the cut")
			}
			toDone := time.Since(cut)
			pttl := admin.PTTL(ctx, lease.Key()).Val()
			holder := admin.Get(ctx, lease.Key()).Val()
			t.Logf("%s: Done closed %v after the cut, with the lock's PTTL in Redis still %v (TTL %v)", fault, toDone.Round(time.Millisecond), pttl, ttl)
			if holder != lease.Token() || pttl <= 0 {
				t.Fatalf("Done closed after the lock had expired in Redis (holder %q, PTTL %v)", holder, pttl)
			}
			if toDone >= ttl {
				t.Fatalf("Done closed %v after the cut, not before the TTL of %v", toDone, ttl)
			}
			p.Restore()
			err = lease.Release(ctx)
			if err != nil && !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrStorage) {
				t.Fatalf("release after the cut: %v", err)
			}
		})
	}
}

// TestWatchdogOfAHandedOffLease checks that a lease handed off without a
// round trip, which inherits an older expiry, is renewed in time: its
// watchdog must not wait a full interval from the handoff.
func TestWatchdogOfAHandedOffLease(t *testing.T) {
	leakCheck(t)
	// A renewal sent an interval after the acquire has 188 ms before its
	// give-up time; one sent an interval after the handoff would come 62 ms
	// after it.
	const ttl = time.Second
	e := newEnv(t, nil, core.WithTTL(ttl), core.WithWatchdog(), core.WithWatchdogInterval(400*time.Millisecond))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	second, err := first.Handoff(ctx, &core.Request{Name: first.Name(), Key: first.Key(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	select {
	case <-second.Done():
		t.Fatalf("the handed-off lease was given up %v after the handoff; Redis holds %q", time.Since(first.ValidUntil().Add(-ttl)), e.client.Get(ctx, second.Key()).Val())
	case <-time.After(2 * ttl):
	}
	if second.Lost() || e.client.Get(ctx, second.Key()).Val() != second.Token() {
		t.Fatal("the handed-off lease is not held after two TTLs with the watchdog on")
	}
}

// TestHandoffOfALeaseTheWatchdogGaveUp: a lease lost by its watchdog (Redis
// unreachable) may still hold its key once Redis is back, and no release ran.
// Handing it off must fail and delete the key rather than strand it.
func TestHandoffOfALeaseTheWatchdogGaveUp(t *testing.T) {
	leakCheck(t)
	const ttl = 900 * time.Millisecond
	srv := redistest.Start(t)
	client, p := srv.ProxiedClient(t)
	admin := srv.Client(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(50*time.Millisecond))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done stayed open with Redis unreachable")
	}
	p.Restore()
	if !lease.Lost() {
		t.Fatal("Lost() = false after the watchdog gave up")
	}
	if admin.Get(ctx, lease.Key()).Val() != lease.Token() {
		t.Skip("the key expired before the check; nothing left to strand")
	}
	_, err = lease.Handoff(ctx, &core.Request{Name: lease.Name(), Key: lease.Key(), TTL: ttl})
	if !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Handoff of a lost lease = %v, want ErrNotHeld", err)
	}
	if n := admin.Exists(ctx, lease.Key()).Val(); n != 0 {
		t.Fatalf("the lost lease's key is left in Redis with no holder (PTTL %v)", admin.PTTL(ctx, lease.Key()).Val())
	}
	_ = lease.Release(ctx)
}

func TestLost(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, nil, core.WithTTL(100*time.Millisecond))
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := e.locker.Acquire(core.ContextWithLease(ctx, lease), lease.Name())
	if err != nil {
		t.Fatal(err)
	}
	if lease.Lost() || nested.Lost() {
		t.Fatal("a fresh lease reports Lost")
	}
	<-lease.Done()
	if !lease.Lost() || !nested.Lost() {
		t.Fatal("a lease past its validity does not report Lost")
	}
	_ = lease.Release(ctx)
	released, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if released.Lost() {
		t.Fatal("a released lease reports Lost")
	}
}

// TestWatchdogOnASlowLink renews a lease over a link whose round trip is a
// sixth of the TTL, to a server that has never run the renewal script: the
// renewals must keep the lease, which they do only if each is sent an
// interval after the previous one was sent (not after its reply came back)
// and the first one is not two round trips (EVALSHA, NOSCRIPT, EVAL).
func TestWatchdogOnASlowLink(t *testing.T) {
	leakCheck(t)
	const ttl = 1200 * time.Millisecond
	srv := redistest.Start(t)
	client, p := srv.ProxiedClient(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog())
	ctx := context.Background()
	// A new connection costs round trips of its own (HELLO and more), which
	// count against the first lease's validity: start with one open.
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(ttl / 12) // a round trip of TTL/6
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
		t.Fatalf("the watchdog lost a healthy lease on a link with a round trip of %v (TTL %v)", 2*p.Delay(), ttl)
	case <-time.After(2 * ttl):
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogWithAClientThatIgnoresDeadlines partitions the network under
// a lease renewed through a client with go-redis's defaults
// (ContextTimeoutEnabled off: a call waits for the client's read timeout,
// whatever its context says). The watchdog must still give the lease up an
// interval before the lock can expire, and Release must not wait for the
// renewal stuck in the client before it sends its own command.
func TestWatchdogWithAClientThatIgnoresDeadlines(t *testing.T) {
	leakCheck(t)
	const ttl = 1500 * time.Millisecond
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 3 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	admin := srv.Client(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(200*time.Millisecond))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // after the first renewal
	p.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done stayed open with the network partitioned")
	}
	left := admin.PTTL(ctx, lease.Key()).Val()
	t.Logf("Done closed with the lock's PTTL in Redis still %v (TTL %v)", left, ttl)
	if left < ttl/6 {
		t.Fatalf("Done closed %v before the lock expires in Redis: the request has no time to stop", left)
	}

	// Release sends its compare-and-delete on a connection of its own: a new
	// one, as the renewal holds the other.
	accepted := p.Stats().Accepted
	start := time.Now()
	released := make(chan error, 1)
	go func() { released <- lease.Release(ctx) }()
	for p.Stats().Accepted == accepted && time.Since(start) < 5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	waited := time.Since(start)
	p.Restore() // ends the calls stuck in the client
	if err := <-released; err != nil && !errors.Is(err, core.ErrStorage) && !errors.Is(err, core.ErrNotHeld) {
		t.Fatal(err)
	}
	t.Logf("Release sent its command %v after it was called", waited.Round(time.Millisecond))
	if waited > time.Second {
		t.Fatalf("Release waited %v for a renewal stuck in the client before it sent its command", waited)
	}
}

// TestExtendReschedulesTheWatchdog: an Extend to a TTL shorter than the
// watchdog's next renewal is away must bring that renewal forward, or the
// lock expires before it.
func TestExtendReschedulesTheWatchdog(t *testing.T) {
	leakCheck(t)
	const short = time.Second
	e := newEnv(t, nil, core.WithTTL(30*time.Second), core.WithWatchdog()) // renewed every 10s
	ctx := context.Background()
	lease := hold(t, e, uniq(t))
	if err := lease.Extend(ctx, short); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
		t.Fatalf("the lease was lost after an Extend to %v: the watchdog kept its old schedule", short)
	case <-time.After(3 * short / 2):
	}
	if d := pttl(t, e, lease.Key()); d <= 0 || d > short {
		t.Fatalf("PTTL = %v, want renewals to the TTL of the Extend, %v", d, short)
	}
}
