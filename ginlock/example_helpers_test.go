package ginlock_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/adaptertest"
)

// newClient connects the examples to the test's redis-server.
func newClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: adaptertest.Shared.Addr(), ContextTimeoutEnabled: true})
}
