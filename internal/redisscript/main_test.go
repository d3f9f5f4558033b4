package redisscript_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/reqlock/reqlock/internal/redistest"
)

// quiet drops go-redis's own log lines; the tests check the errors they get.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	code := m.Run()
	if code == 0 {
		if err := redistest.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newClient starts a redis-server for t and returns a client of it; both
// end with t.
func newClient(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Start(t).Client(t)
}
