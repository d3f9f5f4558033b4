// Package testmain is the TestMain of the test packages that share servers
// among their tests: start the servers, run the tests, stop the servers,
// and fail a passing run that left goroutines behind.
package testmain

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Run starts the package's servers (start returns how to stop them), runs
// its tests and exits with their code: 1 if start fails, or if the tests
// passed but left goroutines behind (opts tell goleak what to ignore).
func Run(m *testing.M, start func() (stop func(), err error), opts ...goleak.Option) {
	stop, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LeakCheck fails the test if it leaves goroutines behind (opts tell
// goleak what to ignore). Call it first, so that it runs after the test's
// other clean-ups.
func LeakCheck(t *testing.T, opts ...goleak.Option) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, append(opts, before)...) })
}
