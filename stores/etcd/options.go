package etcdstore

import (
	"fmt"

	"github.com/reqlock/reqlock/core"
)

// DefaultPrefix is the etcd key prefix of the locks of a Store built
// without WithPrefix: the lock "reqlock:{order:42}" is the etcd key
// "/reqlock/reqlock:{order:42}".
const DefaultPrefix = "/reqlock/"

// DefaultLeasePool is how many unused leases a Store keeps for reuse
// without WithLeasePool.
const DefaultLeasePool = 64

// Option configures a Store (see New).
type Option func(*config)

type config struct {
	prefix string
	pool   int
	errs   []error
}

func defaultConfig() config {
	return config{prefix: DefaultPrefix, pool: DefaultLeasePool}
}

// WithPrefix sets the etcd key prefix prepended to every lock key (default
// DefaultPrefix). Keys under one prefix are easy to grant with etcd's role
// based access control (etcdctl role grant-permission --prefix) and to list
// (etcdctl get --prefix). An empty prefix stores the keys as the Locker
// names them. Every Store that shares locks must use the same prefix.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithLeasePool sets how many unused leases the Store keeps for reuse
// (default DefaultLeasePool). A lease freed by a release, or granted for an
// attempt that found the key held, is kept instead of being left to expire,
// and the next acquisition with the same TTL takes it: it renews it
// (KeepAliveOnce) in parallel with its transaction instead of granting a new
// lease first, which saves a round trip and a consensus write on the server.
// A kept lease is reused only in the first half of its TTL and otherwise
// expires on the server by itself. 0 turns reuse off: every acquisition
// grants a lease of its own. A negative n is an invalid option.
func WithLeasePool(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("etcdstore: %w: WithLeasePool(%d): the pool size must not be negative", core.ErrInvalidOption, n))
			return
		}
		c.pool = n
	}
}
