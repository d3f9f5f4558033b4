package etcdstore_test

import (
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
)

// TestConformance runs core's conformance suite on the store, through a
// proxy that Down cuts: etcd leases count whole seconds.
func TestConformance(t *testing.T) {
	proxy := redistest.NewProxy(t, shared.Addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		s, err := etcdstore.New(newClient(t, proxy.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		return s // closed by the suite, before its client
	}, storetest.Options{
		TTLResolution: time.Second,
		Down:          func(*testing.T) { proxy.Cut() },
		Up:            func(*testing.T) { proxy.Restore() },
	})
}

// TestConformanceWithoutPool runs the suite on stores that grant a lease per
// acquisition.
func TestConformanceWithoutPool(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite takes a while with whole-second TTLs")
	}
	storetest.RunWith(t, func(t *testing.T) core.Store {
		s, err := etcdstore.New(newClient(t, ""), etcdstore.WithLeasePool(0))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{TTLResolution: time.Second})
}
