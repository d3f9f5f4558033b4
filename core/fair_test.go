package core_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/redistest"
)

func TestFairMutualExclusion(t *testing.T) {
	name := uniq(t)
	var envs []*env
	for range 3 {
		envs = append(envs, newEnv(t, nil, core.WithFair(), core.WithWait(20*time.Second)))
	}
	ok, failed, o := hammer(t, envs, name, 3, 10, time.Millisecond)
	if o.Overlaps() > 0 || failed > 0 || ok != 90 {
		t.Fatalf("ok %d, failed %d, overlaps %d: want 90, 0, 0", ok, failed, o.Overlaps())
	}
	assertNoQueue(t, envs[0], name)
}

// assertNoQueue checks that the queue keys of name are gone.
func assertNoQueue(t *testing.T, e *env, name string) {
	t.Helper()
	key, _ := e.locker.Key(name)
	if n := e.client.Exists(context.Background(), key, key+":queue", key+":waiters").Val(); n != 0 {
		t.Fatalf("%d of the lock and its queue keys are left", n)
	}
}

// TestFairGrantsInArrivalOrder queues waiters one after the other behind a
// holder, each on a Locker of its own, and checks that they get the lock in
// the order they came.
func TestFairGrantsInArrivalOrder(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		// A patience no stall of a loaded machine outlasts: a waiter whose
		// place died between two polls would queue again at the back.
		e := newEnv(t, nil, core.WithFair(), core.WithFairPatience(30*time.Second), core.WithWait(time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := e.locker.Acquire(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, holder, name, int64(i+1))
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grants in order %v, want 0..%d", order, waiters-1)
		}
	}
	assertNoQueue(t, holder, name)
}

// waitQueued waits until n waiters queue for name.
func waitQueued(t *testing.T, e *env, name string, n int64) {
	t.Helper()
	key, _ := e.locker.Key(name)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if e.client.ZCard(context.Background(), key+":queue").Val() == n {
			return
		}
	}
	t.Fatalf("%d waiters did not queue for %q", n, name)
}

// TestFairHandoffCostsTheNewHolderOneRoundTrip: a waiter granted the lock
// by a release hears it by pub/sub and confirms it with one round trip (its
// poll, which dates the lease from the store's answer), with its fence when
// it asked for one.
//
// The waiter's round trips are counted from when it is quiet: queued, and
// its poll at the confirmation of its subscription returned; its next poll
// is 20 s (a third of its patience) away.
func TestFairHandoffCostsTheNewHolderOneRoundTrip(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			name := uniq(t)
			ctx := context.Background()
			opts := []core.Option{core.WithFair()}
			if fenced {
				opts = append(opts, core.WithFencing())
			}
			holder := newEnv(t, nil, opts...)
			waiter := newEnv(t, nil, append(opts, core.WithFairPatience(time.Minute), core.WithWait(time.Minute))...)
			t.Cleanup(func() { _ = waiter.locker.Close() })
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
			// The subscription is confirmed, and a poll follows it: count
			// from when that poll has returned.
			key, _ := waiter.locker.Key(name)
			for deadline := time.Now().Add(15 * time.Second); waiter.locker.FairPolls(key) < 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not poll after its subscription")
				}
			}
			before := waiter.rt.N.Load()
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var l *core.Lease
			select {
			case l = <-got:
			case <-time.After(15 * time.Second): // the next poll is 20 s away
				t.Fatal("the grant's message did not reach the waiter")
			}
			if l == nil {
				t.FailNow()
			}
			if n := waiter.rt.N.Load() - before; n != 1 {
				t.Fatalf("the granted waiter made %d round trips after the release, want 1 (the poll that confirms the grant)", n)
			}
			if fenced && l.Fence() <= lease.Fence() {
				t.Fatalf("the granted fence %d is not above the previous holder's %d", l.Fence(), lease.Fence())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFairUncontendedIsTwoRoundTrips(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil, core.WithFair())
	ctx := context.Background()
	for i := range 11 {
		if i == 1 {
			e.rt.N.Store(0) // the first cycle loads the scripts
		}
		lease, err := e.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.rt.N.Load(); n != 20 {
		t.Fatalf("10 uncontended fair acquire+release cycles made %d round trips, want 20", n)
	}
}

// TestFairGiveUpLeavesTheQueue: a waiter whose budget runs out leaves the
// queue, and the lock goes to the waiter behind it.
func TestFairGiveUpLeavesTheQueue(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	quitter := newEnv(t, nil, core.WithFair(), core.WithWait(200*time.Millisecond))
	if _, err := quitter.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	key, _ := holder.locker.Key(name)
	if n := holder.client.ZCard(ctx, key+":queue").Val(); n != 0 {
		t.Fatalf("%d entries left in the queue after the waiter gave up", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoQueue(t, holder, name)
}

// TestFairGrantToDeadWaiterIsFreedByPatience: a waiter that queued and then
// stopped polling (its process died) is skipped after its patience; a lock
// granted to it is freed after its patience, not its TTL.
func TestFairGrantToDeadWaiterIsFreedByPatience(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	patience := 300 * time.Millisecond
	holder := newEnv(t, nil, core.WithFair(), core.WithTTL(time.Minute))
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The dead waiter: queued by hand, as its Locker would, then silent.
	key, _ := holder.locker.Key(name)
	store := core.NewRedisStore(holder.client).(core.Queuer)
	if g, err := store.Enqueue(ctx, key, "dead-waiter", time.Minute, patience, false); err != nil || g.OK {
		t.Fatalf("Enqueue = %+v, %v", g, err)
	}
	if err := lease.Release(ctx); err != nil { // grants it to the dead waiter
		t.Fatal(err)
	}
	if v := holder.client.Get(ctx, key).Val(); v != "dead-waiter" {
		t.Fatalf("the lock holds %q after the release, want the dead waiter's grant", v)
	}
	if d := holder.client.PTTL(ctx, key).Val(); d > patience {
		t.Fatalf("the grant to the waiter lasts %v, want at most its patience %v", d, patience)
	}
	live := newEnv(t, nil, core.WithFair(), core.WithFairPatience(patience), core.WithWait(5*time.Second))
	l, err := live.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("the live waiter behind a dead grant: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoQueue(t, holder, name)
}

// TestFairGrantIsExtendedToTheTTL: a lock granted for the waiter's patience
// is extended to the lease's TTL while the request holds it.
func TestFairGrantIsExtendedToTheTTL(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	// The grant lasts the patience, and is extended at a third of it: the
	// other two thirds (2 s) absorb a loaded machine's stalls.
	patience := 3 * time.Second
	holder := newEnv(t, nil, core.WithFair())
	waiter := newEnv(t, nil, core.WithFair(), core.WithFairPatience(patience), core.WithTTL(10*time.Second))
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
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if !waitRenewed(t, l) {
		t.Fatal("the granted lease was lost before it was extended")
	}
	key, _ := holder.locker.Key(name)
	if d := holder.client.PTTL(ctx, key).Val(); d < 5*time.Second || l.Lost() {
		t.Fatalf("after its extension the granted lock has PTTL %v (lost %v), want it extended to about 10s", d, l.Lost())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFairNeedsAQueue(t *testing.T) {
	nodes := redistest.StartNodes(t, 3)
	l := core.NewRedlock(nodes.Clients(t), core.WithFair())
	if err := l.Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Redlock with WithFair: Err() = %v, want ErrInvalidOption", err)
	}
	if err := core.New(shared.Client(t), core.WithFairPatience(time.Millisecond)).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("patience 1ms: Err() = %v, want ErrInvalidOption", err)
	}
}

// fairContend runs Lockers built WithFair (and whatever else) against each
// other on name, checking mutual exclusion by overlap detection and, with
// WithFencing, strictly increasing fences; then that the queue's keys are
// gone (client reads the deployment).
func fairContend(t *testing.T, ls []*core.Locker, name string, client redis.Cmdable) {
	t.Helper()
	const goroutines, rounds = 3, 5
	var o redistest.Overlap
	var mu sync.Mutex
	var last int64
	contend(t, ls, goroutines, rounds, name, func(lease *core.Lease) {
		exit := o.Enter()
		mu.Lock()
		if lease.Fence() != 0 && lease.Fence() <= last {
			t.Errorf("fence %d after %d", lease.Fence(), last)
		}
		last = lease.Fence()
		mu.Unlock()
		time.Sleep(time.Millisecond)
		exit()
		if err := lease.Release(context.Background()); err != nil {
			t.Errorf("release: %v", err)
		}
	})
	if want := int64(len(ls) * goroutines * rounds); o.Overlaps() != 0 || o.Entries() != want {
		t.Fatalf("%d overlaps in %d of %d sections", o.Overlaps(), o.Entries(), want)
	}
	key, _ := ls[0].Key(name)
	if n := client.Exists(context.Background(), key+":queue", key+":waiters").Val(); n != 0 {
		t.Fatalf("%d queue keys left when nobody waits", n)
	}
}

// TestFairWithEverything: fair Lockers with the watchdog, fencing,
// wake-ups, a short TTL and the hotspot Guard with hand-offs, against
// plain fair Lockers.
func TestFairWithEverything(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	// A short TTL renewed often: each renewal has over a second to succeed
	// before the watchdog gives up, which a loaded machine's stalls stay
	// within.
	opts := []core.Option{core.WithFair(), core.WithWatchdog(), core.WithFencing(), core.WithNotify(),
		core.WithTTL(1500 * time.Millisecond), core.WithWatchdogInterval(100 * time.Millisecond), core.WithWait(20 * time.Second)}
	var ls []*core.Locker
	var client redis.Cmdable
	for i := range 3 {
		o := opts
		if i > 0 {
			o = append(o, core.WithLocalQueue(hotspot.New(hotspot.WithHandoff(3))))
		}
		e := newEnv(t, nil, o...)
		t.Cleanup(func() { _ = e.locker.Close() })
		ls, client = append(ls, e.locker), e.client
	}
	fairContend(t, ls, name, client)
}

// patientQueue is a LocalQueue around a hotspot Guard whose turns, while
// wait is set, offer a releasing holder's lease until a local waiter takes
// it (for a minute at most): a test knows that a waiter is on its way to
// the local queue, not when it is parked there.
type patientQueue struct {
	core.LocalQueue
	wait atomic.Bool
}

type patientTurn struct {
	core.LocalTurn
	q *patientQueue
}

func (q *patientQueue) Enter(ctx context.Context, name, key string, deadline time.Time) (core.LocalTurn, error) {
	turn, err := q.LocalQueue.Enter(ctx, name, key, deadline)
	if turn == nil || err != nil {
		return turn, err
	}
	return &patientTurn{turn, q}, nil
}

func (t *patientTurn) Pass(lease *core.Lease) bool {
	deadline := time.Now().Add(time.Minute)
	for !t.LocalTurn.Pass(lease) {
		if !t.q.wait.Load() || time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// TestFairGrantHandedOverLocallyCostsNoRoundTrip: a lock the fair queue
// granted for the waiter's patience is passed to the next local waiter
// (hotspot Guard) as it is, without a synchronous extend, and is extended
// to the TTL in the background.
//
// The hand-off's round trips are those of the release and of the second
// acquire, counted on their contexts: the first lease's watchdog may extend
// the grant in the background meanwhile. A patience of 15 s leaves the
// hand-off over 4.8 s after the grant: the lock lasts the patience from
// the poll before the grant (at most a third of the patience earlier), and
// is handed off as it is while a third of it is left.
func TestFairGrantHandedOverLocallyCostsNoRoundTrip(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	const patience, ttl = 15 * time.Second, time.Minute
	holder := newEnv(t, nil, core.WithFair())
	q := &patientQueue{LocalQueue: hotspot.New(hotspot.WithHandoff(3), hotspot.WithKeys(name))}
	waiters := newEnv(t, nil, core.WithFair(), core.WithFairPatience(patience), core.WithTTL(ttl), core.WithWait(time.Minute),
		core.WithLocalQueue(q))
	var handover ctxRoundTrips
	waiters.client.AddHook(&handover)
	t.Cleanup(func() { _ = waiters.locker.Close() })
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan *core.Lease, 1)
	go func() {
		l, err := waiters.locker.Acquire(ctx, name)
		if err != nil {
			t.Error(err)
		}
		first <- l
	}()
	waitQueued(t, holder, name, 1)
	second := make(chan *core.Lease, 1)
	go func() {
		l, err := waiters.locker.Acquire(handover.mark(ctx), name) // waits in the local queue
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l1 := <-first
	if l1 == nil {
		t.FailNow()
	}
	// The release hands the lock over locally, once the second waiter is
	// parked in the local queue to take it.
	q.wait.Store(true)
	if err := l1.Release(handover.mark(ctx)); err != nil {
		t.Fatal(err)
	}
	q.wait.Store(false)
	l2 := <-second
	if l2 == nil {
		t.FailNow()
	}
	if n := handover.n.Load(); n != 0 {
		t.Fatalf("the local hand-over of a granted lock made %d round trips, want 0", n)
	}
	// The watchdog extends the grant to the TTL a third of the patience
	// after the command that set it (or had before the hand-off).
	key, _ := holder.locker.Key(name)
	for deadline := time.Now().Add(30 * time.Second); holder.client.PTTL(ctx, key).Val() <= patience; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || l2.Lost() {
			t.Fatalf("the handed-over lock has PTTL %v (lost %v), want it extended to about %v", holder.client.PTTL(ctx, key).Val(), l2.Lost(), ttl)
		}
	}
	if l2.Lost() {
		t.Fatal("the handed-over lease is lost")
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoQueue(t, holder, name)
}

// pollCounter is a Queuer that counts the calls of a Locker's waiters, and
// fails every Poll with failPoll when it is set.
type pollCounter struct {
	core.Queuer
	failPoll error

	mu       sync.Mutex
	enqueues int
	dequeues int
	polls    []int // the number of waiters of each Poll
}

func (q *pollCounter) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	q.mu.Lock()
	q.enqueues++
	q.mu.Unlock()
	return q.Queuer.Enqueue(ctx, key, token, ttl, patience, fenced)
}

func (q *pollCounter) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	q.mu.Lock()
	q.polls = append(q.polls, len(waiters))
	q.mu.Unlock()
	if q.failPoll != nil {
		return -1, core.Grant{}, q.failPoll
	}
	return q.Queuer.Poll(ctx, key, waiters, patience, fenced)
}

func (q *pollCounter) Dequeue(ctx context.Context, key, token string) error {
	q.mu.Lock()
	q.dequeues++
	q.mu.Unlock()
	return q.Queuer.Dequeue(ctx, key, token)
}

// counts returns the Enqueues, the Polls with their waiters, and the
// Dequeues so far.
func (q *pollCounter) counts() (enqueues int, polls []int, dequeues int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.enqueues, append([]int(nil), q.polls...), q.dequeues
}

// TestFairPollsOncePerNameForAllWaiters: a Locker's waiters of one name
// queue with one Enqueue each and are then kept in line by one Poll for
// all of them per third of the patience, not one per waiter, well past
// their patience; then each gets the lock in turn.
func TestFairPollsOncePerNameForAllWaiters(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	lease, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// Polls every 500 ms keep a place that dies 1.5 s after its last poll:
	// a second of slack for a loaded machine's stalls.
	const patience = 1500 * time.Millisecond
	store := core.NewRedisStore(holder.client)
	t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
	q := &pollCounter{Queuer: store.(core.Queuer)}
	l := core.NewWithStore(q, core.WithFairPatience(patience), core.WithWait(20*time.Second))
	t.Cleanup(func() { _ = l.Close() })

	const waiters = 6
	var wg sync.WaitGroup
	var o redistest.Overlap
	errs := make(chan error, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, name)
			if err != nil {
				errs <- err
				return
			}
			exit := o.Enter()
			time.Sleep(time.Millisecond)
			exit()
			errs <- lease.Release(ctx)
		}()
	}
	waitQueued(t, holder, name, waiters)
	// A waiter joins its Locker's line only after its Enqueue returns, so a
	// Poll may start after the store has queued all six and before the
	// last of them joined (a goroutine held up between the two): count from
	// the first Poll that included them all. Once in line, a waiter stays
	// there until it is granted the lock (its wait budget is 20 s).
	var before []int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, polls, _ := q.counts()
		if n := len(polls); n > 0 && polls[n-1] == waiters {
			before = polls
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Poll of all %d waiters within 20 s: %v", waiters, polls)
		}
	}
	start := time.Now()
	time.Sleep(4 * patience)
	elapsed := time.Since(start)
	enqueues, polls, _ := q.counts()
	polls = polls[len(before):]
	key, _ := holder.locker.Key(name)
	if n := holder.client.ZCard(ctx, key+":queue").Val(); n != waiters {
		t.Fatalf("%d waiters in line after %v, 4 patiences: want all %d kept alive by the Locker's polls", n, elapsed, waiters)
	}
	if enqueues != waiters {
		t.Errorf("%d Enqueues for %d waiters, want one each", enqueues, waiters)
	}
	// One Poll per third of the patience at most (a timer), and one more
	// for the subscription's confirmation; a Poll per waiter would be six
	// times as many.
	if limit := int(elapsed/(patience/3)) + 2; len(polls) == 0 || len(polls) > limit {
		t.Errorf("%d Polls in %v with a patience of %v: want 1 to %d", len(polls), elapsed, patience, limit)
	}
	for _, n := range polls {
		if n != waiters {
			t.Errorf("a Poll for %d waiters, want all %d in each: %v", n, waiters, polls)
			break
		}
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if o.Overlaps() > 0 {
		t.Errorf("%d overlaps", o.Overlaps())
	}
	assertNoQueue(t, holder, name)
}

// TestFairPollErrorEndsTheWaiters: a Poll that fails ends every waiter it
// was for with a storage error that wraps the cause, and each leaves the
// line (a Dequeue), since the Poll may have granted it the lock.
func TestFairPollErrorEndsTheWaiters(t *testing.T) {
	name := uniq(t)
	ctx := context.Background()
	holder := newEnv(t, nil, core.WithFair())
	hold(t, holder, name)
	boom := errors.New("boom")
	store := core.NewRedisStore(holder.client)
	t.Cleanup(func() { _ = store.(io.Closer).Close() }) // after the Locker's
	q := &pollCounter{Queuer: store.(core.Queuer), failPoll: boom}
	l := core.NewWithStore(q, core.WithFairPatience(90*time.Millisecond), core.WithWait(20*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	const waiters = 3
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := l.Acquire(ctx, name)
			errs <- err
		}()
	}
	for range waiters {
		if err := <-errs; !errors.Is(err, core.ErrStorage) || !errors.Is(err, boom) {
			t.Errorf("Acquire = %v, want ErrStorage wrapping the Poll's error", err)
		}
	}
	if _, _, dequeues := q.counts(); dequeues != waiters {
		t.Errorf("%d Dequeues for %d waiters that ended on a Poll's error", dequeues, waiters)
	}
}
