package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/reqlock/reqlock/core"
)

// Report is what one property reported when run by Check.
type Report struct {
	Failed   bool
	Skipped  bool
	Messages []string // every Errorf, Fatalf and Skipf, in order
}

// PropertyNames returns the names of the suite's subtests, in order.
func PropertyNames() []string {
	var names []string
	for _, p := range properties {
		names = append(names, p.name)
	}
	for _, p := range holdProperties {
		names = append(names, holdsGroup+"/"+p.name)
	}
	for _, p := range inspectProperties {
		names = append(names, inspectGroup+"/"+p.name)
	}
	return names
}

// lookup returns the property called name, as PropertyNames names it.
func lookup(name string) (property, bool) {
	for _, p := range properties {
		if p.name == name {
			return p, true
		}
	}
	for _, p := range holdProperties {
		if holdsGroup+"/"+p.name == name {
			return p, true
		}
	}
	for _, p := range inspectProperties {
		if inspectGroup+"/"+p.name == name {
			return p, true
		}
	}
	return property{}, false
}

// Check runs the property called name as RunWith would, but with a recorder
// in place of the subtest's T: its failures are returned instead of failing
// t, so that a test can show that a broken store fails it. newStore and the
// Options' hooks still get t.
func Check(t *testing.T, name string, newStore func(t *testing.T) core.Store, opts Options) Report {
	t.Helper()
	if err := opts.check(); err != nil {
		t.Fatal(err)
	}
	if p, ok := lookup(name); ok {
		r := &recorder{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer r.runCleanups()
			p.check(newSuite(r, p.name, func() core.Store { return newStore(t) }, opts, t))
		}()
		<-done
		return r.report()
	}
	t.Fatalf("storetest: no property %q", name)
	return Report{}
}

// recorder is a tb that records what the property reports. Fatalf and
// Skipf end the property's goroutine, as they end a test's.
type recorder struct {
	mu       sync.Mutex
	failed   bool
	skipped  bool
	messages []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) log(fail bool, format string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || fail
	r.messages = append(r.messages, fmt.Sprintf(format, args...))
}

func (r *recorder) Errorf(format string, args ...any) { r.log(true, format, args) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.log(true, format, args)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.log(false, format, args)
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// runCleanups runs the clean-ups last registered first, as testing does.
func (r *recorder) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		f()
	}
}

func (r *recorder) report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Report{Failed: r.failed, Skipped: r.skipped, Messages: append([]string(nil), r.messages...)}
}
