package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// proxied returns Options whose Down cuts every proxy and whose Up restores
// them.
func proxied(proxies ...*redistest.Proxy) storetest.Options {
	return storetest.Options{
		Down: func(*testing.T) {
			for _, p := range proxies {
				p.Cut()
			}
		},
		Up: func(*testing.T) {
			for _, p := range proxies {
				p.Restore()
			}
		},
	}
}

// client returns a new client of srv through proxy, closed when t ends.
func client(t *testing.T, srv *redistest.Server, proxy *redistest.Proxy) *redis.Client {
	opts := srv.Options()
	opts.Addr = proxy.Addr()
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	storetest.RunWith(t, func(t *testing.T) core.Store {
		return redisstore.New(client(t, srv, proxy))
	}, proxied(proxy))
}

func TestRedlockStore(t *testing.T) {
	nodes := redistest.StartNodes(t, 3)
	proxies := make([]*redistest.Proxy, len(nodes))
	for i, n := range nodes {
		proxies[i] = redistest.NewProxy(t, n.Addr())
	}
	storetest.RunWith(t, func(t *testing.T) core.Store {
		stores := make([]lockstore.Store, len(nodes))
		for i, n := range nodes {
			stores[i] = redisstore.New(client(t, n, proxies[i]))
		}
		return redisstore.NewQuorum(stores...)
	}, proxied(proxies...))
}

// The conformance suite on a Redis Cluster of three masters: shares and
// several keys at once run their scripts on one slot (keys of one hash
// tag), and keys of several slots are refused with ErrNotAtomic.
func TestRedisStoreCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, 0)
	storetest.Run(t, func(t *testing.T) core.Store {
		return redisstore.New(cluster.Client(t))
	})
}
