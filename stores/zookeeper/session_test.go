package zkstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestPartitionedHolderLeaseEndsFirst: a holder is cut off from ZooKeeper
// (its link cut) for longer than its session timeout; ZooKeeper expires
// the session, deletes its node, and another process takes the name. By
// then the holder's lease must report itself lost: a lease that reports
// itself valid holds its name. With a TTL up to the session timeout it
// does (the lease's validity, counted from its last renewal, ends before
// the session can expire); a longer TTL, for which it would not, is
// refused with core.ErrInvalidOption.
func TestPartitionedHolderLeaseEndsFirst(t *testing.T) {
	leakCheck(t)
	// A short session, but not so short that a loaded machine's late
	// pings end it before the cut (see TestSessionExpiryLosesLock).
	const session = 6 * time.Second
	for _, ttl := range []time.Duration{session, 3 * session} {
		t.Run(ttl.String(), func(t *testing.T) {
			proxy := redistest.NewProxy(t, shared.Addr())
			holder := newStore(t, dial(t, proxy.Addr(), session), zkstore.WithSessionTimeout(session))
			other := newStore(t, dial(t, "", 0))
			locker := core.NewWithStore(holder, core.WithWatchdog())
			t.Cleanup(func() { _ = locker.Close() })
			name := uniq(t)
			key, err := locker.Key(name)
			if err != nil {
				t.Fatal(err)
			}
			lease, err := locker.Acquire(core.ContextWithTTL(ctx(t), ttl), name)
			switch {
			case err != nil && ttl > session && errors.Is(err, core.ErrInvalidOption):
				if !strings.Contains(err.Error(), "zkstore: ") {
					t.Errorf("the error %q does not name the store", err)
				}
				return // refused: no lease to outlive its session
			case err != nil:
				t.Fatal(err)
			}
			proxy.Cut()
			eventually(t, session+30*time.Second, "the name was not free after the holder's session expired", func() bool {
				ok, _, err := other.TryAcquire(ctx(t), key, "next", time.Minute, false)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			})
			if !lease.Lost() {
				t.Errorf("another process took the name while the cut-off holder's lease (TTL %v, session timeout %v) reported itself valid for %v more",
					ttl, session, time.Until(lease.ValidUntil()).Round(time.Millisecond))
			}
			proxy.Restore()
			_ = lease.Release(ctx(t))
			if ok, err := other.Release(ctx(t), key, "next"); !ok || err != nil {
				t.Errorf("Release: %v, %v", ok, err)
			}
		})
	}
}

// TestSessionTimeoutBoundsTTL: with WithSessionTimeout, a TTL longer than
// the session timeout is refused by every call that sets one, with an
// error that wraps core.ErrInvalidOption; the session timeout itself is
// fine. A session timeout that is not positive is refused by New.
func TestSessionTimeoutBoundsTTL(t *testing.T) {
	leakCheck(t)
	conn := dial(t, "", 0)
	if _, err := zkstore.New(conn, zkstore.WithSessionTimeout(0)); err == nil {
		t.Error("WithSessionTimeout(0): no error")
	}
	const session = 3 * time.Second
	s := newStore(t, conn, zkstore.WithSessionTimeout(session))
	key := uniq(t)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "zkstore: ") {
			t.Errorf("%s with a TTL above the session timeout: %v; want a zkstore error wrapping core.ErrInvalidOption", what, err)
		}
	}
	_, _, err := s.TryAcquire(ctx(t), key, "long", session+time.Millisecond, false)
	refused("TryAcquire", err)
	_, err = s.Enqueue(ctx(t), key, "long", session+time.Millisecond, time.Second, false)
	refused("Enqueue", err)
	_, _, err = s.Poll(ctx(t), key, []core.Waiter{{Token: "long", TTL: time.Minute}}, time.Second, false)
	refused("Poll", err)
	mustAcquire(t, s, key, "tok", session, false)
	_, _, err = s.Extend(ctx(t), key, "tok", time.Minute, false)
	refused("Extend", err)
	if ok, _, err := s.Extend(ctx(t), key, "tok", session, false); !ok || err != nil {
		t.Errorf("Extend for the session timeout: %v, %v", ok, err)
	}
	if ok, err := s.Release(ctx(t), key, "tok"); !ok || err != nil {
		t.Errorf("Release: %v, %v", ok, err)
	}
}
