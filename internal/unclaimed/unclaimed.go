// Package unclaimed keeps the fair queue's grants that a process heard
// before their waiter was listening: a grant can be published between the
// poll that queued a waiter and the moment the waiter registers for its
// grants, on a channel the process is subscribed to already. The Redis
// clients' notifiers (core's go-redis store, stores/rueidis), through
// internal/pubsub's registry, keep such a grant here, and give it to the
// waiter when it registers, instead of leaving the waiter to find it at its
// next poll.
package unclaimed

import "time"

// Grants kept this long at the most, and this many: a waiter registers
// within a round trip of its poll, and a grant it never claims (one of
// another process's waiters) is dropped.
const (
	For = 5 * time.Second
	Max = 1024
)

// Grants maps waiters' tokens to the grants heard for them. The zero value
// is ready to use; it is not safe for concurrent use (the registry holds
// its lock).
type Grants[G any] struct {
	m map[string]kept[G]
}

type kept[G any] struct {
	grant G
	heard time.Time
}

// Keep remembers g for token, dropping expired grants, and the oldest ones
// beyond Max.
func (u *Grants[G]) Keep(token string, g G) {
	now := time.Now()
	if u.m == nil {
		u.m = make(map[string]kept[G])
	}
	if len(u.m) >= Max {
		for t, k := range u.m {
			if now.Sub(k.heard) > For || len(u.m) >= Max {
				delete(u.m, t)
			}
		}
	}
	u.m[token] = kept[G]{grant: g, heard: now}
}

// Claim returns and forgets the grant kept for token, if one was heard
// within For.
func (u *Grants[G]) Claim(token string) (g G, ok bool) {
	k, ok := u.m[token]
	if !ok {
		return g, false
	}
	delete(u.m, token)
	if time.Since(k.heard) > For {
		return g, false
	}
	return k.grant, true
}

// Len returns how many grants are kept.
func (u *Grants[G]) Len() int { return len(u.m) }
