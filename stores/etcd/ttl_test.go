package etcdstore_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// TestLeaseTTLIsWhatEtcdHolds: etcd raises a lease below its minimum TTL (2
// s with etcd's default election timeout) and rounds TTLs up to whole
// seconds; the Locker's lease reports the TTL etcd holds, counts its
// validity from it, never past it, and keeps it across Extend. It used to
// report TTL(300ms) as 300 ms while etcd held the name for 2 s.
func TestLeaseTTLIsWhatEtcdHolds(t *testing.T) {
	leakCheck(t)
	srv := servers.Start(t, servers.EtcdSpecTimings(100*time.Millisecond, time.Second)) // etcd's defaults
	c := newClient(t, srv.Addr())
	ctx := context.Background()
	for _, tc := range []struct {
		ask, held time.Duration
	}{
		{300 * time.Millisecond, 2 * time.Second},  // raised to etcd's minimum
		{2500 * time.Millisecond, 3 * time.Second}, // rounded up to whole seconds
		{4 * time.Second, 4 * time.Second},
	} {
		// A new store each time: it learns etcd's minimum from its first
		// grant, within the acquisition.
		s := newStore(t, c)
		l := core.NewWithStore(s, core.WithTTL(tc.ask))
		before := time.Now()
		lease, err := l.Acquire(ctx, uniq(t))
		if err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		if got := lease.TTL(); got != tc.held {
			t.Errorf("TTL(%v): Lease.TTL() = %v; etcd holds it for %v", tc.ask, got, tc.held)
		}
		kv := get(t, c, s, lease.Key()).Kvs[0]
		ttl, err := c.TimeToLive(call(t), clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		if granted := time.Duration(ttl.GrantedTTL) * time.Second; granted != tc.held {
			t.Errorf("TTL(%v): the key's lease was granted %v; want %v", tc.ask, granted, tc.held)
		}
		// Validity: the held TTL from the sending of the acquisition (between
		// before and after), less the drift margin (1% and 2 ms); never past
		// the grant (after before) plus the TTL etcd holds.
		valid := lease.ValidUntil()
		if lo := before.Add(tc.held - tc.held/100 - 2*time.Millisecond); valid.Before(lo) {
			t.Errorf("TTL(%v): ValidUntil is %v after the acquire began; want at least %v", tc.ask, valid.Sub(before), lo.Sub(before))
		}
		if hi := after.Add(tc.held); valid.After(hi) {
			t.Errorf("TTL(%v): ValidUntil is %v after the acquire returned, past what etcd holds (%v)", tc.ask, valid.Sub(after), tc.held)
		}
		if err := lease.Extend(ctx, tc.ask); err != nil {
			t.Fatal(err)
		}
		if got := lease.TTL(); got != tc.held {
			t.Errorf("TTL(%v): after Extend(%v), Lease.TTL() = %v; want %v", tc.ask, tc.ask, got, tc.held)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
		if got := s.StoreTTL(tc.ask); got != tc.held {
			t.Errorf("StoreTTL(%v) = %v; want %v", tc.ask, got, tc.held)
		}
	}
}

// TestStoreTTLBeforeAnyGrant: a store that has granted nothing yet knows
// only etcd's whole seconds.
func TestStoreTTLBeforeAnyGrant(t *testing.T) {
	s, err := etcdstore.New(newClient(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for ask, want := range map[time.Duration]time.Duration{
		time.Millisecond:        time.Second,
		time.Second:             time.Second,
		1200 * time.Millisecond: 2 * time.Second,
	} {
		if got := s.StoreTTL(ask); got != want {
			t.Errorf("StoreTTL(%v) = %v; want %v", ask, got, want)
		}
	}
}
