package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

var (
	shared = core.Hold{}
	// permits returns a Hold of n permits.
	permits = func(n int) core.Hold { return core.Hold{N: n} }
)

// share takes a share of k for tok and reports it.
func share(t testing.TB, s *sqlstore.Store, k, tok string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64) {
	t.Helper()
	ok, slot, fence, err := s.TryAcquireShare(call(t), k, tok, ttl, h, fenced)
	if err != nil {
		t.Fatalf("TryAcquireShare(%q, %v): %v", k, h, err)
	}
	return ok, slot, fence
}

// mustShare takes a share of k for tok and returns its slot.
func mustShare(t testing.TB, s *sqlstore.Store, k, tok string, h core.Hold) int {
	t.Helper()
	ok, slot, _ := share(t, s, k, tok, time.Minute, h, false)
	if !ok {
		t.Fatalf("TryAcquireShare(%q, %v) failed; want the share taken", k, h)
	}
	return slot
}

// release releases tok's share of k and returns what ReleaseShare said.
func releaseShare(t testing.TB, s *sqlstore.Store, k, tok string) bool {
	t.Helper()
	ok, err := s.ReleaseShare(call(t), k, tok)
	if err != nil {
		t.Fatalf("ReleaseShare(%q): %v", k, err)
	}
	return ok
}

// eventually polls cond every 20 ms until it holds, or fails t after 30 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSharedHolds: shared holders hold a name together, and an exclusive
// holder neither beside them nor with their tokens; after the last one the
// name is free, and while it is held exclusively no share is taken.
func TestSharedHolds(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s1, s2 := newStore(t, b.open(t, b.addr(), "")), newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k, a, c := key(t), token(), token()
		if slot := mustShare(t, s1, k, a, shared); slot != 0 {
			t.Fatalf("a shared hold's slot %d; want 0", slot)
		}
		if slot := mustShare(t, s2, k, c, shared); slot != 0 {
			t.Fatalf("a shared hold's slot %d; want 0", slot)
		}
		if free(t, s1, k) {
			t.Fatal("TryAcquire took a name with live shared holds")
		}
		if ok, err := s1.Release(ctx, k, a); ok || err != nil {
			t.Fatalf("Release with a share's token: %v, %v; want false", ok, err)
		}
		if ok, _, err := s1.Extend(ctx, k, a, time.Minute, true); ok || err != nil {
			t.Fatalf("Extend with a share's token: %v, %v; want false", ok, err)
		}
		if _, _, _, err := s1.TryAcquireShare(ctx, k, token(), time.Minute, permits(2), false); !errors.Is(err, core.ErrModeMismatch) || !strings.HasPrefix(err.Error(), "sqlstore: ") {
			t.Fatalf("Permits(2) on a shared name: %v; want ErrModeMismatch", err)
		}
		if !releaseShare(t, s1, k, a) {
			t.Fatal("ReleaseShare by a holder reported false")
		}
		if releaseShare(t, s1, k, a) {
			t.Fatal("a second ReleaseShare reported true")
		}
		if free(t, s2, k) {
			t.Fatal("TryAcquire took a name with one live shared hold left")
		}
		if !releaseShare(t, s2, k, c) {
			t.Fatal("ReleaseShare by the last holder reported false")
		}
		w := token()
		mustAcquire(t, s1, k, w, time.Minute, false)
		if ok, _, _ := share(t, s2, k, token(), time.Minute, shared, false); ok {
			t.Fatal("TryAcquireShare took a name held exclusively")
		}
		if releaseShare(t, s2, k, w) {
			t.Fatal("ReleaseShare with the exclusive holder's token reported true")
		}
		if ok, _ := s1.Release(ctx, k, w); !ok {
			t.Fatal("the exclusive holder's Release reported false")
		}
		mustShare(t, s2, k, token(), shared)
	})
}

// TestPermits: Permits(n) lets n holders in, each in the lowest free slot;
// the (n+1)th fails; another n, or a shared hold, is ErrModeMismatch; a
// re-sent attempt keeps its slot.
func TestPermits(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k := key(t)
		toks := []string{token(), token(), token(), token()}
		for i, tok := range toks[:3] {
			if slot := mustShare(t, s, k, tok, permits(3)); slot != i {
				t.Fatalf("permit %d got slot %d; want %d", i, slot, i)
			}
		}
		if ok, _, _ := share(t, s, k, toks[3], time.Minute, permits(3), false); ok {
			t.Fatal("a fourth holder took Permits(3)")
		}
		for _, h := range []core.Hold{permits(2), permits(4), shared} {
			_, _, _, err := s.TryAcquireShare(ctx, k, toks[3], time.Minute, h, false)
			if !errors.Is(err, core.ErrModeMismatch) || !strings.Contains(err.Error(), "permits(3)") {
				t.Fatalf("%v on a name held with Permits(3): %v; want ErrModeMismatch naming permits(3)", h, err)
			}
		}
		if !releaseShare(t, s, k, toks[1]) {
			t.Fatal("ReleaseShare of slot 1 reported false")
		}
		if slot := mustShare(t, s, k, toks[3], permits(3)); slot != 1 {
			t.Fatalf("the permit after slot 1 was released got slot %d; want 1", slot)
		}
		if slot := mustShare(t, s, k, toks[0], permits(3)); slot != 0 {
			t.Fatalf("a re-sent attempt got slot %d; want its slot 0", slot)
		}
		if _, _, _, err := s.TryAcquireShare(ctx, k, toks[0], time.Minute, permits(2), false); !errors.Is(err, core.ErrModeMismatch) {
			t.Fatalf("a re-sent attempt with another n: %v; want ErrModeMismatch", err)
		}
		for _, tok := range []string{toks[0], toks[2], toks[3]} {
			if !releaseShare(t, s, k, tok) {
				t.Fatal("ReleaseShare by a holder reported false")
			}
		}
		if !free(t, s, k) {
			t.Fatal("the name is held after every permit was released")
		}
		if slot := mustShare(t, s, k, token(), permits(1)); slot != 0 {
			t.Fatalf("Permits(1) on a free name: slot %d; want 0", slot)
		}
	})
}

// TestShareExpiry: each share expires on its own, by the database's
// clock: a dead holder's slot is free at its TTL while the others hold
// theirs, and the name is free when the last one has expired.
func TestShareExpiry(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		k := key(t)
		short, long := token(), token()
		if ok, slot, _ := share(t, s, k, short, 2*time.Second, permits(2), false); !ok || slot != 0 {
			t.Fatalf("the first permit: %v, slot %d", ok, slot)
		}
		if slot := mustShare(t, s, k, long, permits(2)); slot != 1 {
			t.Fatalf("the second permit: slot %d; want 1", slot)
		}
		third := token()
		var slot int
		eventually(t, "a third permit after the first one's TTL", func() bool {
			var ok bool
			ok, slot, _ = share(t, s, k, third, time.Minute, permits(2), false)
			return ok
		})
		if slot != 0 {
			t.Fatalf("the permit after slot 0 expired got slot %d; want 0", slot)
		}
		if ok, _, _ := s.ExtendShare(call(t), k, short, time.Minute, false); ok {
			t.Fatal("ExtendShare of an expired share reported true")
		}
		if releaseShare(t, s, k, short) {
			t.Fatal("ReleaseShare of an expired share reported true")
		}
		if free(t, s, k) {
			t.Fatal("TryAcquire took a name with two live permits")
		}
		releaseShare(t, s, k, long)
		releaseShare(t, s, k, third)

		// One share of 3 s: the name is held, then free at its TTL.
		k2 := key(t)
		if ok, _, _ := share(t, s, k2, token(), 3*time.Second, shared, false); !ok {
			t.Fatal("a shared hold of a free name failed")
		}
		if free(t, s, k2) {
			t.Fatal("TryAcquire took a name with a live shared hold")
		}
		eventually(t, "TryAcquire after the only share's TTL", func() bool { return free(t, s, k2) })
	})
}

// TestExtendShare: ExtendShare renews its own share only (not another's,
// not an exclusive hold), and the marker follows: a share extended beyond
// the others keeps the name held alone.
func TestExtendShare(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k, a, c := key(t), token(), token()
		if ok, _, _ := share(t, s, k, a, 2*time.Second, permits(2), false); !ok {
			t.Fatal("permit failed")
		}
		if ok, _, _ := share(t, s, k, c, 2*time.Second, permits(2), false); !ok {
			t.Fatal("permit failed")
		}
		if ok, fence, err := s.ExtendShare(ctx, k, a, time.Minute, false); !ok || fence != 0 || err != nil {
			t.Fatalf("ExtendShare by a holder: %v, %d, %v; want true, 0", ok, fence, err)
		}
		if ok, _, err := s.ExtendShare(ctx, k, token(), time.Minute, false); ok || err != nil {
			t.Fatalf("ExtendShare by a stranger: %v, %v; want false", ok, err)
		}
		// c expires, a holds on: a third permit takes c's slot, and once it
		// is released the name stays held by a's share.
		third := token()
		var slot int
		eventually(t, "a permit after c's TTL", func() bool {
			var ok bool
			ok, slot, _ = share(t, s, k, third, time.Minute, permits(2), false)
			return ok
		})
		if slot != 1 {
			t.Fatalf("the permit after c's expiry got slot %d; want c's slot 1", slot)
		}
		releaseShare(t, s, k, third)
		if free(t, s, k) {
			t.Fatal("TryAcquire took the name while an extended share is live")
		}
		if !releaseShare(t, s, k, a) {
			t.Fatal("ReleaseShare of the extended share reported false")
		}
		w := token()
		mustAcquire(t, s, k, w, time.Minute, false)
		if ok, _, _ := s.ExtendShare(ctx, k, w, time.Minute, false); ok {
			t.Fatal("ExtendShare with an exclusive holder's token reported true")
		}
	})
}

// TestWaitingWriter: an exclusive waiter that failed on shares records
// itself; then no new share is taken (a re-sent one keeps its share), also
// once the shares drained, until the waiter takes the name, which clears
// the record, or the record expires.
func TestWaitingWriter(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k, r, w := key(t), token(), token()
		mustShare(t, s, k, r, shared)
		if ok, _, err := s.TryAcquireWaiting(ctx, k, w, time.Minute, time.Minute, true); ok || err != nil {
			t.Fatalf("TryAcquireWaiting on a shared name: %v, %v; want false", ok, err)
		}
		if ok, _, _ := share(t, s, k, token(), time.Minute, shared, false); ok {
			t.Fatal("a new share was taken while a writer waits")
		}
		if slot := mustShare(t, s, k, r, shared); slot != 0 {
			t.Fatal("a re-sent share failed")
		}
		releaseShare(t, s, k, r)
		if ok, _, _ := share(t, s, k, token(), time.Minute, shared, false); ok {
			t.Fatal("a new share was taken after the shares drained, while a writer waits")
		}
		ok, fence, err := s.TryAcquireWaiting(ctx, k, w, time.Minute, time.Minute, true)
		if !ok || fence <= 0 || err != nil {
			t.Fatalf("TryAcquireWaiting on a drained name: %v, %d, %v; want true and a fence", ok, fence, err)
		}
		if ok, _ := s.Release(ctx, k, w); !ok {
			t.Fatal("the writer's Release reported false")
		}
		mustShare(t, s, k, token(), shared) // the record is gone

		// A waiter that gives up: its record expires at its patience.
		k2 := key(t)
		r2 := token()
		mustShare(t, s, k2, r2, shared)
		if ok, _, err := s.TryAcquireWaiting(ctx, k2, token(), time.Minute, 2*time.Second, false); ok || err != nil {
			t.Fatalf("TryAcquireWaiting: %v, %v", ok, err)
		}
		if ok, _, _ := share(t, s, k2, token(), time.Minute, shared, false); ok {
			t.Fatal("a new share was taken while a writer waits")
		}
		eventually(t, "a share after the waiter's patience", func() bool {
			ok, _, _ := share(t, s, k2, token(), time.Minute, shared, false)
			return ok
		})

		// A waiter that fails on an exclusive holder records nothing.
		k3 := key(t)
		x := token()
		mustAcquire(t, s, k3, x, time.Minute, false)
		if ok, _, err := s.TryAcquireWaiting(ctx, k3, token(), time.Minute, time.Minute, false); ok || err != nil {
			t.Fatalf("TryAcquireWaiting on a held name: %v, %v", ok, err)
		}
		s.Release(ctx, k3, x)
		mustShare(t, s, k3, token(), shared)
	})
}

// TestShareFences: fences of a name increase whatever the mode: exclusive
// holds, shares and fenced ExtendShare draw from one counter.
func TestShareFences(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k := key(t)
		var last int64
		next := func(what string, fence int64) {
			t.Helper()
			if fence <= last {
				t.Fatalf("%s drew fence %d after %d; want strictly increasing fences", what, fence, last)
			}
			last = fence
		}
		x := token()
		next("an exclusive hold", mustAcquire(t, s, k, x, time.Minute, true))
		s.Release(ctx, k, x)
		a, c := token(), token()
		_, _, fa := share(t, s, k, a, time.Minute, permits(2), true)
		next("a permit", fa)
		_, _, fc := share(t, s, k, c, time.Minute, permits(2), true)
		next("a second permit", fc)
		if _, _, f := share(t, s, k, a, time.Minute, permits(2), false); f != 0 {
			t.Fatalf("an unfenced share drew fence %d; want 0", f)
		}
		ok, fe, err := s.ExtendShare(ctx, k, a, time.Minute, true)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		next("a fenced ExtendShare", fe)
		releaseShare(t, s, k, a)
		releaseShare(t, s, k, c)
		next("an exclusive hold after the shares", mustAcquire(t, s, k, token(), time.Minute, true))
	})
}

// TestShareBadInput: holds out of range, the marker as a token, an empty
// key and a patience of 0 are errors that change nothing.
func TestShareBadInput(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		k := key(t)
		for _, h := range []core.Hold{{N: -1}, {N: core.MaxPermits + 1}} {
			if _, _, _, err := s.TryAcquireShare(ctx, k, token(), time.Minute, h, false); !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "sqlstore: ") {
				t.Errorf("TryAcquireShare with %v: %v; want ErrInvalidOption", h, err)
			}
		}
		if _, _, _, err := s.TryAcquireShare(ctx, k, "(shares)", time.Minute, shared, false); err == nil {
			t.Error("TryAcquireShare with the marker as token: no error")
		}
		if _, _, err := s.TryAcquire(ctx, k, "(shares)", time.Minute, false); err == nil {
			t.Error("TryAcquire with the marker as token: no error")
		}
		if _, err := s.Release(ctx, k, "(shares)"); err == nil {
			t.Error("Release with the marker as token: no error")
		}
		if _, _, _, err := s.TryAcquireShare(ctx, "", token(), time.Minute, shared, false); err == nil {
			t.Error("TryAcquireShare of an empty key: no error")
		}
		if _, _, err := s.TryAcquireWaiting(ctx, k, token(), time.Minute, 0, false); err == nil {
			t.Error("TryAcquireWaiting with patience 0: no error")
		}
		if _, _, err := s.ExtendShare(ctx, k, token(), 0, false); err == nil {
			t.Error("ExtendShare with TTL 0: no error")
		}
		if !free(t, s, k) {
			t.Error("bad input changed the name")
		}
	})
}

// TestAcquireAll: TryAcquireAll takes every key or none, with a fence
// each, in the order of the keys given.
func TestAcquireAll(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		ctx := call(t)
		base := key(t)
		keys := []string{base + ":c", base + ":a", base + ":b"}
		tok := token()
		ok, fences, err := s.TryAcquireAll(ctx, keys, tok, time.Minute, true)
		if !ok || err != nil || len(fences) != 3 {
			t.Fatalf("TryAcquireAll of free keys: %v, %v, %v", ok, fences, err)
		}
		for i, k := range keys {
			if fences[i] <= 0 {
				t.Errorf("fence of %q: %d; want > 0", k, fences[i])
			}
			if ok, f, _ := s.Extend(ctx, k, tok, time.Minute, true); !ok || f <= fences[i] {
				t.Errorf("Extend of %q by the token: %v, fence %d; want true and above %d", k, ok, f, fences[i])
			}
		}
		if ok, _, err := s.TryAcquireAll(ctx, keys, tok, time.Minute, false); !ok || err != nil {
			t.Fatalf("a re-sent TryAcquireAll: %v, %v; want true", ok, err)
		}
		for _, k := range keys {
			s.Release(ctx, k, tok)
		}

		// One key held: none is taken.
		other := token()
		mustAcquire(t, s, keys[2], other, time.Minute, false)
		if ok, fences, err := s.TryAcquireAll(ctx, keys, token(), time.Minute, true); ok || fences != nil || err != nil {
			t.Fatalf("TryAcquireAll with a held key: %v, %v, %v; want false", ok, fences, err)
		}
		for _, k := range keys[:2] {
			if !free(t, s, k) {
				t.Fatalf("a failed TryAcquireAll left %q held", k)
			}
		}
		s.Release(ctx, keys[2], other)

		// A shared key: none is taken.
		r := token()
		mustShare(t, s, keys[0], r, shared)
		if ok, _, err := s.TryAcquireAll(ctx, keys, token(), time.Minute, false); ok || err != nil {
			t.Fatalf("TryAcquireAll with a shared key: %v, %v; want false", ok, err)
		}
		for _, k := range keys[1:] {
			if !free(t, s, k) {
				t.Fatalf("a failed TryAcquireAll left %q held", k)
			}
		}

		for _, bad := range [][]string{nil, {keys[0], keys[1], keys[0]}, {keys[1], ""}} {
			if _, _, err := s.TryAcquireAll(ctx, bad, token(), time.Minute, false); err == nil || !strings.HasPrefix(err.Error(), "sqlstore: ") {
				t.Errorf("TryAcquireAll(%q): %v; want an error", bad, err)
			}
		}
		if !free(t, s, keys[1]) {
			t.Error("bad input changed a key")
		}
	})
}

// modeCheck watches the holders of one name as they enter and leave their
// critical sections, and counts every entry that breaks the modes: an
// exclusive holder beside anyone, a share beside an exclusive holder, more
// than n permits, two holders in one slot.
type modeCheck struct {
	mu         sync.Mutex
	n          int // permits; 0 for shared holds
	exclusive  int
	shares     int
	slots      map[int]bool
	entries    int
	violations []string
}

func newModeCheck(n int) *modeCheck { return &modeCheck{n: n, slots: make(map[int]bool)} }

// enterShare records a share's entry in slot, and returns its exit.
func (m *modeCheck) enterShare(slot int) (exit func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries++
	switch {
	case m.exclusive > 0:
		m.violations = append(m.violations, "a share entered beside an exclusive holder")
	case m.n > 0 && m.shares >= m.n:
		m.violations = append(m.violations, fmt.Sprintf("permit %d entered beside %d", m.shares+1, m.shares))
	case m.n > 0 && (slot < 0 || slot >= m.n):
		m.violations = append(m.violations, fmt.Sprintf("slot %d out of 0..%d", slot, m.n-1))
	case m.n > 0 && m.slots[slot]:
		m.violations = append(m.violations, fmt.Sprintf("two holders in slot %d", slot))
	}
	m.shares++
	if m.n > 0 {
		m.slots[slot] = true
	}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.shares--
		delete(m.slots, slot)
	}
}

// enterExclusive records an exclusive holder's entry, and returns its exit.
func (m *modeCheck) enterExclusive() (exit func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries++
	if m.exclusive > 0 || m.shares > 0 {
		m.violations = append(m.violations, fmt.Sprintf("an exclusive holder entered beside %d exclusive and %d shares", m.exclusive, m.shares))
	}
	m.exclusive++
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.exclusive--
	}
}

// TestSharesConcurrent: clients of several *sql.DB take the shares and
// the exclusive holds of three neighbouring names at once (their rows
// side by side in the tables' indexes: InnoDB's gap locks would join
// them), Permits(3) on two and shared holds on one, plus exclusive
// writers that wait with TryAcquireWaiting. No holder ever enters its
// critical section beside one it excludes, no call fails, the database
// reports no deadlock (not even one that the store would settle by running
// the transaction again), and writers are not starved by the readers.
// Also with sessions whose default isolation level is SERIALIZABLE.
func TestSharesConcurrent(t *testing.T) {
	for _, b := range backends {
		params := []string{""}
		if b.dialect == sqlstore.PostgreSQL {
			params = append(params, "default_transaction_isolation=serializable")
		} else {
			params = append(params, "tx_isolation=%27SERIALIZABLE%27")
		}
		for _, p := range params {
			t.Run(b.name+"/"+p, func(t *testing.T) {
				concurrentShares(t, b, p)
			})
		}
	}
}

func concurrentShares(t *testing.T, b backend, params string) {
	const (
		clients = 4  // *sql.DB, as processes
		readers = 5  // per name
		writers = 2  // per name
		rounds  = 12 // per worker
		ttl     = time.Minute
	)
	var deadlocks atomic.Int64
	stores := make([]*sqlstore.Store, clients)
	for i := range stores {
		stores[i] = newStore(t, b.open(t, b.addr(), params))
		sqlstore.SetOnRetry(stores[i], func(err error) {
			if sqlstore.IsDeadlock(err) {
				deadlocks.Add(1)
			}
		})
	}
	base := key(t)
	names := []struct {
		key   string
		hold  core.Hold
		check *modeCheck
	}{
		{base + ":a", permits(3), newModeCheck(3)},
		{base + ":b", shared, newModeCheck(0)},
		{base + ":c", permits(3), newModeCheck(3)},
	}
	var errMu sync.Mutex
	var errs []error
	var failed atomic.Bool // every worker stops at the first error
	report := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
		failed.Store(true)
	}
	deadline := time.Now().Add(2 * time.Minute)
	ctx := context.Background()
	var wg sync.WaitGroup
	worker := 0
	for _, nm := range names {
		for r := range readers + writers {
			s := stores[worker%clients]
			worker++
			writer := r >= readers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range rounds {
					if failed.Load() {
						return
					}
					tok := token()
					var slot int
					for attempt := 0; ; attempt++ {
						var ok bool
						var err error
						switch {
						case !writer:
							ok, slot, _, err = s.TryAcquireShare(ctx, nm.key, tok, ttl, nm.hold, true)
						case attempt == 0:
							ok, _, err = s.TryAcquire(ctx, nm.key, tok, ttl, true)
						default:
							ok, _, err = s.TryAcquireWaiting(ctx, nm.key, tok, ttl, 10*time.Second, true)
						}
						if err != nil {
							report(fmt.Errorf("%s round %d: %w", nm.key, round, err))
							return
						}
						if ok {
							break
						}
						if failed.Load() {
							return
						}
						if time.Now().After(deadline) {
							report(fmt.Errorf("%s: writer %v did not get in within 2 minutes (round %d)", nm.key, writer, round))
							return
						}
						time.Sleep(time.Duration(1+attempt%4) * time.Millisecond)
					}
					var exit func()
					if writer {
						exit = nm.check.enterExclusive()
					} else {
						exit = nm.check.enterShare(slot)
					}
					time.Sleep(2 * time.Millisecond)
					exit()
					var ok bool
					var err error
					if writer {
						ok, err = s.Release(ctx, nm.key, tok)
					} else {
						ok, err = s.ReleaseShare(ctx, nm.key, tok)
					}
					if err != nil || !ok {
						report(fmt.Errorf("%s round %d: release: %v, %v", nm.key, round, ok, err))
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, nm := range names {
		nm.check.mu.Lock()
		if v := nm.check.violations; len(v) > 0 {
			t.Errorf("%s (%v): %d violations, first: %s", nm.key, nm.hold, len(v), v[0])
		}
		nm.check.mu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := deadlocks.Load(); n > 0 {
		t.Errorf("%d deadlocks (the database rolled a transaction back, and the store ran it again); want none", n)
	}
	for _, nm := range names {
		nm.check.mu.Lock()
		if want := (readers + writers) * rounds; nm.check.entries != want {
			t.Errorf("%s: %d critical sections; want %d", nm.key, nm.check.entries, want)
		}
		nm.check.mu.Unlock()
		if !free(t, stores[0], nm.key) {
			t.Errorf("%s is held after every holder released it", nm.key)
		}
	}
}

// TestAcquireAllCrossing: clients take two names with TryAcquireAll, in
// either order, beside clients that take one of them alone: nobody
// overlaps, no call fails, the database reports no deadlock (the rows are
// locked in one order),
// and a failed attempt leaves neither name held.
func TestAcquireAllCrossing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		const clients, workers, rounds = 3, 6, 15
		stores := make([]*sqlstore.Store, clients)
		for i := range stores {
			stores[i] = newStore(t, b.open(t, b.addr(), ""))
		}
		base := key(t)
		x, y := base+":x", base+":y"
		var deadlocks atomic.Int64
		for _, s := range stores {
			sqlstore.SetOnRetry(s, func(err error) {
				if sqlstore.IsDeadlock(err) {
					deadlocks.Add(1)
				}
			})
		}
		var ox, oy redistest.Overlap
		var errMu sync.Mutex
		var errs []error
		report := func(err error) {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}
		ctx := context.Background()
		deadline := time.Now().Add(2 * time.Minute)
		var wg sync.WaitGroup
		for w := range workers {
			s := stores[w%clients]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var keys []string
				switch w % 3 {
				case 0:
					keys = []string{x, y}
				case 1:
					keys = []string{y, x}
				default:
					keys = []string{x}
				}
				for range rounds {
					tok := token()
					for {
						var ok bool
						var err error
						if len(keys) == 1 {
							ok, _, err = s.TryAcquire(ctx, keys[0], tok, time.Minute, true)
						} else {
							var fences []int64
							ok, fences, err = s.TryAcquireAll(ctx, keys, tok, time.Minute, true)
							if ok && (fences[0] <= 0 || fences[1] <= 0) {
								report(fmt.Errorf("fences %v", fences))
							}
						}
						if err != nil {
							report(err)
							return
						}
						if ok {
							break
						}
						if time.Now().After(deadline) {
							report(errors.New("no progress in 2 minutes"))
							return
						}
						time.Sleep(time.Millisecond)
					}
					var exits []func()
					for _, k := range keys {
						if k == x {
							exits = append(exits, ox.Enter())
						} else {
							exits = append(exits, oy.Enter())
						}
					}
					time.Sleep(time.Millisecond)
					for _, exit := range exits {
						exit()
					}
					for _, k := range keys {
						if ok, err := s.Release(ctx, k, tok); !ok || err != nil {
							report(fmt.Errorf("release %s: %v, %v", k, ok, err))
						}
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if n := deadlocks.Load(); n > 0 {
			t.Errorf("%d deadlocks; want none", n)
		}
		if ox.Overlaps() > 0 || oy.Overlaps() > 0 {
			t.Fatalf("overlaps: %d on x, %d on y", ox.Overlaps(), oy.Overlaps())
		}
	})
}

// TestPurgeShares: Purge deletes the rows of shares (and waiter records)
// that expired long ago, and frees the name whose shares all expired;
// never a live share.
func TestPurgeShares(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := freshTable(t, b, "purgeshares")
		db := b.open(t, b.addr(), "")
		s := newStore(t, db, sqlstore.WithTable(name))
		ctx := call(t)
		dead, live := key(t), key(t)
		mustShare(t, s, dead, token(), permits(2))
		mustShare(t, s, dead, token(), permits(2))
		mustShare(t, s, live, token(), shared)
		if ok, _, err := s.TryAcquireWaiting(ctx, live, token(), time.Minute, time.Minute, false); ok || err != nil {
			t.Fatal(ok, err)
		}
		// Age the dead name's shares by two hours.
		q := "UPDATE " + name + "_share SET expires_at = expires_at - interval '2 hours' WHERE name = $1"
		var k any = []byte(dead)
		if b.dialect == sqlstore.MySQL {
			q = "UPDATE " + name + "_share SET expires_at = expires_at - INTERVAL 2 HOUR WHERE name = ?"
			k = dead
		}
		if _, err := db.ExecContext(ctx, q, k); err != nil {
			t.Fatal(err)
		}
		n, err := s.Purge(ctx, time.Hour)
		if err != nil || n < 2 {
			t.Fatalf("Purge: %d, %v; want the 2 old share rows at least", n, err)
		}
		var rows int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+name+"_share").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 2 {
			t.Fatalf("%d share rows after Purge; want the live share and the live waiter record", rows)
		}
		if !free(t, s, dead) {
			t.Fatal("the name whose shares were purged is held")
		}
		if free(t, s, live) {
			t.Fatal("Purge freed a name with a live share")
		}
	})
}

// TestUndoShare: UndoShare releases the share of its token (at once, the
// database answering) and never another token's; an UndoShare of a token
// without a share keeps nothing else from working.
func TestUndoShare(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		s := newStore(t, b.open(t, b.addr(), ""))
		k, a, c := key(t), token(), token()
		mustShare(t, s, k, a, permits(2))
		mustShare(t, s, k, c, permits(2))
		s.UndoShare(call(t), k, token(), time.Minute, time.Now())
		s.UndoShare(call(t), k, a, time.Minute, time.Now())
		if ok, _, _ := s.ExtendShare(call(t), k, a, time.Minute, false); ok {
			t.Fatal("the share is live after its UndoShare")
		}
		if ok, _, _ := s.ExtendShare(call(t), k, c, time.Minute, false); !ok {
			t.Fatal("UndoShare of one token removed another's share")
		}
		if slot := mustShare(t, s, k, token(), permits(2)); slot != 0 {
			t.Fatalf("a permit after the UndoShare got slot %d; want the freed slot 0", slot)
		}
	})
}

// TestLongTableName: a table name of the longest length WithTable accepts
// leaves room for the share table's name (and, on PostgreSQL, the
// sequence's and the constraints'), and every call works on it.
func TestLongTableName(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		name := "t_long_" + strings.ToLower(token())[:8]
		name += strings.Repeat("x", 57-len(name))
		t.Cleanup(func() { dropTable(t, b, name) })
		s := newStore(t, b.open(t, b.addr(), ""), sqlstore.WithTable(name))
		ctx := call(t)
		if err := s.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		k := key(t)
		if ok, _, fence := share(t, s, k, token(), time.Minute, permits(2), true); !ok || fence <= 0 {
			t.Fatalf("a permit on a table named with 57 bytes: %v, fence %d", ok, fence)
		}
	})
}
