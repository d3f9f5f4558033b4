package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of a Locker built without options. They are those of the seed's
// experiment: a lock lives 10 s unless released, a request waits at most 3 s
// for it and sleeps 10–20 ms between attempts.
const (
	DefaultTTL        = 10 * time.Second
	DefaultWait       = 3 * time.Second
	DefaultSpinMin    = 10 * time.Millisecond
	DefaultSpinRandom = 10 * time.Millisecond
	DefaultIOTimeout  = time.Second
	DefaultPrefix     = "reqlock:"
)

// Option configures a Locker. Options are checked by New; see Locker.Err.
type Option func(*config)

type config struct {
	ttl        time.Duration
	wait       time.Duration
	spinMin    time.Duration
	spinRandom time.Duration
	ioTimeout  time.Duration
	prefix     string
	handlers   []Handler
	errs       []error
}

func defaultConfig() config {
	return config{
		ttl:        DefaultTTL,
		wait:       DefaultWait,
		spinMin:    DefaultSpinMin,
		spinRandom: DefaultSpinRandom,
		ioTimeout:  DefaultIOTimeout,
		prefix:     DefaultPrefix,
	}
}

// WithTTL sets how long a lock lives in Redis unless released first (the
// seed's TTL, default 10 s). It must be at least 1 ms and at most MaxTTL, and
// is rounded up to whole milliseconds. ContextWithTTL overrides it per request.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.ttl = ttl }
}

// WithWait sets the wait budget: how long Acquire keeps trying while another
// holder has the name (the seed's D, default 3 s). The context's deadline cuts
// it further. Zero means a single attempt (try-lock). It must not be negative.
func WithWait(wait time.Duration) Option {
	return func(c *config) { c.wait = wait }
}

// WithSpin sets the sleep between two attempts: a random duration in
// [min, min+random), trimmed to what is left of the wait budget and cut short
// when the context ends. Randomness spreads the retries of competing clients
// so that they do not hit Redis in step. random may be zero (a fixed sleep);
// neither may be negative, and min+random must be positive. Default 10 ms, 10 ms.
func WithSpin(min, random time.Duration) Option {
	return func(c *config) { c.spinMin, c.spinRandom = min, random }
}

// WithIOTimeout bounds every single Redis call made by the Locker (default
// 1 s): an attempt that gets no reply in time fails with ErrStorage. It is
// applied as a context deadline, which go-redis turns into a socket deadline
// only when the client has ContextTimeoutEnabled set; otherwise the client's
// own ReadTimeout and WriteTimeout bound the call.
func WithIOTimeout(d time.Duration) Option {
	return func(c *config) { c.ioTimeout = d }
}

// WithPrefix sets the namespace put in front of every lock name (default
// "reqlock:"). It may be empty; it may not contain '{' or '}', which are kept
// for the cluster hash tag around the name.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithHandlers appends handlers to the Locker's chain. The first handler is
// the outermost: it sees an acquire first and a release first, like the first
// of a list of HTTP middlewares. The Redis backend is always the innermost
// link. Calling WithHandlers several times appends in order.
func WithHandlers(handlers ...Handler) Option {
	return func(c *config) {
		for i, h := range handlers {
			if h == nil {
				c.errs = append(c.errs, fmt.Errorf("%w: WithHandlers: handler %d is nil", ErrInvalidOption, i))
				continue
			}
			c.handlers = append(c.handlers, h)
		}
	}
}

// validate reports every problem of c at once, each wrapping ErrInvalidOption,
// and normalises the TTL to whole milliseconds.
func (c *config) validate() error {
	errs := c.errs
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if ttl, err := checkTTL(c.ttl, "WithTTL"); err != nil {
		errs = append(errs, err)
	} else {
		c.ttl = ttl // in whole milliseconds
	}
	if c.wait < 0 {
		bad("WithWait(%v): the wait budget must not be negative", c.wait)
	}
	if c.spinMin < 0 || c.spinRandom < 0 {
		bad("WithSpin(%v, %v): sleep durations must not be negative", c.spinMin, c.spinRandom)
	} else if c.spinMin+c.spinRandom <= 0 {
		bad("WithSpin(%v, %v): min+random must be positive, or waiters would flood Redis", c.spinMin, c.spinRandom)
	}
	if c.ioTimeout <= 0 {
		bad("WithIOTimeout(%v): the I/O timeout must be positive", c.ioTimeout)
	}
	if strings.ContainsAny(c.prefix, "{}") {
		bad("WithPrefix(%q): the prefix must not contain '{' or '}'", c.prefix)
	}
	return errors.Join(errs...)
}

// MaxTTL is the longest TTL a lock may have.
const MaxTTL = 10 * 365 * 24 * time.Hour

// checkTTL validates and normalises a TTL to whole milliseconds.
func checkTTL(ttl time.Duration, source string) (time.Duration, error) {
	if ttl < time.Millisecond || ttl > MaxTTL {
		return 0, fmt.Errorf("%w: %s(%v): the TTL must be between 1ms and %v", ErrInvalidOption, source, ttl, MaxTTL)
	}
	if r := ttl % time.Millisecond; r != 0 {
		ttl += time.Millisecond - r
	}
	return ttl, nil
}
