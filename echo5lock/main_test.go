package echo5lock_test

import (
	"testing"

	"github.com/reqlock/reqlock/internal/adaptertest"
)

// redisAddr is the address the examples connect to: the tests' own
// redis-server.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) { adaptertest.Main(m, func() { redisAddr = adaptertest.Shared.Addr() }) }
