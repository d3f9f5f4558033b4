package core_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// lateGrants is a Redis store whose grant messages reach the waiter late:
// each is held back until a Poll that started after the grant's TTL had
// passed (counted from when the message came) has returned, as a slow
// pub/sub connection or a paused process would hold it. By then the grant
// has expired on the server and that Poll has queued the waiter again,
// which the waiter has heard.
type lateGrants struct {
	core.Queuer

	mu       sync.Mutex
	lastPoll time.Time     // when the last Poll that returned had started
	polled   chan struct{} // closed when a Poll returns
}

func newLateGrants(q core.Queuer) *lateGrants {
	return &lateGrants{Queuer: q, polled: make(chan struct{})}
}

func (s *lateGrants) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	start := time.Now()
	i, g, err := s.Queuer.Poll(ctx, key, waiters, patience, fenced)
	s.mu.Lock()
	s.lastPoll = start
	close(s.polled)
	s.polled = make(chan struct{})
	s.mu.Unlock()
	return i, g, err
}

// polledSince waits until a Poll that started at or after t has returned.
func (s *lateGrants) polledSince(t time.Time, done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		ok, c := !s.lastPoll.Before(t), s.polled
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-c:
		case <-done:
			return false
		}
	}
}

func (s *lateGrants) Grants(key, token string) (<-chan core.Grant, func()) {
	in, stop := s.Queuer.Grants(key, token)
	out := make(chan core.Grant)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			var g core.Grant
			select {
			case g = <-in:
			case <-done:
				return
			}
			if g.OK {
				if !s.polledSince(time.Now().Add(g.TTL), done) {
					return
				}
				// Then ask for a poll (a message that is not a grant), and
				// let that one return too: the waiter has taken in the
				// answer of the first.
				select {
				case out <- core.Grant{}:
				case <-done:
					return
				}
				if !s.polledSince(time.Now(), done) {
					return
				}
			}
			select {
			case out <- g:
			case <-done:
				return
			}
		}
	}()
	return out, func() {
		close(done)
		<-exited
		stop()
	}
}

// TestFairLateGrantGivesNoSecondHolder: a grant heard after it expired (and
// after the name passed to the next waiter) gives no lease. The waiter B
// (TTL 1 s, a poll every 2 s) is granted the name for its TTL by the
// holder's release, right after one of its polls; its message is held back
// until its next poll, which ran after that second, queued B again behind C
// and granted the name to C. A lease built from the message
// would be valid while C's is.
func TestFairLateGrantGivesNoSecondHolder(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	store := core.NewRedisStore(holder.client)
	t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
	late := newLateGrants(store.(core.Queuer))
	b := core.NewWithStore(late, core.WithFair(), core.WithFairPatience(6*time.Second), core.WithTTL(time.Second), core.WithWait(5*time.Second))
	t.Cleanup(func() { _ = b.Close() })
	c := newEnv(t, nil, core.WithFair(), core.WithTTL(30*time.Second), core.WithWait(30*time.Second))

	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *core.Lease
		err   error
	}
	bGot, cGot := make(chan result, 1), make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, name)
		bGot <- result{l, err}
	}()
	waitQueued(t, holder, name, 1)
	go func() {
		l, err := c.locker.Acquire(ctx, name)
		cGot <- result{l, err}
	}()
	waitQueued(t, holder, name, 2)
	// Release right after one of B's polls, so that its next one (2 s
	// later) comes after the grant's second.
	late.polledSince(time.Now(), nil)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cr := <-cGot
	if cr.err != nil {
		t.Fatalf("C: %v", cr.err)
	}
	defer func() { _ = cr.lease.Release(ctx) }()
	br := <-bGot
	if br.err != nil && !errors.Is(br.err, core.ErrTimeout) {
		t.Fatalf("B: %v, want ErrTimeout", br.err)
	}
	if br.err == nil {
		defer func() { _ = br.lease.Release(ctx) }()
		now := time.Now()
		valid := func(l *core.Lease) bool { return !l.Lost() && now.Before(l.ValidUntil()) }
		if valid(br.lease) && valid(cr.lease) {
			t.Fatalf("B's lease (from a grant heard late) is valid until %v and C's until %v: two holders",
				br.lease.ValidUntil().Sub(now).Round(time.Millisecond), cr.lease.ValidUntil().Sub(now).Round(time.Millisecond))
		}
	}
}

// TestFairGrantIsDatedFromTheStore: a lease granted by a release is valid
// from no earlier than the grant, not from the waiter's last poll. B (TTL
// 2 s, a poll every 10 s) is granted the name 3 s after it last polled; a
// lease dated from that poll would be born lost while the store holds the
// name for it.
func TestFairGrantIsDatedFromTheStore(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	waiter := newEnv(t, nil, core.WithFair(), core.WithFairPatience(30*time.Second), core.WithTTL(2*time.Second), core.WithWait(30*time.Second))
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.locker.Acquire(ctx, name)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, holder, name, 1)
	time.Sleep(3 * time.Second) // the scenario: a release a while after the waiter's last poll
	released := time.Now()
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer func() { _ = l.Release(ctx) }()
	if l.Lost() || !l.ValidUntil().After(released) {
		t.Fatalf("the granted lease is valid until %v after the release (lost %v): dated from before the grant",
			l.ValidUntil().Sub(released).Round(time.Millisecond), l.Lost())
	}
}
