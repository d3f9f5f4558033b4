package pubsub

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/unclaimed"
)

type grant struct {
	ok    bool
	fence int64
	ttl   time.Duration
}

func newGrant(fence int64, ttl time.Duration) grant { return grant{true, fence, ttl} }

func newRegistry(linger time.Duration) (r *Registry[grant], starts *int) {
	starts = new(int)
	return New(linger, newGrant, func() { *starts++ }), starts
}

func received[T any](c chan T) (v T, ok bool) {
	select {
	case v = <-c:
		return v, true
	default:
		return v, false
	}
}

// TestDeliver: a release notice signals the waiters of notices; a grant
// signals them too, and reaches the fair waiter of its token only.
func TestDeliver(t *testing.T) {
	r, starts := newRegistry(time.Second)
	c := make(chan struct{}, 1)
	ga, gb := make(chan grant, 1), make(chan grant, 1)
	r.Join("ch", c)
	r.JoinQueue("ch", "a", ga)
	r.JoinQueue("ch", "b", gb)
	if *starts != 1 {
		t.Fatalf("start ran %d times, want 1", *starts)
	}

	r.Deliver("other", "")
	if _, ok := received(c); ok {
		t.Fatal("a notice of another channel signalled the waiter")
	}
	r.Deliver("ch", "")
	if _, ok := received(c); !ok {
		t.Fatal("the notice did not signal the waiter")
	}
	if _, ok := received(ga); ok {
		t.Fatal("a notice reached a fair waiter")
	}

	r.Deliver("ch", "b 7 900")
	if _, ok := received(c); !ok {
		t.Fatal("the grant did not signal the waiter of notices")
	}
	if g, ok := received(ga); ok {
		t.Fatalf("another token's waiter got %+v", g)
	}
	if g, ok := received(gb); !ok || g != newGrant(7, 900*time.Millisecond) {
		t.Fatalf("b got %+v, %v; want fence 7, TTL 900ms", g, ok)
	}
	if r.unclaimed.Len() != 0 {
		t.Fatalf("%d grants kept, want 0", r.unclaimed.Len())
	}
}

// TestGrantHeardBeforeItsWaiterJoined: a grant published between the poll
// that queued a waiter and the waiter's JoinQueue is kept, and reaches the
// waiter when it joins.
func TestGrantHeardBeforeItsWaiterJoined(t *testing.T) {
	r, _ := newRegistry(time.Second)
	other := make(chan grant, 1)
	r.JoinQueue("ch", "other", other) // subscribes the channel, as a waiter before would have
	r.Deliver("ch", "late 7 900")
	g := make(chan grant, 1)
	w := r.JoinQueue("ch", "late", g)
	defer r.Leave(w)
	if got, ok := received(g); !ok || got != newGrant(7, 900*time.Millisecond) {
		t.Fatalf("got %+v, %v; want the grant heard before the waiter joined", got, ok)
	}
	if got, ok := received(other); ok {
		t.Fatalf("another token's waiter got %+v", got)
	}
	if r.unclaimed.Len() != 0 {
		t.Fatalf("%d grants kept after they were claimed", r.unclaimed.Len())
	}
	for i := range 2 * unclaimed.Max {
		r.Deliver("ch", fmt.Sprintf("t%d 1 1", i))
	}
	if r.unclaimed.Len() > unclaimed.Max {
		t.Fatalf("%d unclaimed grants kept, want at most %d", r.unclaimed.Len(), unclaimed.Max)
	}
}

// TestConfirmed: a confirmation asks the fair waiters of its channel to
// poll, with the zero grant; a grant replaces a pending poll request, and
// is not replaced by one.
func TestConfirmed(t *testing.T) {
	r, _ := newRegistry(time.Second)
	c := make(chan struct{}, 1)
	g := make(chan grant, 1)
	r.Join("ch", c)
	r.JoinQueue("ch", "a", g)

	r.Confirmed("ch")
	if _, ok := received(c); ok {
		t.Fatal("a confirmation signalled the waiter of notices")
	}
	if got, ok := received(g); !ok || got != (grant{}) {
		t.Fatalf("got %+v, %v; want a poll request", got, ok)
	}

	r.Confirmed("ch")
	r.Deliver("ch", "a 3 100")
	if got, _ := received(g); got != newGrant(3, 100*time.Millisecond) {
		t.Fatalf("got %+v; the grant did not replace the poll request", got)
	}

	r.Deliver("ch", "a 4 100")
	r.Confirmed("ch")
	if got, _ := received(g); got != newGrant(4, 100*time.Millisecond) {
		t.Fatalf("got %+v; a poll request replaced the grant", got)
	}
}

// TestLinger: a channel stays subscribed for the linger after its last
// waiter left; a waiter that joins meanwhile keeps it without a change. The
// linger (an hour) outlasts any stall between the calls; its end is
// checked with a clock the test moves.
func TestLinger(t *testing.T) {
	const linger = time.Hour
	r, _ := newRegistry(linger)
	sub := map[string]bool{}
	kicked := func() bool { _, ok := received(r.kick); return ok }

	w := r.Join("ch", make(chan struct{}, 1))
	if !kicked() {
		t.Fatal("the first waiter of a channel made no change")
	}
	if add, drop, next := r.Diff(sub, time.Now()); !slices.Equal(add, []string{"ch"}) || drop != nil || next != -1 {
		t.Fatalf("Diff = %v, %v, %v; want [ch], [], -1", add, drop, next)
	}

	r.Leave(w)
	if !kicked() {
		t.Fatal("the last waiter's leaving made no change")
	}
	add, drop, next := r.Diff(sub, time.Now())
	if add != nil || drop != nil || next <= 0 || next > linger {
		t.Fatalf("Diff = %v, %v, %v; want the channel to linger", add, drop, next)
	}

	w = r.Join("ch", make(chan struct{}, 1))
	if kicked() {
		t.Fatal("a waiter that joined a lingering channel made a change")
	}
	r.Leave(w)
	if add, drop, _ := r.Diff(sub, time.Now().Add(2*linger)); add != nil || !slices.Equal(drop, []string{"ch"}) {
		t.Fatalf("Diff after the linger = %v, %v; want [], [ch]", add, drop)
	}
	if len(sub) != 0 || len(r.idle) != 0 {
		t.Fatalf("subscribed %v, idle %v after the linger; want both empty", sub, r.idle)
	}

	// A channel left before it was ever subscribed is forgotten.
	r.Leave(r.Join("never", make(chan struct{}, 1)))
	if add, drop, next := r.Diff(sub, time.Now()); add != nil || drop != nil || next != -1 || len(r.idle) != 0 {
		t.Fatalf("Diff = %v, %v, %v, idle %v; want nothing", add, drop, next, r.idle)
	}
}

// TestClose: joins after Close return nil; Close closes Done once.
func TestClose(t *testing.T) {
	r, starts := newRegistry(time.Second)
	if !r.Close() || r.Close() {
		t.Fatal("Close did not report the first call alone")
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	if w := r.Join("ch", make(chan struct{}, 1)); w != nil {
		t.Fatal("Join after Close returned a waiter")
	}
	if w := r.JoinQueue("ch", "a", make(chan grant, 1)); w != nil {
		t.Fatal("JoinQueue after Close returned a waiter")
	}
	r.Leave(nil)
	if *starts != 0 {
		t.Fatalf("start ran %d times after Close, want 0", *starts)
	}
}
