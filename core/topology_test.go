package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// topologyTTL and topologyOpts are those of the Lockers of the topology
// tests: every feature on, and an I/O timeout that a loaded machine's slow
// replies do not reach. The TTL is that of the lease held across a
// failover: its watchdog gives up a third of it (333 ms) after its last
// renewal, before any failover can complete (the cluster's node timeout
// and Sentinel's down-after are a second), so the lease is lost on any
// schedule rather than renewed on the promoted replica.
const topologyTTL = time.Second

var topologyOpts = []core.Option{
	core.WithTTL(topologyTTL), core.WithWatchdog(), core.WithFencing(), core.WithNotify(),
	core.WithWait(20 * time.Second), core.WithSpin(2*time.Millisecond, 3*time.Millisecond),
	core.WithIOTimeout(3 * time.Second),
}

// calmOpts are added to topologyOpts where a lease must outlive a loaded
// machine's stalls: renewals every 500 ms, each with 2 s to succeed before
// the watchdog gives up.
var calmOpts = []core.Option{core.WithTTL(3 * time.Second), core.WithWatchdogInterval(500 * time.Millisecond)}

// calm returns topologyOpts with calmOpts, and more.
func calm(more ...core.Option) []core.Option {
	return append(append(append([]core.Option(nil), topologyOpts...), calmOpts...), more...)
}

// clusterLocker is a Locker on a cluster client of its own.
func clusterLocker(t *testing.T, cl *redistest.Cluster, opts ...core.Option) *core.Locker {
	t.Helper()
	l := core.New(cl.Client(t), opts...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acquireAfterFailover takes name with l as soon as the deployment serves it
// again: clients may see storage errors until they have learnt the new
// topology, which must not take longer than a few seconds.
func acquireAfterFailover(t *testing.T, l *core.Locker, name string) (*core.Lease, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	storageErrs := 0
	for {
		lease, err := l.Acquire(context.Background(), name)
		switch {
		case err == nil:
			return lease, storageErrs
		case !errors.Is(err, core.ErrStorage):
			t.Fatalf("after the failover: %v", err)
		case time.Now().After(deadline):
			t.Fatalf("the name stayed out of reach after the failover: %v", err)
		}
		storageErrs++
		time.Sleep(50 * time.Millisecond)
	}
}

// failoverUnderLease holds a lease of a's while kill fails the master over,
// then takes the name with b: b must get it within seconds (the name is not
// locked for good), and only once a's lease is done. It logs the times and
// returns both leases; next is released when the test ends.
func failoverUnderLease(t *testing.T, what string, a, b *core.Locker, kill func(ctx context.Context, key string) error) (lost, next *core.Lease) {
	t.Helper()
	ctx := context.Background()
	name := uniq(t)
	lost, err := a.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	doneAt := make(chan time.Time, 1)
	go func() { // a request that stops when Done closes, for the log
		<-lost.Done()
		doneAt <- time.Now()
	}()
	killed := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kill(fctx, lost.Key()); err != nil {
		t.Fatal(err)
	}
	failedOver := time.Since(killed)
	next, storageErrs := acquireAfterFailover(t, b, name)
	acquired := time.Now()
	t.Cleanup(func() { _ = next.Release(ctx) })
	// Done reads the clock (the goroutine above may not have run yet): it
	// must be closed by now.
	select {
	case <-lost.Done():
	default:
		t.Fatal("another holder got the name while the first lease was not done")
	}
	done := <-doneAt
	t.Logf("%s: replica promoted %v after the kill; the held lease was done after %v; the name was taken again after %v (%d storage errors first); fences %d then %d",
		what, failedOver.Round(time.Millisecond), done.Sub(killed).Round(time.Millisecond), acquired.Sub(killed).Round(time.Millisecond),
		storageErrs, lost.Fence(), next.Fence())
	// The lost lease's release finds the lock gone, or its client has not
	// learnt the new topology yet: either way it deletes nothing.
	if err := lost.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrStorage) {
		t.Fatalf("release of the lost lease: %v", err)
	}
	return lost, next
}

// TestClusterTopology runs the Locker on a 3-master Redis Cluster with a
// replica per master: exclusion with fences, watchdog and wake-ups across
// slots; a slot migration under a held lease; and a master failover under a
// held lease, which must not leave the name locked for good.
func TestClusterTopology(t *testing.T) {
	leakCheck(t)
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	// a holds the lease lost in the failover; b holds the names that must
	// stay held.
	a, b := clusterLocker(t, cl, topologyOpts...), clusterLocker(t, cl, calm()...)

	t.Run("exclusion", func(t *testing.T) {
		calm := []*core.Locker{clusterLocker(t, cl, calm()...), clusterLocker(t, cl, calm()...)}
		names := []string{uniq(t), uniq(t), uniq(t), uniq(t)}
		masters := map[*redistest.Server]bool{}
		for _, n := range names {
			key, _ := a.Key(n)
			m, err := cl.MasterOf(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			masters[m] = true
			ks, _ := cl.Slot(ctx, key)
			fs, _ := cl.Slot(ctx, key+":fence")
			cs, _ := cl.Slot(ctx, key+":released")
			if ks != fs || ks != cs {
				t.Fatalf("%s: lock slot %d, fence slot %d, channel slot %d: not one slot", key, ks, fs, cs)
			}
		}
		var o [4]redistest.Overlap
		var mu sync.Mutex
		last := map[string]int64{}
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				contend(t, calm, 2, 5, n, func(lease *core.Lease) {
					exit := o[i].Enter()
					mu.Lock()
					if lease.Fence() <= last[n] {
						t.Errorf("%s: fence %d after %d", n, lease.Fence(), last[n])
					}
					last[n] = lease.Fence()
					mu.Unlock()
					time.Sleep(time.Millisecond)
					exit()
					if err := lease.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
				})
			}()
		}
		wg.Wait()
		overlaps, entries := int64(0), int64(0)
		for i := range o {
			overlaps += o[i].Overlaps()
			entries += o[i].Entries()
		}
		t.Logf("cluster: %d sections on %d names served by %d masters: %d overlaps", entries, len(names), len(masters), overlaps)
		if overlaps != 0 || entries != 80 {
			t.Fatalf("%d overlaps in %d of 80 sections", overlaps, entries)
		}
		checkWake(t, b, a, cl.Nodes...)
	})

	t.Run("fair", func(t *testing.T) {
		fair := calm(core.WithFair())
		ls := []*core.Locker{clusterLocker(t, cl, fair...), clusterLocker(t, cl, fair...)}
		fairContend(t, ls, uniq(t), cl.Client(t))
	})

	t.Run("slot migration", func(t *testing.T) {
		// Calm Lockers: the MIGRATE of the test and a loaded machine must
		// not make the watchdog give up; what is checked is that its
		// renewals follow the slot.
		a, b := clusterLocker(t, cl, calm()...), clusterLocker(t, cl, calm()...)
		name := uniq(t)
		lease, err := a.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		from, err := cl.MasterOf(ctx, lease.Key())
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := cl.Slot(ctx, lease.Key())
		var to *redistest.Server
		for _, m := range cl.Nodes[:3] {
			if m != from && m.Running() {
				to = m
				break
			}
		}
		if err := cl.MigrateSlot(ctx, slot, to); err != nil {
			t.Fatal(err)
		}
		// The watchdog renews through the redirections: the renewal that
		// may have been in flight during the migration, and the next one.
		for range 2 {
			if !waitRenewed(t, lease) {
				t.Fatal("the lease was lost across the slot migration")
			}
		}
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		other, err := b.Acquire(tctx, name)
		cancel()
		if err == nil {
			_ = other.Release(ctx)
			t.Fatal("another holder got the name while the lease was held")
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release after the migration: %v", err)
		}
		next, err := b.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Release(ctx)
		if next.Fence() <= lease.Fence() {
			t.Fatalf("the fence counter did not move with the slot: %d after %d", next.Fence(), lease.Fence())
		}
		if m, _ := cl.MasterOf(ctx, next.Key()); m != to {
			t.Fatal("the lock is not served by the node its slot moved to")
		}
	})

	t.Run("failover", func(t *testing.T) {
		_, next := failoverUnderLease(t, "cluster failover of the lock's master", a, b, func(ctx context.Context, key string) error {
			_, err := cl.KillMaster(ctx, key)
			return err
		})
		if got := cl.Client(t).Get(ctx, next.Key()).Val(); got != next.Token() {
			t.Fatalf("the new holder's key holds %q", got)
		}
	})
}

// TestSentinelTopology runs the Locker on a Sentinel failover client and
// fails the master over under a held lease: the lease ends, the name is free
// again after the failover, and the same Locker carries on.
func TestSentinelTopology(t *testing.T) {
	leakCheck(t)
	d := redistest.StartSentinel(t)
	newLocker := func(opts ...core.Option) *core.Locker {
		l := core.New(d.Client(t), opts...)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	// a holds the lease lost in the failover; b holds the names that must
	// stay held. a waits in both checks of the wake-ups, before and after
	// the failover.
	a, b := newLocker(topologyOpts...), newLocker(calm()...)
	checkWake(t, b, a, d.Data...)

	fair := calm(core.WithFair())
	fa, fb := core.New(d.Client(t), fair...), core.New(d.Client(t), fair...)
	t.Cleanup(func() { _ = fa.Close(); _ = fb.Close() })
	fairContend(t, []*core.Locker{fa, fb}, uniq(t), d.Client(t))

	failoverUnderLease(t, "sentinel failover", a, b, func(ctx context.Context, _ string) error {
		_, err := d.KillMaster(ctx)
		return err
	})
	checkWake(t, b, a, d.Data...) // the subscriptions followed the new master
}
