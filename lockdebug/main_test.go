package lockdebug_test

import (
	"testing"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// shared is the redis-server of the tests that take real locks; each test
// locks names of its own.
var shared *redistest.Server

func TestMain(m *testing.M) {
	testmain.Run(m, func() (func(), error) {
		var err error
		shared, err = redistest.Launch()
		if err != nil {
			return nil, err
		}
		return shared.Close, nil
	})
}
