package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

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
	deadline := time.Now().Add(15 * time.Second)
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

// holdUntilDone holds lease in a request that stops when Done closes, and
// reports when that was.
func holdUntilDone(lease *core.Lease) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		<-lease.Done()
		at <- time.Now()
	}()
	return at
}

// TestClusterTopology runs the Locker on a 3-master Redis Cluster with a
// replica per master: exclusion with fences, watchdog and wake-ups across
// slots; a slot migration under a held lease; and a master failover under a
// held lease, which must not leave the name locked for good.
func TestClusterTopology(t *testing.T) {
	leakCheck(t)
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	opts := []core.Option{
		core.WithTTL(ttl), core.WithWatchdog(), core.WithFencing(), core.WithNotify(),
		core.WithWait(20 * time.Second), core.WithSpin(2*time.Millisecond, 3*time.Millisecond),
		core.WithIOTimeout(300 * time.Millisecond),
	}
	a, b := clusterLocker(t, cl, opts...), clusterLocker(t, cl, opts...)

	t.Run("exclusion", func(t *testing.T) {
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
		var wg sync.WaitGroup
		var mu sync.Mutex
		last := map[string]int64{}
		for i, n := range names {
			for _, l := range []*core.Locker{a, b, a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < 5; r++ {
						lease, err := l.Acquire(ctx, n)
						if err != nil {
							t.Errorf("acquire: %v", err)
							return
						}
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
					}
				}()
			}
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
		checkWake(t, a, b, cl.Nodes...)
	})

	t.Run("slot migration", func(t *testing.T) {
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
		time.Sleep(2 * ttl) // the watchdog renews through the redirections
		select {
		case <-lease.Done():
			t.Fatal("the lease was lost across the slot migration")
		default:
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
		name := uniq(t)
		lease, err := a.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		doneAt := holdUntilDone(lease)
		killed := time.Now()
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := cl.KillMaster(fctx, lease.Key()); err != nil {
			t.Fatal(err)
		}
		failedOver := time.Since(killed)
		next, storageErrs := acquireAfterFailover(t, b, name)
		acquired := time.Now()
		defer next.Release(ctx)
		var done time.Time
		select {
		case done = <-doneAt:
		default:
			t.Fatal("another holder got the name while the first lease was not done")
		}
		t.Logf("cluster failover of the lock's master: replica promoted after %v; the held lease was done %v after the kill; the name was taken again %v after the kill (%d storage errors first)",
			failedOver.Round(time.Millisecond), done.Sub(killed).Round(time.Millisecond), acquired.Sub(killed).Round(time.Millisecond), storageErrs)
		if !done.Before(acquired) {
			t.Fatal("the first lease was done only after the name was taken again")
		}
		// The lost lease's release finds the lock gone, or its client has not
		// learnt the new topology yet: either way it deletes nothing.
		if err := lease.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrStorage) {
			t.Fatalf("release of the lost lease: %v", err)
		}
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
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	opts := []core.Option{
		core.WithTTL(ttl), core.WithWatchdog(), core.WithFencing(), core.WithNotify(),
		core.WithWait(20 * time.Second), core.WithSpin(5*time.Millisecond, 5*time.Millisecond),
		core.WithIOTimeout(300 * time.Millisecond),
	}
	newLocker := func() *core.Locker {
		l := core.New(d.Client(t), opts...)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b := newLocker(), newLocker()
	checkWake(t, a, b, d.Data...)

	name := uniq(t)
	lease, err := a.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	doneAt := holdUntilDone(lease)
	killed := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := d.KillMaster(fctx); err != nil {
		t.Fatal(err)
	}
	failedOver := time.Since(killed)
	next, storageErrs := acquireAfterFailover(t, b, name)
	acquired := time.Now()
	var done time.Time
	select {
	case done = <-doneAt:
	default:
		t.Fatal("another holder got the name while the first lease was not done")
	}
	t.Logf("sentinel failover: replica promoted after %v; the held lease was done %v after the kill; the name was taken again %v after the kill (%d storage errors first); fences %d then %d",
		failedOver.Round(time.Millisecond), done.Sub(killed).Round(time.Millisecond), acquired.Sub(killed).Round(time.Millisecond), storageErrs, lease.Fence(), next.Fence())
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrStorage) {
		t.Fatalf("release of the lost lease: %v", err)
	}
	checkWake(t, b, a, d.Data...) // the subscriptions followed the new master
}

var _ redis.UniversalClient = (*redis.ClusterClient)(nil)
