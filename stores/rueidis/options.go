package rueidisstore

import (
	"fmt"
	"time"
)

// Option configures a Store (see New).
type Option func(*config) error

type config struct {
	ioTimeout time.Duration
	linger    time.Duration
}

// WithIOTimeout bounds each call the Store makes on its own, outside the
// calls of a Locker (which are bounded by the Locker's WithIOTimeout): a
// subscription of Watch, a round of clean-ups of failed attempts. Default
// core.DefaultIOTimeout. Give it the Locker's I/O timeout.
func WithIOTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("rueidisstore: WithIOTimeout(%v): the I/O timeout must be positive", d)
		}
		c.ioTimeout = d
		return nil
	}
}

// WithNotifyLinger sets how long a release channel stays subscribed after
// its last waiter left (default core.DefaultNotifyLinger), so that a name
// contended in bursts is not subscribed and unsubscribed for each waiter;
// 0 unsubscribes at once.
func WithNotifyLinger(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("rueidisstore: WithNotifyLinger(%v): the linger must not be negative", d)
		}
		c.linger = d
		return nil
	}
}
