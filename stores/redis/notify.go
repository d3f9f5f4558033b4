package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/pubsub"
	"github.com/reqlock/reqlock/lockstore"
)

// notifier is a Locker's shared subscription to release messages
// (WithNotify) and to the fair queue's grants (WithFair): one pub/sub
// connection per Redis deployment, subscribed to the channels of the names
// that have waiters in this process (see internal/pubsub). Waiters only
// touch a map; the subscribing and the reading run on the notifier's own
// goroutines, so that a waiter never blocks on pub/sub I/O.
type notifier struct {
	reg       *pubsub.Registry[lockstore.Grant]
	clients   []redis.UniversalClient
	ioTimeout time.Duration
	subs      []*redis.PubSub // set by start, under the Registry's lock
	wg        sync.WaitGroup
}

func newNotifier(clients []redis.UniversalClient, ioTimeout, linger time.Duration) *notifier {
	n := &notifier{clients: clients, ioTimeout: ioTimeout}
	n.reg = pubsub.New(linger, newGrant, n.start)
	return n
}

// newGrant is the Grant of a grant message.
func newGrant(fence int64, ttl time.Duration) lockstore.Grant {
	return lockstore.Grant{OK: true, Fence: fence, TTL: ttl}
}

// join registers a waiter for the release messages of key, starting the
// subscription at the first call. It returns nil when notifications are off
// or the store is closed; the caller then relies on its sleep alone. c
// receives the signals (capacity 1; one pending signal is enough).
func (n *notifier) join(key string, c chan struct{}) *pubsub.Waiter[lockstore.Grant] {
	if n == nil {
		return nil
	}
	return n.reg.Join(channelOf(key), c)
}

// joinQueue registers a waiter of the fair queue for token's grant of key;
// g has capacity 1. Like join, it returns nil when the store is closed.
func (n *notifier) joinQueue(key, token string, g chan lockstore.Grant) *pubsub.Waiter[lockstore.Grant] {
	if n == nil {
		return nil
	}
	return n.reg.JoinQueue(channelOf(key), token, g)
}

// leave unregisters w; nil-safe.
func (n *notifier) leave(w *pubsub.Waiter[lockstore.Grant]) {
	if n != nil {
		n.reg.Leave(w)
	}
}

// start opens one pub/sub per deployment and its goroutines; the
// Registry's lock is held.
func (n *notifier) start() {
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
// waiters or had one within the linger. A SUBSCRIBE that fails is sent
// again retrySubscribe later.
func (n *notifier) subscriber() {
	defer n.wg.Done()
	subscribed := map[string]bool{}
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	for {
		select {
		case <-n.reg.Done():
			return
		case <-n.reg.Changed():
		case <-expiry.C:
		}
		add, drop, next := n.reg.Diff(subscribed, time.Now())
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
			case <-n.reg.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Message:
			n.reg.Deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.reg.Confirmed(m.Channel)
			}
		}
	}
}

// close ends the subscription and waits for its goroutines; nil-safe.
func (n *notifier) close() {
	if n == nil || !n.reg.Close() {
		return
	}
	for _, ps := range n.subs {
		_ = ps.Close()
	}
	n.wg.Wait()
}
