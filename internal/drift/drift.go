// Package drift is how long a lock can be counted on, shared by the lock
// engine (core) and the stores that decide on a lock's validity themselves
// (the Redlock quorum of stores/redis): one rule, so that the two never
// disagree.
package drift

import "time"

// Validity is when a lock given ttl by a command sent at sent is to be
// taken as gone: the TTL counts from before the command reached the store,
// less a margin for clock drift between this process and the server (1% of
// the TTL plus 2 ms, as in Redlock), so that a lease gives up before the
// store frees the key.
func Validity(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ValidFor(ttl))
}

// ValidFor is how long a lock given ttl is valid after its command was sent.
func ValidFor(ttl time.Duration) time.Duration {
	return ttl - ttl/100 - 2*time.Millisecond
}
