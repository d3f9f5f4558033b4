// Package testmain is the TestMain of the test packages that share servers
// among their tests: start the servers, run the tests, stop the servers,
// and fail a passing run that left goroutines behind.
package testmain

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Run starts the package's servers (start, if not nil, returns how to stop them), runs
// its tests and exits with their code: 1 if start fails, or if the tests
// passed but left goroutines behind (opts tell goleak what to ignore).
func Run(m *testing.M, start func() (stop func(), err error), opts ...goleak.Option) {
	stop := func() {}
	if start != nil {
		var err error
		if stop, err = start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := FindLeaks(opts...); err != nil {
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
	opts = append(opts, goleak.IgnoreCurrent())
	t.Cleanup(func() {
		if err := FindLeaks(opts...); err != nil {
			t.Error(err)
		}
	})
}

// LeakPatience is how long FindLeaks waits for goroutines to end. Those a
// test's clean-ups stop (a server's, a client's, a Locker's background
// clean-ups) end soon, but "soon" on a loaded machine under the race
// detector can be well over goleak's own patience of about half a second;
// a goroutine really leaked stays for good and is reported all the same.
const LeakPatience = 10 * time.Second

// FindLeaks is goleak.Find with LeakPatience: it reports the goroutines
// (other than those opts ignore) still running after that long.
func FindLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(LeakPatience)
	for {
		err := goleak.Find(opts...) // retries for about half a second itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
