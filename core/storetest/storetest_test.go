package storetest_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// shared is the redis-server behind the broken stores; the real stores get
// servers of their own.
var shared *redistest.Server

// quiet drops go-redis's own log lines (dial retries while a proxy is cut).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	testmain.Run(m, func() (func(), error) {
		var err error
		shared, err = redistest.Launch()
		if err != nil {
			return nil, err
		}
		return shared.Close, nil
	})
}

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

// TestStoreDownSkippedWithoutHook: without Options.Down the suite cannot
// take the store down, and says so instead of passing silently.
func TestStoreDownSkippedWithoutHook(t *testing.T) {
	rep := storetest.Check(t, "StoreDownIsErrStorage", func(t *testing.T) core.Store {
		return core.NewRedisStore(shared.Client(t))
	}, storetest.Options{})
	if !rep.Skipped || rep.Failed {
		t.Fatalf("got %+v; want the property skipped", rep)
	}
}
