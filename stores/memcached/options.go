package memcachedstore

import (
	"fmt"
	"net"
	"strings"

	"github.com/reqlock/reqlock/core"
)

// Option configures a Store (see New).
type Option func(*config) error

type config struct {
	clockAddr string
	servers   []string
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

// WithServers tells the Store the addresses of its client's servers
// ("host:port", or the path of a Unix socket), in the order given to
// memcache.New: gomemcache does not tell them, and the Store's List and
// Inspect (lockstore.Inspector) ask each server on a connection of their
// own (List: lru_crawler metadump; Inspect: the TTLs left, meta get). The
// Store picks a key's server as memcache.New's ServerList does (the CRC-32
// of the key, modulo the number of servers). Without it, List is an error
// and Inspect reports TTLs of 0 (unknown); the locks work the same.
func WithServers(addrs ...string) Option {
	return func(c *config) error {
		if len(addrs) == 0 {
			return fmt.Errorf("memcachedstore: WithServers(): %w: no address", core.ErrInvalidOption)
		}
		for _, a := range addrs {
			if strings.Contains(a, "/") {
				continue // a Unix socket, as gomemcache takes it
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("memcachedstore: WithServers(%q): %w: %w", a, core.ErrInvalidOption, err)
			}
		}
		c.servers = append([]string(nil), addrs...)
		return nil
	}
}
