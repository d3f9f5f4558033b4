package lockdebug

import (
	"errors"
	"fmt"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// Defaults of a Page built without options.
const (
	// DefaultMaxLeases is how many held leases the page lists; the others
	// are counted.
	DefaultMaxLeases = 200
	// DefaultMaxWaiters is how many acquires in progress the page lists;
	// the others are counted.
	DefaultMaxWaiters = 200
	// DefaultMaxHot is how many of the Guard's hot names the page lists.
	DefaultMaxHot = 50
	// DefaultWindow is how far back the histogram of lock waits looks.
	DefaultWindow = 5 * time.Minute
)

// Bounds of the options.
const (
	// MaxList is the largest cap WithMaxLeases, WithMaxWaiters and
	// WithMaxHot accept: a page lists no more rows than that.
	MaxList = 10000
	// MinWindow and MaxWindow bound WithWindow.
	MinWindow = 10 * time.Second
	MaxWindow = 24 * time.Hour
)

// Option configures a Page.
type Option func(*config)

type config struct {
	names      bool
	guard      *hotspot.Guard
	maxLeases  int
	maxWaiters int
	maxHot     int
	window     time.Duration
	now        func() time.Time
	errs       []error
}

func defaultConfig() config {
	return config{maxLeases: DefaultMaxLeases, maxWaiters: DefaultMaxWaiters, maxHot: DefaultMaxHot, window: DefaultWindow, now: time.Now}
}

// WithNames shows what identifies a lock and its holder: lock names and
// keys, tokens and the holder's identity (host, process, request id, the
// fields a service adds; see core.ParseHolder). Without it the page shows
// routes, modes, durations and counts only, so that a page reached by
// mistake leaks no order number, user id or request id. Pass it when the
// page is served to operators only (behind the service's admin
// authentication, or on a loopback-only admin port).
func WithNames() Option {
	return func(c *config) { c.names = true }
}

// WithGuard shows the hot names of g, the Locker's hotspot.Guard (its
// local queue): their local holder and waiters, and g's counters (hits,
// bypasses, evictions, hand-offs). A nil g shows none.
func WithGuard(g *hotspot.Guard) Option {
	return func(c *config) { c.guard = g }
}

// WithMaxLeases sets how many held leases the page lists (default
// DefaultMaxLeases, at most MaxList): the page keeps at most that many, and
// counts the others. n must be at least 1.
func WithMaxLeases(n int) Option {
	return func(c *config) { c.maxLeases = n }
}

// WithMaxWaiters sets how many acquires in progress the page lists (default
// DefaultMaxWaiters, at most MaxList), and counts the others. n must be at
// least 1.
func WithMaxWaiters(n int) Option {
	return func(c *config) { c.maxWaiters = n }
}

// WithMaxHot sets how many of the Guard's hot names the page lists
// (default DefaultMaxHot, at most MaxList). n must be at least 1.
func WithMaxHot(n int) Option {
	return func(c *config) { c.maxHot = n }
}

// WithWindow sets how far back the histogram of lock waits and the counts
// of outcomes look (default DefaultWindow; from MinWindow to MaxWindow).
// The window slides in 60 steps: an acquire is counted for between 59/60 of
// the window and the whole of it.
func WithWindow(d time.Duration) Option {
	return func(c *config) { c.window = d }
}

// WithClock makes the page read the time from now instead of time.Now: for
// tests and examples, whose output then does not depend on when they run.
// The events' own times (core.AcquireEvent.End) place them in the window.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: lockdebug: WithClock(nil)", core.ErrInvalidOption))
			return
		}
		c.now = now
	}
}

// validate reports every problem of c at once, each wrapping
// core.ErrInvalidOption.
func (c *config) validate() error {
	errs := c.errs
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: lockdebug: "+format, append([]any{core.ErrInvalidOption}, args...)...))
	}
	for _, o := range []struct {
		name string
		n    int
	}{{"WithMaxLeases", c.maxLeases}, {"WithMaxWaiters", c.maxWaiters}, {"WithMaxHot", c.maxHot}} {
		if o.n < 1 || o.n > MaxList {
			bad("%s(%d): the cap must be from 1 to %d", o.name, o.n, MaxList)
		}
	}
	if c.window < MinWindow || c.window > MaxWindow {
		bad("WithWindow(%v): the window must be from %v to %v", c.window, MinWindow, MaxWindow)
	}
	return errors.Join(errs...)
}

func errNilOption(i int) error {
	return fmt.Errorf("%w: lockdebug: option %d is nil", core.ErrInvalidOption, i)
}
