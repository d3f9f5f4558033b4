package rueidisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
)

// shared is the redis-server most tests use; each test locks names of its
// own.
var shared *redistest.Server

// redisAddr is the address the examples connect to.
var redisAddr = "127.0.0.1:6379"

// quiet drops go-redis's own log lines (dial retries while a test has Redis
// cut off).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	testmain.Run(m, func() (func(), error) {
		var err error
		if shared, err = redistest.Launch(); err != nil {
			return nil, err
		}
		redisAddr = shared.Addr()
		return shared.Close, nil
	}, rueidisRefresh)
}

// rueidisRefresh is the goroutine of a rueidis cluster client that waits
// for up to a second before it refreshes the cluster's topology; it may
// outlive the client's Close by that second, and then ends by itself.
var rueidisRefresh = goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).LazyDo.func1")

// leakCheck fails the test if it leaves goroutines behind. Call it first,
// so that it runs after the test's other clean-ups.
func leakCheck(t *testing.T) {
	testmain.LeakCheck(t, rueidisRefresh)
}

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d:%d", t.Name(), seq.Add(1), time.Now().UnixNano())
}

// newClient returns a rueidis client of the Redis at addrs, closed when the
// test ends.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newStore returns a Store on client, closed when the test ends (before
// the client).
func newStore(t testing.TB, client rueidis.Client, opts ...rueidisstore.Option) *rueidisstore.Store {
	t.Helper()
	s, err := rueidisstore.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// counting is a rueidis client that counts its round trips: one per Do and
// one per DoMulti.
type counting struct {
	rueidis.Client
	n atomic.Int64
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *counting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}
