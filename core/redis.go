package core

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// The Redis constructors, kept in core for compatibility and convenience:
// the Redis and Redlock stores live in package stores/redis (redisstore).

// New returns a Locker that keeps its locks in the Redis deployment behind
// client: a *redis.Client, a Sentinel failover client or a
// *redis.ClusterClient. It is NewWithStore(NewRedisStore(client), opts...),
// except that its Close also closes that store (not the client).
//
// New does no I/O and never panics: invalid options and a nil client are
// reported by Err and every Acquire. A client without ContextTimeoutEnabled
// gets a warning in the default slog logger, as the I/O timeout cannot cut
// its blocked reads.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	var err error
	if client == nil || isNilPointer(client) {
		err = fmt.Errorf("%w: New: the Redis client is nil", ErrInvalidOption)
	}
	l := newLocker(redisstore.New(client), true, err, opts)
	if l.err == nil {
		warnContextTimeout([]redis.UniversalClient{client})
	}
	return l
}

// NewRedlock returns a Locker that keeps each lock on a majority of
// independent Redis masters (Redlock, see redisstore.NewRedlock), with the
// API and options of New; its Close waits for the calls of slow nodes left
// in the background. An empty list or a nil client is reported by Err.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) *Locker {
	var errs []error
	if len(clients) == 0 {
		errs = append(errs, fmt.Errorf("%w: NewRedlock: no clients", ErrInvalidOption))
	}
	for i, c := range clients {
		if c == nil || isNilPointer(c) {
			errs = append(errs, fmt.Errorf("%w: NewRedlock: client %d is nil", ErrInvalidOption, i))
		}
	}
	l := newLocker(redisstore.NewRedlock(clients), true, errors.Join(errs...), opts)
	if l.err == nil {
		warnContextTimeout(clients)
	}
	return l
}

// NewRedisStore returns the Store on the Redis deployment behind client:
// redisstore.New(client).
func NewRedisStore(client redis.UniversalClient) Store {
	return redisstore.New(client)
}

// NewRedlockStore returns a Store that keeps each lock on a majority of the
// independent stores given (Redlock): redisstore.NewQuorum(stores...).
func NewRedlockStore(stores ...Store) Store {
	return redisstore.NewQuorum(stores...)
}

// warnContextTimeout logs a warning for each client whose reads a context
// deadline does not cut.
func warnContextTimeout(clients []redis.UniversalClient) {
	for i, c := range clients {
		var enabled bool
		switch c := c.(type) {
		case *redis.Client:
			enabled = c.Options().ContextTimeoutEnabled
		case *redis.ClusterClient:
			enabled = c.Options().ContextTimeoutEnabled
		case *redis.Ring:
			enabled = c.Options().ContextTimeoutEnabled
		default:
			continue
		}
		if !enabled {
			slog.Warn("reqlock: the Redis client has ContextTimeoutEnabled off: the Locker's I/O timeout cannot cut a blocked read, the client's ReadTimeout bounds it instead; set ContextTimeoutEnabled: true in its options",
				"client", i)
		}
	}
}
