package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// shared is the redis-server most tests use; each test locks names of its
// own. Tests that stop or pause Redis start servers of their own.
var shared *redistest.Server

// quiet drops go-redis's own log lines (dial retries while a test has Redis
// stopped); the tests check the errors that reach the caller instead.
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

var seq atomic.Int64

// uniq returns a lock name of the test's own, fresh on every run, so that
// tests sharing a server (and runs with -count) never see each other's keys.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), seq.Add(1))
}

// leakCheck fails the test if it leaves goroutines behind. Call it first,
// so that it runs after the test's other clean-ups.
func leakCheck(t *testing.T) {
	testmain.LeakCheck(t)
}

// contend runs rounds of acquire-then-body on name in goroutines per locker
// and waits for them all; body gets the lease and must release it. A failed
// acquire fails the test and ends its goroutine.
func contend(t *testing.T, lockers []*core.Locker, goroutines, rounds int, name string, body func(*core.Lease)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, l := range lockers {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					lease, err := l.Acquire(context.Background(), name)
					if err != nil {
						t.Errorf("acquire %s: %v", name, err)
						return
					}
					body(lease)
				}
			}()
		}
	}
	wg.Wait()
}

// waitRenewed waits until the watchdog renewed lease (its validity moved
// on) and reports true, or until the lease is done and reports false. It
// fails the test after a minute of neither.
func waitRenewed(t *testing.T, lease *core.Lease) bool {
	t.Helper()
	from := lease.ValidUntil()
	deadline := time.After(time.Minute)
	for {
		if lease.ValidUntil().After(from) {
			return true
		}
		select {
		case <-lease.Done():
			return lease.ValidUntil().After(from) && !lease.Lost()
		case <-deadline:
			t.Fatal("the watchdog neither renewed the lease nor gave it up within a minute")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
