package rueidisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/pubsub"
	"github.com/reqlock/reqlock/internal/redisscript"
)

// notifier is a Store's subscription to the messages of the lock channels
// (Watch, Grants): one dedicated connection (rueidis's Dedicate with pub/sub
// hooks), subscribed to the channels of the keys that have waiters in this
// process, or had one within the linger (see internal/pubsub). Waiters only
// touch a map; subscribing and reading run on the notifier's goroutine and
// rueidis's, so that a waiter never blocks on pub/sub I/O.
type notifier struct {
	reg       *pubsub.Registry[core.Grant]
	client    rueidis.Client
	ioTimeout time.Duration
	wg        sync.WaitGroup
}

func newNotifier(client rueidis.Client, ioTimeout, linger time.Duration) *notifier {
	n := &notifier{client: client, ioTimeout: ioTimeout}
	n.reg = pubsub.New(linger, newGrant, n.start)
	return n
}

// newGrant is the core.Grant of a grant message.
func newGrant(fence int64, ttl time.Duration) core.Grant {
	return core.Grant{OK: true, Fence: fence, TTL: ttl}
}

// join registers a waiter for the releases of key, starting the
// subscription at the first call. It returns nil when n is nil (the Store
// is closed) or closed; the waiter then relies on its sleep alone.
func (n *notifier) join(key string, c chan struct{}) *pubsub.Waiter[core.Grant] {
	if n == nil {
		return nil
	}
	return n.reg.Join(redisscript.Channel(key), c)
}

// joinQueue registers a waiter of the fair queue for token's grant of key;
// g has capacity 1. Like join, it returns nil when n is nil or closed; the
// waiter then learns of its grant at its next poll.
func (n *notifier) joinQueue(key, token string, g chan core.Grant) *pubsub.Waiter[core.Grant] {
	if n == nil {
		return nil
	}
	return n.reg.JoinQueue(redisscript.Channel(key), token, g)
}

// leave unregisters w; nil-safe.
func (n *notifier) leave(w *pubsub.Waiter[core.Grant]) {
	if n != nil {
		n.reg.Leave(w)
	}
}

// start starts the goroutine of run; the Registry's lock is held.
func (n *notifier) start() {
	n.wg.Add(1)
	go n.run()
}

// deliver passes a message on to the waiters of its channel. It runs on
// rueidis's reading goroutine, and never blocks.
func (n *notifier) deliver(m rueidis.PubSubMessage) {
	n.reg.Deliver(m.Channel, m.Message)
}

// subscription hears the server's confirmations of the connection's
// subscriptions: a confirmed channel asks its waiters of Grants to poll,
// since a grant published before the subscription took effect was not
// heard. It runs on rueidis's reading goroutine, and never blocks.
func (n *notifier) subscription(s rueidis.PubSubSubscription) {
	if s.Kind == "subscribe" {
		n.reg.Confirmed(s.Channel)
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
		case <-n.reg.Done():
			return
		default:
		}
		healthy := n.session()
		if healthy {
			pause = 10 * time.Millisecond
		}
		select {
		case <-n.reg.Done():
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
			case <-n.reg.Done():
				return healthy
			case <-lost:
				return healthy
			case <-n.reg.Changed():
			case <-expiry.C:
			}
		}
		add, drop, next := n.reg.Diff(subscribed, time.Now())
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

// close ends the subscription and waits for its goroutine; nil-safe.
func (n *notifier) close() {
	if n != nil && n.reg.Close() {
		n.wg.Wait()
	}
}
