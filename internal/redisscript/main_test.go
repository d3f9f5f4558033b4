package redisscript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// quiet drops go-redis's own log lines; the tests check the errors they get.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	testmain.Run(m, nil)
}

// newClient starts a redis-server for t and returns a client of it; both
// end with t.
func newClient(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Start(t).Client(t)
}
