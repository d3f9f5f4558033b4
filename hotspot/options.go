package hotspot

import (
	"errors"
	"fmt"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Defaults of a Guard built without options.
const (
	// DefaultCapacity bounds the number of local locks a Guard keeps.
	DefaultCapacity = 1024
	// DefaultHotPeriod is how long a name stays hot after the last local
	// contention seen on it.
	DefaultHotPeriod = time.Minute
)

// Option configures a Guard. Options are checked by New; see Guard.Err.
type Option func(*config)

type config struct {
	capacity int
	keys     map[string]struct{}
	handoff  int
	hotFor   time.Duration
	errs     []error
}

func defaultConfig() config {
	return config{capacity: DefaultCapacity, hotFor: DefaultHotPeriod}
}

// WithCapacity bounds the number of local locks of hot names the Guard keeps
// (default DefaultCapacity); n must be at least 1. Locks that are held or
// waited on are never evicted: when all n are, further names of WithKeys
// bypass the Guard and contend in Redis directly (counted as bypasses).
//
// n also sizes automatic detection: the Guard allows n tentative local locks
// besides, for acquires suspected of contention, and counts acquires in
// flight in 32 × n hash buckets (4 bytes each, at least 4096, at most 2^20).
// Detection of new hot names then keeps working up to about 8 × n acquires
// of distinct names in flight at once; raise n for processes that hold more
// leases at a time.
func WithCapacity(n int) Option {
	return func(c *config) { c.capacity = n }
}

// WithKeys names locks known to be hot in advance: they always take a local
// lock first, whether or not contention was seen on them. Names are matched
// against the name given to Locker.Acquire (not the Redis key), so they
// apply to every Locker that shares the Guard. Names must not be empty.
// Calling WithKeys several times adds to the set.
func WithKeys(names ...string) Option {
	return func(c *config) {
		for _, name := range names {
			if name == "" {
				c.errs = append(c.errs, fmt.Errorf("%w: hotspot: WithKeys: a name is empty", core.ErrInvalidOption))
				continue
			}
			if c.keys == nil {
				c.keys = make(map[string]struct{}, len(names))
			}
			c.keys[name] = struct{}{}
		}
	}
}

// WithHandoff turns local hand-off (lock cohorting) on: a holder that releases
// while goroutines of this process wait for the same name passes its Redis
// lock to one of them, without a release and a re-acquire, at most k times in
// a row; the next release goes to Redis so that other processes get their
// turn. k = 0, the default, turns hand-off off; k must not be negative.
//
// Hand-off trades fairness between processes for throughput: while a process
// has waiters it keeps the lock for up to k+1 critical sections, and waiters
// of other processes wait that much longer. See the package documentation.
func WithHandoff(k int) Option {
	return func(c *config) { c.handoff = k }
}

// WithHotPeriod sets how long a name counts as hot after local contention was
// last seen on it (default DefaultHotPeriod): while hot, its local lock stays
// in the Guard between uses. Zero turns automatic detection off, so that only
// the names given to WithKeys take a local lock. d must not be negative.
func WithHotPeriod(d time.Duration) Option {
	return func(c *config) { c.hotFor = d }
}

func nilOption(i int) error {
	return fmt.Errorf("%w: hotspot: option %d is nil", core.ErrInvalidOption, i)
}

// validate reports every problem of c at once, each wrapping
// core.ErrInvalidOption.
func (c *config) validate() error {
	errs := c.errs
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: hotspot: "+format, append([]any{core.ErrInvalidOption}, args...)...))
	}
	if c.capacity < 1 {
		bad("WithCapacity(%d): the capacity must be at least 1", c.capacity)
	}
	if c.handoff < 0 {
		bad("WithHandoff(%d): the number of handoffs in a row must not be negative", c.handoff)
	}
	if c.hotFor < 0 {
		bad("WithHotPeriod(%v): the hot period must not be negative", c.hotFor)
	}
	return errors.Join(errs...)
}
