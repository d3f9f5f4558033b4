package core_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reqlock/reqlock/core"
)

// TestSimAcquireAllEarlierNamesOutliveTheWait: an AcquireAll that takes its
// names one by one (here shared holds: the one-step path of a
// MultiAcquirer is for exclusive holds; likewise with a local or fair
// queue, or keys a store cannot take in one step) may wait for a later
// name longer than the TTL of the names it already took. The lease it
// returns must still hold every name: all or none. TestSimModes found the
// defect (in the tail of seeds 9, 12, 19, 20, 25, ...: "got a lease for k0
// that was lost at once", or its release "after the faults stopped" found
// a name expired). On
// the simulated store without faults, in virtual time: p0 holds b for 2 s;
// p1 asks for a and b, shared, TTL 500 ms, wait 5 s: it takes a at once
// and waits for b; a's share expires at 500 ms; p2 takes a exclusively at
// 1 s, for 3 s; b is free at 2 s.
func TestSimAcquireAllEarlierNamesOutliveTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newSimTrace(time.Now(), false)
		s := newSimStore(1, &simPlan{}, tr, true)
		s.start()
		defer s.stop()
		ctx := context.Background()
		var views []*simView
		newLocker := func(name string) *core.Locker {
			v := s.newView(name, time.Second, nil, time.Time{})
			views = append(views, v)
			return core.NewWithStore(v, core.WithPrefix("sim:"), core.WithSpin(5*time.Millisecond, 0))
		}
		holder, taker, intruder := newLocker("p0"), newLocker("p1"), newLocker("p2")
		defer func() {
			for _, v := range views {
				_ = v.Close()
			}
		}()
		start := time.Now()
		b, err := holder.Acquire(ctx, "b", core.TTL(2*time.Second))
		if err != nil {
			t.Fatalf("p0: Acquire(b): %v", err)
		}
		defer b.Release(ctx)
		intruded := make(chan *core.Lease, 1)
		go func() {
			time.Sleep(time.Second)
			a, err := intruder.Acquire(ctx, "a", core.TTL(3*time.Second), core.Wait(5*time.Second))
			if err != nil {
				t.Errorf("p2: Acquire(a) at 1 s: %v", err)
			}
			intruded <- a
		}()
		lease, err := taker.AcquireAll(ctx, []string{"a", "b"}, core.Shared(), core.TTL(500*time.Millisecond), core.Wait(5*time.Second))
		a := <-intruded
		if a != nil {
			defer a.Release(ctx)
		}
		if err != nil {
			if !errors.Is(err, core.ErrTimeout) {
				t.Fatalf("p1: AcquireAll(a, b): %v, want a lease or ErrTimeout", err)
			}
			return
		}
		defer lease.Release(ctx)
		now := time.Now()
		for _, p := range core.SimParts(lease) {
			if !now.Before(p.ValidUntil()) || p.Lost() {
				holder, _ := s.truth(p.Key(), now)
				t.Errorf("p1: AcquireAll(a, b) returned at +%v a lease whose hold of %s is already lost (valid until +%v; the store holds %s for %s, p2's lease of it is %s)",
					now.Sub(start), p.Name(), p.ValidUntil().Sub(start), p.Key(), tr.tok(holder), tr.tok(a.Token()))
			}
		}
	})
}
