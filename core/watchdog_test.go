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
	// Renewals every 500 ms, each with about 2 s to succeed before the
	// watchdog gives up (TTL less two intervals): a loaded machine's stalls
	// and slow replies stay well within it.
	const ttl, every = 3 * time.Second, 500 * time.Millisecond
	e := newEnv(t, nil, core.WithTTL(ttl), core.WithWatchdog(), core.WithWatchdogInterval(every))
	other := newEnv(t, nil, core.WithWait(0))
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done := lease.Done()
	for i := 1; i <= 3; i++ {
		time.Sleep(ttl / 2)
		if _, err := other.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
			t.Fatalf("after %d halves of the TTL another locker got %v, want ErrTimeout: the watchdog did not renew", i, err)
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
	// A TTL of a minute: renewals every third of it (20 s) without the
	// option, every 40 ms with it. Three renewals within 10 s tell the two
	// apart on any schedule.
	const ttl = time.Minute
	e := newEnv(t, nil, core.WithTTL(ttl), core.WithWatchdogInterval(40*time.Millisecond))
	ctx := context.Background()
	lease := hold(t, e, uniq(t))
	before := e.rt.N.Load()
	start := time.Now()
	for e.rt.N.Load()-before < 3 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d renewals in %v with a 40ms interval", e.rt.N.Load()-before, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := pttl(t, e, lease.Key()); d < ttl-5*time.Second {
		t.Fatalf("PTTL = %v, want the full %v TTL renewed", d, ttl)
	}
	// A per-request TTL shorter than two intervals is renewed every third:
	// with an interval of 3 s, a TTL of 4.5 s is renewed every 1.5 s (each
	// renewal with about 1.5 s to succeed), not every 3 s, when it would
	// come too late. It is checked past the TTL.
	const shortTTL = 4500 * time.Millisecond
	slow := newEnv(t, nil, core.WithWatchdogInterval(3*time.Second))
	acquired := time.Now()
	short, err := slow.locker.Acquire(core.ContextWithTTL(ctx, shortTTL), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(shortTTL + 500*time.Millisecond - time.Since(acquired))
	if got := e.client.Get(ctx, short.Key()).Val(); got != short.Token() || short.Lost() {
		t.Fatalf("a lease with a TTL under two intervals was not kept (lost %v)", short.Lost())
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
	case <-time.After(30 * time.Second):
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
//
// The TTL is long enough for the margin between Done and the expiry (an
// interval, 1.5 s) to absorb a loaded machine's stalls before the test reads
// the key; the I/O timeout, for the acquire and the first renewal to succeed.
func TestWatchdogCutClosesDoneBeforeTheLockExpires(t *testing.T) {
	leakCheck(t)
	const ttl = 4500 * time.Millisecond
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			client, p := srv.ProxiedClient(t)
			admin := srv.Client(t)
			l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(time.Second))
			t.Cleanup(func() { _ = l.Close() })
			ctx := context.Background()
			lease, err := l.Acquire(ctx, uniq(t))
			if err != nil {
				t.Fatal(err)
			}
			if !waitRenewed(t, lease) { // at least one renewal
				t.Fatal("the watchdog lost the lease before the fault")
			}
			if fault == "cut" {
				p.Cut()
			} else {
				p.Blackhole()
			}
			cut := time.Now()
			select {
			case <-lease.Done():
			case <-time.After(30 * time.Second):
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
// watchdog must not wait a full interval from the hand-off.
func TestWatchdogOfAHandedOffLease(t *testing.T) {
	leakCheck(t)
	// A renewal sent an interval (4 s) after the acquire has 1.9 s before
	// its give-up time (the validity, 9.9 s, less an interval); one sent an
	// interval after the hand-off, made 2.5 s after the acquire, would come
	// 0.6 s after it. A hand-off up to 3.3 s after the acquire (2/3 of the
	// TTL left) passes the lease on without a round trip.
	const ttl = 10 * time.Second
	e := newEnv(t, nil, core.WithTTL(ttl), core.WithWatchdog(), core.WithWatchdogInterval(4*time.Second))
	ctx := context.Background()
	first, err := e.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	second, err := first.Handoff(ctx, &core.AcquireCall{Name: first.Name(), Key: first.Key(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if !waitRenewed(t, second) {
		t.Fatalf("the handed-off lease was given up %v after the acquire; Redis holds %q", time.Since(first.ValidUntil().Add(-ttl)), e.client.Get(ctx, second.Key()).Val())
	}
	if second.Lost() || e.client.Get(ctx, second.Key()).Val() != second.Token() {
		t.Fatal("the handed-off lease is not held after its renewal")
	}
}

// waitRenewed waits until the watchdog renewed lease (its validity moved
// on) and reports true, or until the lease is done and reports false. It
// fails the test after a minute of neither.
func waitRenewed(t *testing.T, lease *core.Lease) bool {
	t.Helper()
	from := lease.ValidUntil()
	deadline := time.After(time.Minute)
	for {
		if lease.ValidUntil().After(from) {
			return true
		}
		select {
		case <-lease.Done():
			return lease.ValidUntil().After(from) && !lease.Lost()
		case <-deadline:
			t.Fatal("the watchdog neither renewed the lease nor gave it up within a minute")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestHandoffOfALeaseTheWatchdogGaveUp: a lease lost by its watchdog (Redis
// unreachable) may still hold its key once Redis is back, and no release ran.
// Handing it off must fail and delete the key rather than strand it.
func TestHandoffOfALeaseTheWatchdogGaveUp(t *testing.T) {
	leakCheck(t)
	// The watchdog gives up an interval (2 s) before the lock can expire:
	// time for the test to find the key still there on a loaded machine.
	const ttl = 6 * time.Second
	srv := redistest.Start(t)
	client, p := srv.ProxiedClient(t)
	admin := srv.Client(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(time.Second))
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done stayed open with Redis unreachable")
	}
	p.Restore()
	if !lease.Lost() {
		t.Fatal("Lost() = false after the watchdog gave up")
	}
	if admin.Get(ctx, lease.Key()).Val() != lease.Token() {
		t.Skip("the key expired before the check; nothing left to strand")
	}
	_, err = lease.Handoff(ctx, &core.AcquireCall{Name: lease.Name(), Key: lease.Key(), TTL: ttl})
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
	// A TTL that a loaded machine's slow reply does not use up before the
	// lease is checked fresh.
	e := newEnv(t, nil, core.WithTTL(2*time.Second))
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
//
// A renewal has a third of the TTL less 1% before the watchdog gives up:
// the round trip of TTL/6 leaves the right timing about 1.1 s to spare on
// a loaded machine, while two round trips exceed it on any schedule.
func TestWatchdogOnASlowLink(t *testing.T) {
	leakCheck(t)
	const ttl = 7200 * time.Millisecond
	srv := redistest.Start(t)
	client, p := srv.ProxiedClient(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(5*time.Second))
	t.Cleanup(func() { _ = l.Close() })
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
	for i := 0; i < 2; i++ { // the first renewal, and the one after it
		if !waitRenewed(t, lease) {
			t.Fatalf("the watchdog lost a healthy lease on a link with a round trip of %v (TTL %v)", 2*p.Delay(), ttl)
		}
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
//
// The figures leave a loaded machine room: the watchdog gives up an interval
// (2 s) before the expiry, checked against a sixth of the TTL (1 s); a
// Release that waited for the stuck renewal would wait for the client's read
// timeout of 15 s, checked against 5 s.
func TestWatchdogWithAClientThatIgnoresDeadlines(t *testing.T) {
	leakCheck(t)
	const ttl = 6 * time.Second
	const readTimeout = 15 * time.Second
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	admin := srv.Client(t)
	l := core.New(client, core.WithTTL(ttl), core.WithWatchdog(), core.WithIOTimeout(time.Second))
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	lease, err := l.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	if !waitRenewed(t, lease) { // after the first renewal
		t.Fatal("the watchdog lost the lease before the partition")
	}
	p.Blackhole()
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
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
	for p.Stats().Accepted == accepted && time.Since(start) < readTimeout {
		time.Sleep(5 * time.Millisecond)
	}
	waited := time.Since(start)
	p.Restore() // ends the calls stuck in the client
	if err := <-released; err != nil && !errors.Is(err, core.ErrStorage) && !errors.Is(err, core.ErrNotHeld) {
		t.Fatal(err)
	}
	t.Logf("Release sent its command %v after it was called", waited.Round(time.Millisecond))
	if waited > 5*time.Second {
		t.Fatalf("Release waited %v for a renewal stuck in the client before it sent its command", waited)
	}
}

// TestExtendReschedulesTheWatchdog: an Extend to a TTL shorter than the
// watchdog's next renewal is away must bring that renewal forward, or the
// lock expires before it.
func TestExtendReschedulesTheWatchdog(t *testing.T) {
	leakCheck(t)
	// Renewed every 1.5 s after the Extend, each renewal with 1.5 s to
	// succeed; on the old schedule the first renewal would come at 10 s.
	const short = 4500 * time.Millisecond
	e := newEnv(t, nil, core.WithTTL(30*time.Second), core.WithWatchdog()) // renewed every 10s
	ctx := context.Background()
	lease := hold(t, e, uniq(t))
	if err := lease.Extend(ctx, short); err != nil {
		t.Fatal(err)
	}
	if !waitRenewed(t, lease) {
		t.Fatalf("the lease was lost after an Extend to %v: the watchdog kept its old schedule", short)
	}
	if d := pttl(t, e, lease.Key()); d <= 0 || d > short {
		t.Fatalf("PTTL = %v, want renewals to the TTL of the Extend, %v", d, short)
	}
}
