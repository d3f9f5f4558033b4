package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/unclaimed"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// notifier is a Locker's shared subscription to release messages
// (WithNotify): one pub/sub connection per Redis deployment, subscribed to
// the channels of the names that have waiters in this process. Waiters only
// touch a map; the subscribing and the reading run on the notifier's own
// goroutines, so that a waiter never blocks on pub/sub I/O.
type notifier struct {
	clients   []redis.UniversalClient
	ioTimeout time.Duration
	linger    time.Duration // how long a channel stays subscribed without waiters

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // channel → its waiters
	// unclaimed keeps the grants heard for tokens that had no waiter yet:
	// a grant can be published between the poll that queued a waiter and
	// the waiter's joinQueue, on a channel subscribed already.
	unclaimed unclaimed.Grants[Grant]
	idle      map[string]time.Time // channel without waiters → when its last waiter left
	started   bool
	closed    bool
	subs      []*redis.PubSub
	kick      chan struct{} // capacity 1: the set of channels changed
	quit      chan struct{}
	wg        sync.WaitGroup
}

// waiter is one waiting Acquire: c receives a signal when the lock it waits
// for may have been released. A waiter of the fair queue (WithFair) has a
// token instead, and grants receives its grant (a message "token fence
// ttl" on the channel, see queue.lua) or a Grant with OK false when it
// should poll at once: when its channel's subscription is (re)confirmed, a
// grant may have been published before it.
type waiter struct {
	channel string
	c       chan struct{}
	token   string
	grants  chan Grant
}

// C returns the waiter's signal channel; a nil waiter's never fires.
func (w *waiter) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.c
}

func newNotifier(clients []redis.UniversalClient, ioTimeout, linger time.Duration) *notifier {
	return &notifier{
		clients:   clients,
		ioTimeout: ioTimeout,
		linger:    linger,
		waiters:   make(map[string]map[*waiter]struct{}),
		idle:      make(map[string]time.Time),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
	}
}

// join registers a waiter for the release messages of key, starting the
// subscription at the first call. It returns nil when notifications are off
// or the store is closed; the caller then relies on its sleep alone. c
// receives the signals (capacity 1; one pending signal is enough).
func (n *notifier) join(key string, c chan struct{}) *waiter {
	return n.add(&waiter{channel: channelOf(key), c: c})
}

// joinQueue registers a waiter of the fair queue for token's grant of key;
// g has capacity 1. Like join, it returns nil when the store is closed.
func (n *notifier) joinQueue(key, token string, g chan Grant) *waiter {
	w := n.add(&waiter{channel: channelOf(key), token: token, grants: g})
	if w != nil {
		n.mu.Lock()
		if g0, ok := n.unclaimed.Claim(token); ok {
			offer(g, g0)
		}
		n.mu.Unlock()
	}
	return w
}

func (n *notifier) add(w *waiter) *waiter {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if !n.started {
		n.start()
	}
	set := n.waiters[w.channel]
	if set == nil {
		set = make(map[*waiter]struct{})
		n.waiters[w.channel] = set
		if _, lingering := n.idle[w.channel]; lingering {
			delete(n.idle, w.channel) // still subscribed
		} else {
			n.changed()
		}
	}
	set[w] = struct{}{}
	return w
}

// leave unregisters w; nil-safe.
func (n *notifier) leave(w *waiter) {
	if n == nil || w == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.waiters[w.channel]
	delete(set, w)
	if len(set) == 0 && set != nil {
		delete(n.waiters, w.channel)
		n.idle[w.channel] = time.Now()
		n.changed()
	}
}

// changed wakes the subscriber; n.mu is held.
func (n *notifier) changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// start opens one pub/sub per deployment and its goroutines; n.mu is held.
func (n *notifier) start() {
	n.started = true
	for _, c := range n.clients {
		n.subs = append(n.subs, c.Subscribe(context.Background()))
	}
	n.wg.Add(1 + len(n.subs))
	go n.subscriber()
	for _, ps := range n.subs {
		go n.reader(ps)
	}
}

// subscriber keeps the subscriptions equal to the set of channels that have
// waiters or had one within the linger. A failed SUBSCRIBE is not retried here: go-redis remembers the
// channel and subscribes it again when it reconnects.
func (n *notifier) subscriber() {
	defer n.wg.Done()
	subscribed := map[string]bool{}
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-n.kick:
		case <-expiry.C:
		}
		var add, drop []string
		next := time.Duration(-1) // until the next lingering channel expires
		now := time.Now()
		n.mu.Lock()
		for ch := range n.waiters {
			if !subscribed[ch] {
				add = append(add, ch)
				subscribed[ch] = true
			}
		}
		for ch := range subscribed {
			if _, ok := n.waiters[ch]; ok {
				continue
			}
			if left := n.linger - now.Sub(n.idle[ch]); left > 0 {
				if next < 0 || left < next {
					next = left
				}
				continue
			}
			drop = append(drop, ch)
			delete(subscribed, ch)
			delete(n.idle, ch)
		}
		for ch := range n.idle { // left before it was ever subscribed
			if !subscribed[ch] {
				delete(n.idle, ch)
			}
		}
		n.mu.Unlock()
		if next >= 0 {
			expiry.Reset(next)
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.ioTimeout)
		failed := false
		for _, ps := range n.subs {
			if len(add) > 0 && ps.Subscribe(ctx, add...) != nil {
				failed = true
			}
			if len(drop) > 0 {
				_ = ps.Unsubscribe(ctx, drop...)
			}
		}
		cancel()
		if failed {
			// A SUBSCRIBE that timed out on a live connection is not sent
			// again by go-redis (it resubscribes on a reconnection only):
			// try these channels again shortly.
			for _, ch := range add {
				delete(subscribed, ch)
			}
			expiry.Reset(retrySubscribe)
		}
	}
}

// retrySubscribe is how soon a failed SUBSCRIBE is sent again.
const retrySubscribe = 100 * time.Millisecond

// reader delivers the messages of one subscription to the waiters of their
// channel. While Redis is unreachable it retries with a growing pause; the
// client resubscribes by itself once it reconnects.
func (n *notifier) reader(ps *redis.PubSub) {
	defer n.wg.Done()
	pause := 10 * time.Millisecond
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			select {
			case <-n.quit:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Message:
			n.deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirmed(m.Channel)
			}
		}
	}
}

// deliver passes a message of channel on to its waiters: a signal to the
// waiters of WithNotify, and to a fair waiter its grant.
func (n *notifier) deliver(channel, payload string) {
	token, grant, isGrant := parseGrant(payload)
	n.mu.Lock()
	defer n.mu.Unlock()
	claimed := false
	for w := range n.waiters[channel] {
		switch {
		case w.grants == nil:
			signal(w.c)
		case isGrant && w.token == token:
			offer(w.grants, grant)
			claimed = true
		}
	}
	if isGrant && !claimed {
		n.unclaimed.Keep(token, grant)
	}
}

// confirmed tells the fair waiters of channel, now subscribed, to poll: a
// grant published before the subscription took effect was not heard.
func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.waiters[channel] {
		if w.grants != nil {
			offer(w.grants, Grant{})
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // already signalled
	}
}

// offer puts g in c (capacity 1), replacing a pending poll request: a grant
// outranks it.
func offer(c chan Grant, g Grant) {
	for {
		select {
		case c <- g:
			return
		default:
		}
		select {
		case old := <-c:
			if old.OK {
				c <- old
				return
			}
		default:
		}
	}
}

// parseGrant reads a grant message of the fair queue, "token fence ttl" (ttl
// in ms; redisscript.ParseGrant); a release notice of WithNotify is empty.
func parseGrant(payload string) (token string, g Grant, ok bool) {
	token, fence, ttl, ok := redisscript.ParseGrant(payload)
	if !ok {
		return "", Grant{}, false
	}
	return token, Grant{OK: true, Fence: fence, TTL: ttl}, true
}

// close ends the subscription and waits for its goroutines.
func (n *notifier) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.quit)
	subs := n.subs
	n.mu.Unlock()
	for _, ps := range subs {
		_ = ps.Close()
	}
	n.wg.Wait()
}
