package zkstore_test

import (
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestConformance runs core's conformance suite on the store, through a
// proxy that Down cuts. A node's times count milliseconds on the server's
// clock; a dead holder is seen at the next contender's create.
func TestConformance(t *testing.T) {
	proxy := redistest.NewProxy(t, shared.Addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		s, err := zkstore.New(dial(t, proxy.Addr(), 0))
		if err != nil {
			t.Fatal(err)
		}
		return s // closed by the suite, before its connection
	}, storetest.Options{
		TTLResolution: 5 * time.Millisecond,
		Down:          func(*testing.T) { proxy.Cut() },
		Up:            func(*testing.T) { proxy.Restore() },
	})
}
