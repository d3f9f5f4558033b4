package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
)

// frozenLease returns a lease of l whose Done channel was asked for while
// it was valid, and whose timers then did not run until ValidUntil had
// passed, as in a process that was paused (a GC pause, a stopped VM) past
// its TTL: its expiry timer and its watchdog are stopped, and the test
// waits past ValidUntil.
func frozenLease(t *testing.T, l *Locker, name string, ttl time.Duration) (*Lease, <-chan struct{}) {
	t.Helper()
	lease, err := l.Acquire(context.Background(), name, TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	early := lease.Done()
	lease.stopWatchdog() // no renewal: the process is paused
	lease.mu.Lock()
	lease.expiry.Stop() // nor has the timer run
	lease.mu.Unlock()
	time.Sleep(time.Until(lease.ValidUntil()) + 5*time.Millisecond)
	return lease, early
}

// After a pause of the process past the lease's validity, the holder's own
// code may run before the lease's timer: its first look at the lease must
// already see the loss. Lost reports it, and a fresh call of Done returns a
// closed channel (the one handed out before the pause, now closed), also
// through a nested lease; a lease whose validity has passed before Done is
// first called gets a closed channel at once.
func TestDoneSeesTheClockBeforeItsTimer(t *testing.T) {
	srv := redistest.Start(t)
	for _, watchdog := range []bool{false, true} {
		var opts []Option
		if watchdog {
			opts = append(opts, WithWatchdog())
		}
		l := New(srv.Client(t), opts...)
		defer l.Close()
		name := fmt.Sprintf("%s/watchdog=%v", t.Name(), watchdog)

		lease, early := frozenLease(t, l, name+"/1", 100*time.Millisecond)
		if !lease.Lost() {
			t.Fatalf("watchdog %v: Lost() = false after ValidUntil passed", watchdog)
		}
		lease2, early2 := frozenLease(t, l, name+"/2", 100*time.Millisecond)
		nested := nested(lease2)
		for what, c := range map[string]<-chan struct{}{
			"a fresh Done":                    lease2.Done(),
			"a fresh Done of a nested lease":  nested.Done(),
			"the Done taken before the pause": early2,
		} {
			select {
			case <-c:
			default:
				t.Errorf("watchdog %v: %s is still open after ValidUntil passed (the timer has not run)", watchdog, what)
			}
		}
		select {
		case <-early:
		default:
			t.Errorf("watchdog %v: after Lost() reported the loss, the Done taken before the pause is still open", watchdog)
		}

		born, err := l.Acquire(context.Background(), name+"/born", TTL(40*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		born.stopWatchdog()
		time.Sleep(time.Until(born.ValidUntil()) + 5*time.Millisecond)
		select {
		case <-born.Done(): // the first call
		default:
			t.Errorf("watchdog %v: the first Done of a lease past its ValidUntil is open", watchdog)
		}
		_ = born.Release(context.Background())
	}
}
