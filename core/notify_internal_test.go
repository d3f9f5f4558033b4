package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/unclaimed"
)

// TestGrantHeardBeforeItsWaiterJoined: a grant published between the poll
// that queued a waiter and the waiter's joinQueue is kept, and reaches the
// waiter when it joins; other tokens' grants do not.
func TestGrantHeardBeforeItsWaiterJoined(t *testing.T) {
	n := newNotifier(nil, time.Second, time.Second)
	defer n.close()
	other := make(chan Grant, 1)
	n.joinQueue("k", "other", other) // subscribes the channel, as a waiter before would have
	n.deliver(channelOf("k"), "late 7 900")
	g := make(chan Grant, 1)
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
	if n.unclaimed.Len() != 0 {
		t.Fatalf("%d grants kept after they were claimed", n.unclaimed.Len())
	}
	for i := range 2 * unclaimed.Max {
		n.deliver(channelOf("k"), fmt.Sprintf("t%d 1 1", i))
	}
	if n.unclaimed.Len() > unclaimed.Max {
		t.Fatalf("%d unclaimed grants kept, want at most %d", n.unclaimed.Len(), unclaimed.Max)
	}
}
