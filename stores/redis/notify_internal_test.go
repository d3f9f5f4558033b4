package redisstore

import (
	"testing"
	"time"

	"github.com/reqlock/reqlock/lockstore"
)

// TestGrantHeardBeforeItsWaiterJoined: a grant published between the poll
// that queued a waiter and the waiter's joinQueue is kept, and reaches the
// waiter as a Grant when it joins; other tokens' grants do not (see also
// internal/pubsub's tests).
func TestGrantHeardBeforeItsWaiterJoined(t *testing.T) {
	n := newNotifier(nil, time.Second, time.Second)
	defer n.close()
	other := make(chan lockstore.Grant, 1)
	n.joinQueue("k", "other", other) // subscribes the channel, as a waiter before would have
	n.reg.Deliver(channelOf("k"), "late 7 900")
	g := make(chan lockstore.Grant, 1)
	w := n.joinQueue("k", "late", g)
	defer n.leave(w)
	select {
	case got := <-g:
		if !got.OK || got.Fence != 7 || got.TTL != 900*time.Millisecond {
			t.Fatalf("grant %+v, want OK, fence 7, TTL 900ms", got)
		}
	default:
		t.Fatal("the grant heard before the waiter joined did not reach it")
	}
	select {
	case got := <-other:
		t.Fatalf("another token's waiter got %+v", got)
	default:
	}
}
