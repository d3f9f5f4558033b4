package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reqlock/reqlock/lockstore"
)

// Defaults of a Locker built without options: a lock lives 10 s unless
// released, a request waits at most 3 s for it and sleeps 10–20 ms between
// attempts, and a store call gets 1 s.
const (
	DefaultTTL        = 10 * time.Second
	DefaultWait       = 3 * time.Second
	DefaultSpinMin    = 10 * time.Millisecond
	DefaultSpinRandom = 10 * time.Millisecond
	DefaultIOTimeout  = lockstore.DefaultIOTimeout
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
	observers  []Observer
	queue      LocalQueue
	errs       []error

	watchdog         bool
	watchdogInterval time.Duration // 0: a third of each lease's TTL
	fencing          bool
	notify           bool
	notifyLinger     time.Duration
	fair             bool
	fairPatience     time.Duration

	noHolder     bool                         // WithoutHolder
	holderFields []holderField                // WithHolderField
	requestID    func(context.Context) string // WithRequestID
}

func defaultConfig() config {
	return config{
		ttl:        DefaultTTL,
		wait:       DefaultWait,
		spinMin:    DefaultSpinMin,
		spinRandom: DefaultSpinRandom,
		ioTimeout:  DefaultIOTimeout,
		prefix:     DefaultPrefix,

		notifyLinger: DefaultNotifyLinger,
		fairPatience: DefaultFairPatience,
	}
}

// WithTTL sets how long a lock lives in the store unless released first
// (default 10 s). It must be at least 1 ms and at most MaxTTL, and is rounded
// up to whole milliseconds. A call's TTL, ContextWithTTL and a route's
// RouteTTL override it (see Locker.Acquire).
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.ttl = ttl }
}

// WithWait sets the wait budget: how long Acquire keeps trying while another
// holder has the name (default 3 s). The context's deadline cuts it further;
// a call's Wait, ContextWithWait and a route's RouteWait override it. Zero means a single attempt (try-lock). It must not be negative.
func WithWait(wait time.Duration) Option {
	return func(c *config) { c.wait = wait }
}

// WithSpin sets the sleep between two attempts: a random duration in
// [min, min+random), trimmed to what is left of the wait budget and cut short
// when the context ends. Randomness spreads the retries of competing clients
// so that they do not hit the store in step. random may be zero (a fixed
// sleep); neither may be negative, and min+random must be positive. Default
// 10 ms, 10 ms.
func WithSpin(min, random time.Duration) Option {
	return func(c *config) { c.spinMin, c.spinRandom = min, random }
}

// WithIOTimeout bounds every single store call made by the Locker (default
// 1 s): a call that gets no reply in time fails with ErrStorage. It is
// applied as a context deadline, which a store honours as its client does
// (see the store's documentation).
func WithIOTimeout(d time.Duration) Option {
	return func(c *config) { c.ioTimeout = d }
}

// WithPrefix sets the namespace put in front of every lock name (default
// "reqlock:"). It may be empty; it may not contain '{' or '}', which are kept
// for the cluster hash tag around the name.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithHandlers adds plugins to the Locker. Each goes to its slot (see
// Handler): a LocalQueue (such as a hotspot.Guard) to the local-queue slot,
// an Observer (such as a lockotel.Handler) to the observers, anything else
// to the Handler chain, in the order given, outermost first. So the order
// of WithHandlers options matters only among users' own Handlers. A nil
// plugin, or a second LocalQueue, is an invalid option.
func WithHandlers(handlers ...Handler) Option {
	return func(c *config) {
		for i, h := range handlers {
			switch p := h.(type) {
			case nil:
				c.errs = append(c.errs, fmt.Errorf("%w: WithHandlers: handler %d is nil", ErrInvalidOption, i))
			case LocalQueue:
				c.setQueue(p, "WithHandlers")
			case Observer:
				c.observers = append(c.observers, p)
			default:
				if isNilPointer(h) {
					c.errs = append(c.errs, fmt.Errorf("%w: WithHandlers: handler %d is a nil %T", ErrInvalidOption, i, h))
					continue
				}
				c.handlers = append(c.handlers, h)
			}
		}
	}
}

// WithLocalQueue sets the Locker's local queue (see LocalQueue), such as a
// hotspot.Guard. A Locker has at most one.
func WithLocalQueue(q LocalQueue) Option {
	return func(c *config) { c.setQueue(q, "WithLocalQueue") }
}

func (c *config) setQueue(q LocalQueue, source string) {
	switch {
	case q == nil || isNilPointer(q):
		c.errs = append(c.errs, fmt.Errorf("%w: %s: the local queue is nil", ErrInvalidOption, source))
	case c.queue != nil:
		c.errs = append(c.errs, fmt.Errorf("%w: %s: a Locker has one local queue, and %T was set already", ErrInvalidOption, source, c.queue))
	default:
		c.queue = q
	}
}

// WithObservers adds observers (see Observer), such as a lockotel.Handler.
func WithObservers(observers ...Observer) Option {
	return func(c *config) {
		for i, o := range observers {
			if o == nil || isNilPointer(o) {
				c.errs = append(c.errs, fmt.Errorf("%w: WithObservers: observer %d is nil", ErrInvalidOption, i))
				continue
			}
			c.observers = append(c.observers, o)
		}
	}
}

// WithWatchdog makes every lease renew itself while it is held: every third
// of its TTL (or WithWatchdogInterval) it extends the lock to the lease's
// TTL, so that a handler may outlive the TTL. If a renewal finds the lock
// gone, or the store cannot be reached until less than one renewal interval
// of validity is left, the lease is lost: Done closes while the lock is
// still the lease's, so that the request working under it is cancelled
// before anyone else can take the name. A frozen process renews nothing:
// pair the watchdog with WithFencing where a stale holder must never write.
// A lease is renewed until it is released, so release every lease.
func WithWatchdog() Option {
	return func(c *config) { c.watchdog = true }
}

// WithWatchdogInterval turns the watchdog on (see WithWatchdog) and renews
// every d instead of every third of the TTL. A lease whose TTL is less than
// 2×d (a per-request TTL, say) is renewed every third of its TTL. d must be
// positive.
func WithWatchdogInterval(d time.Duration) Option {
	return func(c *config) {
		c.watchdog = true
		c.watchdogInterval = d
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithWatchdogInterval(%v): the interval must be positive", ErrInvalidOption, d))
		}
	}
}

// WithFencing gives every lease a fencing token (Lease.Fence), drawn by the
// store in the same atomic step as the lock: strictly increasing per name,
// across holders, processes and restarts (Kleppmann's fencing tokens). A
// resource that remembers the highest token it has accepted and rejects
// writes with a lower one cannot be corrupted by a holder that lost its lock
// while paused. How a store draws its tokens, and where they could repeat,
// is in the store's documentation.
func WithFencing() Option {
	return func(c *config) { c.fencing = true }
}

// WithNotify makes Release announce itself to the waiters of the name in
// every process, and makes a waiting Acquire wake on that notice or at the
// end of its random sleep, whichever comes first: a release is seen in about
// one round trip instead of half a sleep. The sleep stays the fallback for a
// lost notice and for locks that expire. It needs a store that pushes
// (Notifier), and it is the releasing Locker that announces: give WithNotify
// to every Locker that locks the same names. Close the Locker to end its
// subscription.
func WithNotify() Option {
	return func(c *config) { c.notify = true }
}

// DefaultNotifyLinger is how long a name stays subscribed after its last
// waiter left, with WithNotify.
const DefaultNotifyLinger = lockstore.DefaultNotifyLinger

// WithNotifyLinger sets how long, with WithNotify, a name stays subscribed
// after its last waiter left (default DefaultNotifyLinger; 0 unsubscribes at
// once), so that a name waited on again soon costs no new subscription and
// misses no release meanwhile. It must not be negative.
func WithNotifyLinger(d time.Duration) Option {
	return func(c *config) { c.notifyLinger = d }
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
	if c.notifyLinger < 0 {
		bad("WithNotifyLinger(%v): the linger must not be negative", c.notifyLinger)
	}
	if c.spinMin < 0 || c.spinRandom < 0 {
		bad("WithSpin(%v, %v): sleep durations must not be negative", c.spinMin, c.spinRandom)
	} else if c.spinMin+c.spinRandom <= 0 {
		bad("WithSpin(%v, %v): min+random must be positive, or waiters would flood the store", c.spinMin, c.spinRandom)
	}
	if c.fair && c.fairPatience < minFairPatience {
		bad("WithFairPatience(%v): the patience must be at least %v", c.fairPatience, minFairPatience)
	}
	if c.ioTimeout <= 0 {
		bad("WithIOTimeout(%v): the I/O timeout must be positive", c.ioTimeout)
	}
	if strings.ContainsAny(c.prefix, "{}") {
		bad("WithPrefix(%q): the prefix must not contain '{' or '}'", c.prefix)
	}
	// A plugin that reports a configuration error of its own (a
	// hotspot.Guard built with a bad option) would fail every request: the
	// Locker reports it, so that Err and the adapters' checks see it first.
	plugins := make([]any, 0, 1+len(c.handlers)+len(c.observers))
	if c.queue != nil {
		plugins = append(plugins, c.queue)
	}
	for _, h := range c.handlers {
		plugins = append(plugins, h)
	}
	for _, o := range c.observers {
		plugins = append(plugins, o)
	}
	for _, p := range plugins {
		if e, ok := p.(interface{ Err() error }); ok {
			if err := e.Err(); err != nil {
				errs = append(errs, fmt.Errorf("%w: %T: %w", ErrInvalidOption, p, err))
			}
		}
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
