package fiber3lock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/internal/adaptertest"
)

// redisAddr is the address the examples connect to: the tests' own
// redis-server.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) {
	// fasthttp starts its clock on the first request served, for good.
	adaptertest.Ignore = append(adaptertest.Ignore, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
	adaptertest.Main(m, func() { redisAddr = adaptertest.Shared.Addr() })
}
