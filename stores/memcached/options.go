package memcachedstore

import (
	"fmt"
	"net"
)

// Option configures a Store (see New).
type Option func(*config) error

type config struct {
	clockAddr string
}

// WithServerClock makes the Store time a new fence counter by the clock of
// the memcached server at addr ("host:port"): the time field of its stats,
// in whole seconds, asked on a connection of the Store's own (gomemcache
// does not send stats) when a counter is missing. Every process that
// shares the locks should name the same server. Without it, the Store
// times a new counter by this process's clock, in microseconds (see
// Fencing in the package documentation for what each guarantees).
func WithServerClock(addr string) Option {
	return func(c *config) error {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("memcachedstore: WithServerClock(%q): %w", addr, err)
		}
		c.clockAddr = addr
		return nil
	}
}
