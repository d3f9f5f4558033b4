package adapter

import (
	"fmt"
	"net/http"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Config holds the options that the adapters share. R is an adapter's view
// of one request: *gin.Context, a net/http exchange, a gRPC call; the
// functions users give to the options take it.
//
// An adapter's Option is a func over its own config struct, which embeds
// Config; its With... functions are one line each, calling the setter of the
// same name here. The setters validate their argument and record a problem
// (Invalid) instead of failing, so that NewFlow reports every problem at once.
type Config[R any] struct {
	ttl            time.Duration // per-route TTL; 0: the context's or the Locker's
	wait           time.Duration // per-route wait budget, when waitSet
	waitSet        bool          // 0 is a valid wait: one attempt
	retryAfter     time.Duration // Retry-After of a busy answer; 0: DefaultRetryAfter
	failOpen       bool
	maxBody        int64
	ttlFunc        func(R) time.Duration
	onFailOpen     func(R, error)
	onError        func(R, error)
	onBusy         func(R, error)
	skip           func(R) bool
	mode           core.Mode    // the route's mode: WithShared, WithPermits
	permits        int          // n of WithPermits
	sharedIf       func(R) bool // shared when true, else exclusive: WithSharedReads, WithSharedIf
	modeBy         string       // the option that chose the mode, "" for none
	maxNames       int          // WithMaxNames; 0: keyfunc.DefaultMaxNames
	reqIDHeader    string       // WithRequestIDHeader, when reqIDHeaderSet
	reqIDHeaderSet bool         // "" is a valid header: none
	problems       []string
}

// DefaultRetryAfter is the default Retry-After of a busy answer.
const DefaultRetryAfter = time.Second

// Invalid records a problem of the options, such as "WithWait(-1s): the wait
// budget must not be negative"; NewFlow reports them all.
func (c *Config[R]) Invalid(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// SetTTL is WithTTL: the TTL of the route's locks, unless the request sets
// one. 0 leaves it to the Locker; a negative TTL, or one outside core's
// range, is invalid.
func (c *Config[R]) SetTTL(ttl time.Duration) {
	switch {
	case ttl < 0:
		c.Invalid("WithTTL(%v): the TTL must not be negative", ttl)
	case ttl > 0 && core.CheckCallOptions(core.RouteTTL(ttl)) != nil:
		c.Invalid("WithTTL(%v): the TTL must be between 1ms and %v", ttl, core.MaxTTL)
	}
	c.ttl = ttl
}

// SetWait is WithWait: the wait budget of the route, unless the request sets
// one. 0 is one attempt; a negative wait is invalid.
func (c *Config[R]) SetWait(wait time.Duration) {
	if wait < 0 {
		c.Invalid("WithWait(%v): the wait budget must not be negative", wait)
	}
	c.wait, c.waitSet = wait, true
}

// SetRetryAfter is WithRetryAfter: the Retry-After of the default busy
// answer.
func (c *Config[R]) SetRetryAfter(d time.Duration) {
	if d < 0 {
		c.Invalid("WithRetryAfter(%v): must not be negative", d)
	}
	c.retryAfter = d
}

// SetFailOpen is WithFailOpen: the request is served unlocked when the store
// is unavailable (core.OutcomeUnavailable only).
func (c *Config[R]) SetFailOpen() { c.failOpen = true }

// SetFailOpenHook is WithFailOpenHook: SetFailOpen, and f is told of the
// storage error before the request is served unlocked.
func (c *Config[R]) SetFailOpenHook(f func(R, error)) {
	if f == nil {
		c.Invalid("WithFailOpenHook: nil function")
	}
	c.failOpen, c.onFailOpen = true, f
}

// SetTTLFunc is WithTTLFunc: the per-request TTL, f's result when positive.
func (c *Config[R]) SetTTLFunc(f func(R) time.Duration) {
	if f == nil {
		c.Invalid("WithTTLFunc: nil function")
	}
	c.ttlFunc = f
}

// SetErrorHandler is WithErrorHandler: f answers every failure to lock a
// request but a gone client (and a busy name, when a busy handler is set).
func (c *Config[R]) SetErrorHandler(f func(R, error)) {
	if f == nil {
		c.Invalid("WithErrorHandler: nil function")
	}
	c.onError = f
}

// SetBusyHandler is WithBusyHandler: f answers a name that stayed busy for
// the whole wait budget.
func (c *Config[R]) SetBusyHandler(f func(R, error)) {
	if f == nil {
		c.Invalid("WithBusyHandler: nil function")
	}
	c.onBusy = f
}

// SetSkip is WithSkip: requests for which f returns true are served without
// a lock.
func (c *Config[R]) SetSkip(f func(R) bool) {
	if f == nil {
		c.Invalid("WithSkip: nil function")
	}
	c.skip = f
}

// SetMaxBody is WithMaxBody: the largest body read to find a JSON field.
func (c *Config[R]) SetMaxBody(n int64) {
	if n <= 0 {
		c.Invalid("WithMaxBody(%d): must be positive", n)
	}
	c.maxBody = n
}

// MaxMaxNames is the largest bound WithMaxNames accepts: a request that
// locks more names is better served by a coarser name.
const MaxMaxNames = 1024

// chooseMode records that the option opt chooses the route's mode; a
// second such option is a problem, since a route has one mode.
func (c *Config[R]) chooseMode(opt string) {
	if c.modeBy != "" {
		c.Invalid("%s: the route's lock mode is already chosen by %s", opt, c.modeBy)
	}
	c.modeBy = opt
}

// SetShared is WithShared: the route takes its names shared (core.Shared),
// the read side of a read-write lock: its requests run together, never
// beside a request that holds one of the names exclusively.
func (c *Config[R]) SetShared() {
	c.chooseMode("WithShared")
	c.mode = core.ModeShared
}

// SetPermits is WithPermits: up to n requests hold each of the route's
// names at once (core.Permits), each in its own slot (core.Lease.Slot). n
// must be between 1 and core.MaxPermits.
func (c *Config[R]) SetPermits(n int) {
	if err := core.CheckCallOptions(core.Permits(n)); err != nil {
		c.Invalid("WithPermits(%d): n must be between 1 and %d", n, core.MaxPermits)
	}
	c.chooseMode(fmt.Sprintf("WithPermits(%d)", n))
	c.mode, c.permits = core.ModePermits, n
}

// SetSharedIf is WithSharedIf: a request for which f returns true takes
// the names shared (core.Shared), the others exclusively; both on the same
// names, so that the shared requests run together and never beside an
// exclusive one.
func (c *Config[R]) SetSharedIf(f func(R) bool) {
	c.setSharedIf("WithSharedIf", f)
}

// SetSharedReads is WithSharedReads, for the HTTP adapters: GET and HEAD
// requests take the names shared, other methods exclusively (SetSharedIf);
// method gives a request's HTTP method.
func (c *Config[R]) SetSharedReads(method func(R) string) {
	if method == nil {
		c.setSharedIf("WithSharedReads", nil)
		return
	}
	c.setSharedIf("WithSharedReads", func(x R) bool {
		m := method(x)
		return m == http.MethodGet || m == http.MethodHead
	})
}

func (c *Config[R]) setSharedIf(opt string, f func(R) bool) {
	if f == nil {
		c.Invalid("%s: nil function", opt)
	}
	c.chooseMode(opt)
	c.sharedIf = f
}

// SetMaxNames is WithMaxNames: the most names one request's key may yield
// (keyfunc.Func.Names), between 1 and MaxMaxNames (default
// keyfunc.DefaultMaxNames); a request whose key yields more is refused
// with an error wrapping keyfunc.ErrTooMany (HTTP 400).
func (c *Config[R]) SetMaxNames(n int) {
	if n < 1 || n > MaxMaxNames {
		c.Invalid("WithMaxNames(%d): must be between 1 and %d", n, MaxMaxNames)
	}
	c.maxNames = n
}

// Apply applies opts, an adapter's options, to its config c, whose shared
// part is base; a nil option is recorded as a problem.
func Apply[C any, O ~func(*C), R any](c *C, base *Config[R], opts []O) {
	for i, opt := range opts {
		if opt == nil {
			base.Invalid("option %d is nil", i)
			continue
		}
		opt(c)
	}
}
