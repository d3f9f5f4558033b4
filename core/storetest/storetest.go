package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Options adapts the suite to a store. The zero value suits a store that
// counts TTLs in milliseconds and that the test cannot take down.
type Options struct {
	// TTLResolution is the granularity at which the store counts a lock's
	// TTL: a lock may expire up to this much earlier or later than its TTL
	// says. Default 1 ms (Redis). A store that counts whole seconds (etcd
	// leases, Memcached) sets time.Second. The TTLs the suite waits out are
	// at least three times the resolution, so that a coarse store makes the
	// suite slower, not flaky.
	TTLResolution time.Duration

	// Down makes the store unreachable for every client newStore has
	// returned (stop its server, cut a proxy in front of it) until Up brings
	// it back. The suite calls Up before the subtest that called Down ends,
	// whether it passed or not. Down and Up go together; without them the
	// subtest StoreDownIsErrStorage is skipped.
	Down func(t *testing.T)
	// Up undoes Down. The store must answer again soon after it (within a
	// few seconds); its clients may reconnect in the meantime.
	Up func(t *testing.T)
}

// Run runs the conformance suite on the store that newStore builds: every
// property, each as a subtest of t. It is RunWith with the zero Options.
//
// newStore is called at least once per subtest, and several times in some:
// every call returns a new client of one and the same store, as another
// process would have (its own connections, over the same data). The suite
// closes a store that implements io.Closer when the subtest that made it
// ends, before the clean-ups newStore registered on t run; newStore must
// not close it itself.
//
// Keys and lock names are fresh on every run ("storetest:{...}"), so that
// the store may be shared with other tests and runs. Locks are released
// when a subtest ends, also when it fails.
func Run(t *testing.T, newStore func(t *testing.T) core.Store) {
	t.Helper()
	RunWith(t, newStore, Options{})
}

// RunWith is Run with options for stores that count TTLs coarsely or that
// the test can take down (see Options).
func RunWith(t *testing.T, newStore func(t *testing.T) core.Store, opts Options) {
	t.Helper()
	if newStore == nil {
		t.Fatal("storetest: newStore is nil")
	}
	if err := opts.check(); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, p property) {
		t.Run(p.name, func(t *testing.T) {
			p.check(newSuite(t, p.name, func() core.Store { return newStore(t) }, opts, t))
		})
	}
	for _, p := range properties {
		run(t, p)
	}
	t.Run(holdsGroup, func(t *testing.T) {
		for _, p := range holdProperties {
			run(t, p)
		}
	})
	t.Run(inspectGroup, func(t *testing.T) {
		for _, p := range inspectProperties {
			run(t, p)
		}
	})
}

// check reports what is wrong with o.
func (o Options) check() error {
	switch {
	case o.TTLResolution < 0:
		return fmt.Errorf("storetest: Options.TTLResolution %v is negative", o.TTLResolution)
	case (o.Down == nil) != (o.Up == nil):
		return fmt.Errorf("storetest: Options.Down and Options.Up go together: set both or neither")
	}
	return nil
}

// tb is the part of *testing.T that the properties use. The package's own
// tests pass a recorder instead, to show that a broken store fails them.
// Like *testing.T, Fatalf and Skipf may only be called from the goroutine
// that runs the property; the others call Errorf.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
}

// property is one property of the contract, run as one subtest.
type property struct {
	name  string
	check func(s *suite)
}

// callTimeout bounds each call the suite makes on a store directly, and
// lockerIOTimeout each one the Lockers make (WithIOTimeout).
const (
	callTimeout     = 5 * time.Second
	lockerIOTimeout = 2 * time.Second
)

// suite is what a property works with: the T that records its verdict, a
// way to get new clients of the store, and timings scaled to the store's
// TTL resolution.
type suite struct {
	t        tb
	name     string // the property's, in keys and lock names
	newStore func() core.Store
	down, up func() // nil: the store cannot be taken down

	res   time.Duration // TTL resolution
	ttl   time.Duration // the short TTL of locks that are left to expire
	long  time.Duration // the TTL of locks that must not expire during a subtest
	slack time.Duration // how late past its TTL a lock may still be seen held
	poll  time.Duration // the pause between two attempts while waiting for an expiry

	leaving map[string]bool // tokens that leave the queue when the subtest ends (enqueue)
}

// newSuite prepares a property's run; hooks is the *testing.T that Down
// and Up get.
func newSuite(t tb, name string, newStore func() core.Store, opts Options, hooks *testing.T) *suite {
	res := opts.TTLResolution
	if res == 0 {
		res = time.Millisecond
	}
	ttl := roundUp(max(300*time.Millisecond, 3*res), res)
	s := &suite{
		t:        t,
		name:     name,
		newStore: newStore,
		res:      res,
		ttl:      ttl,
		long:     roundUp(max(30*time.Second, 10*ttl), res),
		slack:    250*time.Millisecond + ttl/2,
		poll:     max(ttl/30, 5*time.Millisecond),
		leaving:  map[string]bool{},
	}
	if opts.Down != nil {
		s.down = func() { opts.Down(hooks) }
		s.up = func() { opts.Up(hooks) }
	}
	return s
}

// roundUp rounds d up to a whole multiple of unit.
func roundUp(d, unit time.Duration) time.Duration {
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

// store returns a new client of the store, closed when the subtest ends.
func (s *suite) store() core.Store {
	s.t.Helper()
	st := s.newStore()
	if st == nil {
		s.t.Fatalf("storetest: newStore returned a nil store")
	}
	if c, ok := st.(io.Closer); ok {
		s.t.Cleanup(func() {
			if err := c.Close(); err != nil {
				s.t.Errorf("storetest: Close of %T: %v", st, err)
			}
		})
	}
	return st
}

// random returns a fresh random string: 26 base32 characters, 130 bits.
func random() string { return rand.Text() }

// token returns a fresh token, as the Locker draws one per attempt.
func token() string { return random() }

// key returns a fresh key of the property, shaped like a Locker's key.
func (s *suite) key() string {
	return "storetest:{" + s.lockName() + "}"
}

// lockName returns a fresh lock name of the property.
func (s *suite) lockName() string {
	return s.name + ":" + random()[:12]
}

// call returns the context of one store call.
func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// tryAcquire calls st.TryAcquire and fails the subtest on an error. A lock it
// takes is released when the subtest ends.
func (s *suite) tryAcquire(st core.Store, key, tok string, ttl time.Duration, fenced bool) (bool, int64) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, fence, err := st.TryAcquire(ctx, key, tok, ttl, fenced)
	if err != nil {
		s.t.Fatalf("storetest: TryAcquire(%q, ttl %v, fenced %v): %v", key, ttl, fenced, err)
	}
	if ok {
		s.t.Cleanup(func() {
			ctx, cancel := call()
			defer cancel()
			_, _ = st.Release(ctx, key, tok)
		})
	}
	return ok, fence
}

// acquire takes key for tok, failing the subtest if it cannot.
func (s *suite) acquire(st core.Store, key, tok string, ttl time.Duration, fenced bool) int64 {
	s.t.Helper()
	ok, fence := s.tryAcquire(st, key, tok, ttl, fenced)
	if !ok {
		s.t.Fatalf("storetest: TryAcquire(%q, ttl %v, fenced %v) of a free key reported false", key, ttl, fenced)
	}
	return fence
}

// release calls st.Release and fails the subtest on an error.
func (s *suite) release(st core.Store, key, tok string) bool {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, err := st.Release(ctx, key, tok)
	if err != nil {
		s.t.Fatalf("storetest: Release(%q): %v", key, err)
	}
	return ok
}

// extend calls st.Extend and fails the subtest on an error.
func (s *suite) extend(st core.Store, key, tok string, ttl time.Duration, fenced bool) (bool, int64) {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	ok, fence, err := st.Extend(ctx, key, tok, ttl, fenced)
	if err != nil {
		s.t.Fatalf("storetest: Extend(%q, ttl %v, fenced %v): %v", key, ttl, fenced, err)
	}
	return ok, fence
}

// held reports whether key is held, by trying to take it with a fresh token
// (and giving it back if that worked).
func (s *suite) held(st core.Store, key string) bool {
	s.t.Helper()
	tok := token()
	if ok, _ := s.tryAcquire(st, key, tok, s.long, false); ok {
		s.release(st, key, tok)
		return false
	}
	return true
}

// earliest is how soon a lock taken with ttl may expire after its acquire
// was sent: TTL resolution, and 1% for the clock rates of the store and of
// this process.
func (s *suite) earliest(ttl time.Duration) time.Duration {
	return ttl - s.res - ttl/100
}

// surelyExpired is how long after its acquire returned a lock taken with
// ttl has surely expired in a store that honours TTLs exactly (TTL
// resolution, and 1% for the clock rates).
func (s *suite) surelyExpired(ttl time.Duration) time.Duration {
	return ttl + s.res + ttl/100
}

// awaitExpiry waits for key, taken with ttl by an acquire sent at start that
// returned at set, and not released, to expire, trying to take it with a
// fresh token per attempt (as the Locker does), and returns the token that
// got it. It fails the subtest if key is free before ttl ran out or still
// held well after (TTL resolution and slack allowed).
//
// Both bounds count only what the calls prove, however slow they are: the
// store set the key after start and before set; an attempt that finds the
// key free ran before it returned, and one that finds it held ran after it
// was sent.
func (s *suite) awaitExpiry(st core.Store, key string, start, set time.Time, ttl time.Duration) string {
	s.t.Helper()
	earliest := s.earliest(ttl)
	latest := ttl + s.res + s.slack
	for {
		tok := token()
		sent := time.Now()
		ok, _ := s.tryAcquire(st, key, tok, s.long, false)
		if ok {
			if elapsed := time.Since(start); elapsed < earliest {
				s.t.Errorf("storetest: %s, taken with TTL %v and not released, was free again %v later: before its TTL ran out (TTL resolution %v)",
					key, ttl, elapsed.Round(time.Millisecond), s.res)
			}
			return tok
		}
		if late := sent.Sub(set); late > latest {
			s.t.Fatalf("storetest: %s, taken with TTL %v and not released, was still held %v later: its TTL is not honoured (TTL resolution %v, slack %v)",
				key, ttl, late.Round(time.Millisecond), s.res, s.slack)
		}
		time.Sleep(s.poll)
	}
}

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) {
	time.Sleep(time.Until(t))
}

// locker returns a Locker on st with the suite's settings and opts. Its
// names are keyed "storetest:{name}".
func (s *suite) locker(st core.Store, opts ...core.Option) *core.Locker {
	s.t.Helper()
	all := append([]core.Option{
		core.WithPrefix("storetest:"),
		core.WithTTL(s.long),
		core.WithSpin(2*time.Millisecond, 3*time.Millisecond),
		core.WithIOTimeout(lockerIOTimeout),
	}, opts...)
	l := core.NewWithStore(st, all...)
	if err := l.Err(); err != nil {
		s.t.Fatalf("storetest: NewWithStore: %v", err)
	}
	s.t.Cleanup(func() { _ = l.Close() })
	return l
}

// hold acquires name with l for the rest of the subtest.
func (s *suite) hold(l *core.Locker, name string) *core.Lease {
	s.t.Helper()
	ctx, cancel := call()
	defer cancel()
	lease, err := l.Acquire(ctx, name, core.Wait(0))
	if err != nil {
		s.t.Fatalf("storetest: Acquire(%q) of a free name: %v", name, err)
	}
	s.t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}
