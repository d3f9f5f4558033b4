package rueidisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/unclaimed"
)

// notifier is a Store's subscription to the messages of the lock channels
// (Watch, Grants): one dedicated connection (rueidis's Dedicate with pub/sub
// hooks), subscribed to the channels of the keys that have waiters in this
// process, or had one within the linger. Waiters only touch a map; subscribing and reading run
// on the notifier's goroutine and rueidis's, so that a waiter never blocks
// on pub/sub I/O.
type notifier struct {
	client    rueidis.Client
	ioTimeout time.Duration
	linger    time.Duration

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // channel → its waiters
	// unclaimed keeps the grants heard for tokens that had no waiter yet
	// (see internal/unclaimed).
	unclaimed unclaimed.Grants[core.Grant]
	idle      map[string]time.Time // channel without waiters → when its last waiter left
	started   bool
	closed    bool
	kick      chan struct{} // capacity 1: the set of channels changed
	quit      chan struct{}
	wg        sync.WaitGroup
}

// waiter is one Watch: c receives a signal when its key may have been
// released. A waiter of the fair queue (Grants) has a token instead, and
// grants receives its grant (a message "token fence ttl" on the channel, see
// queue.lua) or a Grant without OK when it should poll at once: when its
// channel's subscription is (re)confirmed, a grant may have been published
// before it.
type waiter struct {
	channel string
	c       chan struct{}
	token   string
	grants  chan core.Grant
}

func newNotifier(client rueidis.Client, ioTimeout, linger time.Duration) *notifier {
	return &notifier{
		client:    client,
		ioTimeout: ioTimeout,
		linger:    linger,
		waiters:   make(map[string]map[*waiter]struct{}),
		idle:      make(map[string]time.Time),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
	}
}

// join registers a waiter for the releases of key, starting the
// subscription at the first call. It returns nil when n is nil (the Store
// is closed) or closed; the waiter then relies on its sleep alone.
func (n *notifier) join(key string, c chan struct{}) *waiter {
	return n.add(&waiter{channel: redisscript.Channel(key), c: c})
}

// joinQueue registers a waiter of the fair queue for token's grant of key;
// g has capacity 1. Like join, it returns nil when n is nil or closed; the
// waiter then learns of its grant at its next poll.
func (n *notifier) joinQueue(key, token string, g chan core.Grant) *waiter {
	w := n.add(&waiter{channel: redisscript.Channel(key), token: token, grants: g})
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
		n.started = true
		n.wg.Add(1)
		go n.run()
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

// changed wakes the goroutine of run; n.mu is held.
func (n *notifier) changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// deliver passes a message on to the waiters of its channel: a signal to
// those of Watch, and to a waiter of Grants its grant. It runs on rueidis's
// reading goroutine, and never blocks.
func (n *notifier) deliver(m rueidis.PubSubMessage) {
	token, fence, ttl, isGrant := redisscript.ParseGrant(m.Message)
	n.mu.Lock()
	defer n.mu.Unlock()
	claimed := false
	for w := range n.waiters[m.Channel] {
		switch {
		case w.grants == nil:
			signal(w.c)
		case isGrant && w.token == token:
			offer(w.grants, core.Grant{OK: true, Fence: fence, TTL: ttl})
			claimed = true
		}
	}
	if isGrant && !claimed {
		n.unclaimed.Keep(token, core.Grant{OK: true, Fence: fence, TTL: ttl})
	}
}

// subscription hears the server's confirmations of the connection's
// subscriptions: a confirmed channel asks its waiters of Grants to poll,
// since a grant published before the subscription took effect was not
// heard. It runs on rueidis's reading goroutine, and never blocks.
func (n *notifier) subscription(s rueidis.PubSubSubscription) {
	if s.Kind != "subscribe" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.waiters[s.Channel] {
		if w.grants != nil {
			offer(w.grants, core.Grant{})
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
func offer(c chan core.Grant, g core.Grant) {
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

// run keeps a dedicated connection subscribed to the channels that have
// waiters or had one within the linger, until close. When the connection
// fails, it takes another, after a pause that grows while Redis stays
// unreachable, and subscribes it to every channel again.
func (n *notifier) run() {
	defer n.wg.Done()
	pause := 10 * time.Millisecond
	for {
		select {
		case <-n.quit:
			return
		default:
		}
		healthy := n.session()
		if healthy {
			pause = 10 * time.Millisecond
		}
		select {
		case <-n.quit:
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// session runs one dedicated connection until it fails or the notifier is
// closed, and reports whether a subscription went through on it.
func (n *notifier) session() (healthy bool) {
	dc, cancel := n.client.Dedicate()
	defer func() {
		dc.Close() // its subscriptions end with it
		cancel()
	}()
	lost := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: n.deliver, OnSubscription: n.subscription})
	subscribed := map[string]bool{}
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-n.quit:
				return healthy
			case <-lost:
				return healthy
			case <-n.kick:
			case <-expiry.C:
			}
		}
		add, drop, next := n.diff(subscribed, time.Now())
		if next >= 0 {
			expiry.Reset(next)
		}
		ctx, cancelIO := context.WithTimeout(context.Background(), n.ioTimeout)
		var err error
		if len(add) > 0 {
			if err = dc.Do(ctx, dc.B().Subscribe().Channel(add...).Build()).Error(); err == nil {
				healthy = true
			}
		}
		if len(drop) > 0 && err == nil {
			err = dc.Do(ctx, dc.B().Unsubscribe().Channel(drop...).Build()).Error()
		}
		cancelIO()
		if err != nil {
			return healthy // a new connection subscribes to every channel
		}
	}
}

// diff updates subscribed to the channels that should be subscribed at
// now, and returns those to subscribe, those to unsubscribe and the time
// until the next lingering channel expires (-1: none).
func (n *notifier) diff(subscribed map[string]bool, now time.Time) (add, drop []string, next time.Duration) {
	next = -1
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters {
		if !subscribed[ch] {
			add = append(add, ch)
			subscribed[ch] = true
		}
	}
	for ch := range n.idle {
		if !subscribed[ch] { // left before it was ever subscribed
			delete(n.idle, ch)
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
	return add, drop, next
}

// close ends the subscription and waits for its goroutine; nil-safe.
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
	n.mu.Unlock()
	n.wg.Wait()
}
