// Package pubsub keeps the waiters of the Redis clients' notifiers (core's
// go-redis store, stores/rueidis) by channel, and passes on to them the
// messages heard: release notices, and the fair queue's grants. A notifier
// keeps only its transport: it subscribes to the channels Diff returns, and
// hands what it hears to Deliver and Confirmed.
package pubsub

import (
	"sync"
	"time"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/unclaimed"
)

// Registry is a notifier's waiters by channel, and the channels that stay
// subscribed for a while after their last waiter left (the linger). G is
// the store's grant; its zero value asks a waiter to poll. A Registry is
// safe for concurrent use.
type Registry[G comparable] struct {
	linger time.Duration
	grant  func(fence int64, ttl time.Duration) G
	start  func()

	mu      sync.Mutex
	waiters map[string]map[*Waiter[G]]struct{} // channel → its waiters
	// unclaimed keeps the grants heard for tokens that had no waiter yet:
	// a grant can be published between the poll that queued a waiter and
	// the waiter's JoinQueue, on a channel subscribed already.
	unclaimed unclaimed.Grants[G]
	idle      map[string]time.Time // channel without waiters → when its last waiter left
	started   bool
	closed    bool
	kick      chan struct{} // capacity 1: the set of channels changed
	quit      chan struct{}
}

// Waiter is one registered waiter. A waiter of release notices has a
// signal channel; a waiter of the fair queue has a token, and a channel
// that receives its grant, or the zero G when it should poll at once.
type Waiter[G comparable] struct {
	channel string
	c       chan struct{}
	token   string
	grants  chan G
}

// New returns an empty Registry. A channel stays subscribed for linger
// after its last waiter left. grant makes the G of a grant message (never
// the zero G). start runs once, at the first join, with the Registry's lock
// held: it starts the transport.
func New[G comparable](linger time.Duration, grant func(fence int64, ttl time.Duration) G, start func()) *Registry[G] {
	return &Registry[G]{
		linger:  linger,
		grant:   grant,
		start:   start,
		waiters: make(map[string]map[*Waiter[G]]struct{}),
		idle:    make(map[string]time.Time),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
}

// Join registers a waiter for the release notices of channel: c (capacity
// 1) receives a signal at each, one pending signal standing for several.
// It returns nil once r is closed.
func (r *Registry[G]) Join(channel string, c chan struct{}) *Waiter[G] {
	return r.add(&Waiter[G]{channel: channel, c: c})
}

// JoinQueue registers a waiter of the fair queue for token's grant on
// channel; g has capacity 1. A grant heard for token before it joined is
// put in g at once. It returns nil once r is closed.
func (r *Registry[G]) JoinQueue(channel, token string, g chan G) *Waiter[G] {
	w := r.add(&Waiter[G]{channel: channel, token: token, grants: g})
	if w != nil {
		r.mu.Lock()
		if g0, ok := r.unclaimed.Claim(token); ok {
			Offer(g, g0)
		}
		r.mu.Unlock()
	}
	return w
}

func (r *Registry[G]) add(w *Waiter[G]) *Waiter[G] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if !r.started {
		r.started = true
		r.start()
	}
	set := r.waiters[w.channel]
	if set == nil {
		set = make(map[*Waiter[G]]struct{})
		r.waiters[w.channel] = set
		if _, lingering := r.idle[w.channel]; lingering {
			delete(r.idle, w.channel) // still subscribed
		} else {
			r.changed()
		}
	}
	set[w] = struct{}{}
	return w
}

// Leave unregisters w; a nil w is ignored.
func (r *Registry[G]) Leave(w *Waiter[G]) {
	if w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.waiters[w.channel]
	delete(set, w)
	if len(set) == 0 && set != nil {
		delete(r.waiters, w.channel)
		r.idle[w.channel] = time.Now()
		r.changed()
	}
}

// changed wakes the transport; r.mu is held.
func (r *Registry[G]) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Changed receives when the set of channels to subscribe may have changed.
func (r *Registry[G]) Changed() <-chan struct{} { return r.kick }

// Done is closed by Close.
func (r *Registry[G]) Done() <-chan struct{} { return r.quit }

// Diff updates subscribed, the channels a connection is subscribed to, to
// those that should be at now: the channels that have waiters, and those
// whose last waiter left within the linger. It returns the channels to
// subscribe, those to unsubscribe, and the time until the next lingering
// channel expires (-1: none).
func (r *Registry[G]) Diff(subscribed map[string]bool, now time.Time) (add, drop []string, next time.Duration) {
	next = -1
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.waiters {
		if !subscribed[ch] {
			add = append(add, ch)
			subscribed[ch] = true
		}
	}
	for ch := range r.idle {
		if !subscribed[ch] { // left before it was ever subscribed
			delete(r.idle, ch)
		}
	}
	for ch := range subscribed {
		if _, ok := r.waiters[ch]; ok {
			continue
		}
		if left := r.linger - now.Sub(r.idle[ch]); left > 0 {
			if next < 0 || left < next {
				next = left
			}
			continue
		}
		drop = append(drop, ch)
		delete(subscribed, ch)
		delete(r.idle, ch)
	}
	return add, drop, next
}

// Deliver passes a message of channel on to its waiters: a signal to the
// waiters of release notices, and to a waiter of the fair queue its grant
// ("token fence ttl", redisscript.ParseGrant). A grant for a token without
// a waiter is kept for its JoinQueue. Deliver never blocks.
func (r *Registry[G]) Deliver(channel, payload string) {
	token, fence, ttl, isGrant := redisscript.ParseGrant(payload)
	var grant G
	if isGrant {
		grant = r.grant(fence, ttl)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	claimed := false
	for w := range r.waiters[channel] {
		switch {
		case w.grants == nil:
			signal(w.c)
		case isGrant && w.token == token:
			Offer(w.grants, grant)
			claimed = true
		}
	}
	if isGrant && !claimed {
		r.unclaimed.Keep(token, grant)
	}
}

// Confirmed tells the fair queue's waiters of channel, whose subscription
// the server confirmed, to poll: a grant published before the subscription
// took effect was not heard. Confirmed never blocks.
func (r *Registry[G]) Confirmed(channel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var poll G
	for w := range r.waiters[channel] {
		if w.grants != nil {
			Offer(w.grants, poll)
		}
	}
}

// Close makes later joins return nil and closes Done. It reports whether
// this call closed r, false if it was closed already.
func (r *Registry[G]) Close() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.closed = true
	close(r.quit)
	return true
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // already signalled
	}
}

// Offer puts g in c (capacity 1), replacing a pending poll request (the
// zero G): a grant outranks it. The grants channel of a waiter is fed this
// way, here and by the engine's simulated store (core's tests).
func Offer[G comparable](c chan G, g G) {
	var poll G
	for {
		select {
		case c <- g:
			return
		default:
		}
		select {
		case old := <-c:
			if old != poll {
				c <- old
				return
			}
		default:
		}
	}
}
