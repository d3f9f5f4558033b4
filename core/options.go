package core

import (
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
// of its TTL (or WithWatchdogInterval) a compare-and-extend script resets the
// lock's lifetime to the lease's TTL, until Release. If a renewal finds the
// lock gone, or Redis cannot be reached for long enough that less than one
// renewal interval of validity is left, the lease is lost: Lease.Done closes,
// so that the request working under it is cancelled before the lock can
// expire and pass to someone else. A lease whose holder process freezes
// (a GC pause, a stopped VM) is not renewed either: pair the watchdog with
// WithFencing where a stale holder must never write.
//
// Each held lease has a goroutine renewing it until Release (or until it is
// lost or handed off): a lease that is never released is renewed forever,
// so release every lease, typically with defer.
//
// Give the client ContextTimeoutEnabled (redis.Options) and a read timeout
// well below the TTL. The watchdog gives a lease up on time whatever the
// client does, but a client without ContextTimeoutEnabled ignores the
// deadlines of the Locker's calls: a renewal stuck on a partitioned
// connection then runs until the client's own read timeout (3 s by
// default), and Release waits up to the I/O timeout for it before sending
// its command.
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
// acquire script in the same atomic step: the larger of the name's counter
// + 1 and the Redis server's clock in microseconds (TIME), written back to
// the counter, which is kept next to the lock in the key Key(name)+":fence"
// (same cluster slot). A store that remembers the highest token it has seen
// for a resource and rejects writes carrying a lower one cannot be corrupted
// by a holder that lost its lock while paused.
//
// Tokens are strictly increasing per name, across processes and client
// restarts; and, because the server's clock carries on where the counter is
// lost, across a FLUSHALL, a Redis restart without persistence, an evicted
// counter, and a failover that lost the latest values of the counter: the
// next token comes from the clock, above every earlier one. The counter
// expires 5 s after the lock it was last drawn for (its TTL is the lock's
// TTL plus 5 s at every fenced acquire and local hand-off; watchdog
// renewals do not extend it), so that an idle name leaves nothing behind;
// the next token then comes from the clock too.
//
// The remaining limit is the server's clock: tokens drawn from it stay
// above earlier ones as long as it does not go back. A clock stepped back
// (by NTP or by hand), or a failover to a replica whose clock is behind the
// old master's by more than the time since the last token, can repeat
// tokens; so can two tokens drawn within one microsecond across a restart.
// Keep the servers' clocks synchronised (NTP slewing, not stepping). With
// NewRedlock, each node draws from its own clock, and a raised counter
// expires with the lock too: the nodes' clocks must agree to within the
// TTL plus 5 s. Memory pressure never repeats a token (an evicted counter
// is a lost counter), but an evicted lock is a lost lock: run the locks'
// Redis with maxmemory-policy noeviction.
//
// Fencing needs Redis 5.0 or later, whose scripts may read the clock before
// writing (scripts are replicated by their effects). It replaces the native
// SET ... NX GET of the attempts after the first by a script, which costs
// Redis a little more CPU per attempt; round trips are unchanged. Tokens are 64-bit integers of about
// 1.7e15 (microseconds since 1970): store them in 64-bit columns.
func WithFencing() Option {
	return func(c *config) { c.fencing = true }
}

// WithNotify makes Release publish on the name's channel
// (Key(name)+":released", inside the release script, so at no extra round
// trip) and makes waiting Acquires wake on that message or at the end of
// their random sleep, whichever comes first: a release is then seen in about
// one round trip instead of half a sleep. The sleep stays the fallback for a
// lost message and for locks that end by expiry, which publish nothing.
//
// It is the releasing Locker that publishes: give WithNotify to every Locker
// that locks the same names. The Locker subscribes once per Redis deployment
// (one connection, started at the first wait): SUBSCRIBE for the names that
// have waiters, kept for a while after the last one leaves
// (WithNotifyLinger), so that a hot name does not cost a SUBSCRIBE and an
// UNSUBSCRIBE per wait and its releases are seen from the first failed
// attempt on. Close the Locker to end the subscription.
//
// It is plain pub/sub, also on Redis Cluster, where each PUBLISH is broadcast
// to every node over the cluster bus; sharded pub/sub would need one
// connection per shard and a resubscription at every slot move, for a gain
// that matters only on clusters with many nodes.
func WithNotify() Option {
	return func(c *config) { c.notify = true }
}

// DefaultNotifyLinger is how long a name stays subscribed after its last
// waiter left, with WithNotify.
const DefaultNotifyLinger = lockstore.DefaultNotifyLinger

// WithNotifyLinger sets how long, with WithNotify, a name's channel stays
// subscribed after its last waiter left (default DefaultNotifyLinger; 0
// unsubscribes at once). A name waited on again within it costs no
// SUBSCRIBE and misses no release while a SUBSCRIBE is on its way. The
// subscribed names are those waited on within the linger, so the longer it
// is, the more channels stay subscribed on a Locker that waits on many
// names. It must not be negative.
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
		bad("WithSpin(%v, %v): min+random must be positive, or waiters would flood Redis", c.spinMin, c.spinRandom)
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
