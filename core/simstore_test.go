package core_test

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/pubsub"
)

// This file is the simulated store of the deterministic simulation
// (sim_test.go): one in-memory store shared by every simulated process, on
// the clock of the synctest bubble, behind a simulated network.
//
// The store (simStore) is the truth the checker compares leases with: for
// each key, the token that holds it and until when, its fence counter, its
// fair queue, and its shares. Its commands follow the contract of
// core.Store, core.Queuer (grants published to Grants subscribers),
// core.Notifier, core.FenceRaiser, core.Undoer, core.FreeAcquirer,
// core.Sharer, core.ShareUndoer and core.MultiAcquirer (simshare_test.go;
// see package lockstore), and the reference model of the Redis scripts
// (internal/redisscript/model_test.go); TestSimStoreConformance runs
// core/storetest against it. Its clock may run up to 0.9% fast (drift): it
// keeps a key for a little less than the TTL asked, in the bubble's time.
//
// Each process sees the store through a view (simView), its own client: a
// command goes out at the call, reaches the store after a request delay,
// runs there, and its reply comes back after a reply delay, unless it is
// lost. The caller gives up at its context's deadline, and the command runs
// all the same. Faults (simPlan, simFate): slow requests and replies, lost
// replies, refused commands, a frozen store (what arrives meanwhile runs
// when it resumes, in an order of its own), a process cut off (its requests
// and deliveries wait for the end) or killed; pub/sub messages lost,
// duplicated, delayed, stalled or lost while a subscription is down, and
// spurious poll requests.
//
// One goroutine, the scheduler (simStore.loop), runs every command and
// delivers every reply and pub/sub message at its instant, in the order of
// their instants: the store's state changes on that goroutine only. After
// each event it waits until every other goroutine of the bubble is blocked
// (synctest.Wait), so that the engine has reacted, and runs the checker.
//
// Determinism: every delay and fault of a command is drawn from a seeded
// PCG stream that belongs to the caller (a simulated request carries its
// worker's stream in its context; the engine's own goroutines, which call
// with context.Background, get a stream per process, operation and key;
// a background clean-up has a stream of its own), and every message fault
// from the scheduler's stream. Delays are drawn in nanoseconds, so that two
// events practically never share an instant, and a message to several
// listeners reaches each at an instant of its own. A seed so replays the
// same history, up to the engine's own races: where one event wakes
// several goroutines of the engine at one instant (a failed poll answers
// every waiter of its line while the poller polls again at once) or a
// select finds two channels ready, the Go runtime chooses, and the history
// may part from there. About three seeds in four replay bit for bit (the
// digest of the store's history, logged with -v, is the same); a failing
// seed usually fails again.

// errSimRefused is the error of a command the simulated network refused at
// once: it never reached the store.
var errSimRefused = errors.New("simstore: connection refused")

// simWindow is a span of virtual time [from, to).
type simWindow struct{ from, to time.Time }

func (w simWindow) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// inWindow returns the window of ws that contains t.
func inWindow(ws []simWindow, t time.Time) (simWindow, bool) {
	for _, w := range ws {
		if w.has(t) {
			return w, true
		}
	}
	return simWindow{}, false
}

// simRates are the probabilities of each fault per command or message.
type simRates struct {
	slow    float64 // a request, or a reply, is delayed by up to 3 I/O timeouts (see fate)
	drop    float64 // the reply is lost (the command still runs)
	refuse  float64 // the command is refused at once (it never runs)
	msgDrop float64 // a pub/sub message is lost
	msgDup  float64 // a pub/sub message comes twice
	msgSlow float64 // a pub/sub message is delayed by up to simSlowMessage
	pollReq float64 // a grant message comes with poll requests to the key's other waiters (a resubscription)
}

// simSlowMessage bounds the extra delay of a slow pub/sub message.
const simSlowMessage = 1500 * time.Millisecond

// simPlan is a seed's schedule of faults, drawn before the run. From
// quietFrom on there are none: small delays only.
type simPlan struct {
	quietFrom time.Time
	calm      simRates // outside storms
	storm     simRates // inside storms
	storms    []simWindow
	freezes   []simWindow // the store runs nothing; what arrives waits for the end
}

// ratesAt returns the fault rates at now, nil when there are none.
func (p *simPlan) ratesAt(now time.Time) *simRates {
	if !now.Before(p.quietFrom) {
		return nil
	}
	if _, ok := inWindow(p.storms, now); ok {
		return &p.storm
	}
	return &p.calm
}

// simNetDelay draws the delay of one trip over the network: 20 µs plus an
// exponential tail of mean 300 µs, at most 3 ms.
func simNetDelay(r *rand.Rand) time.Duration {
	return 20*time.Microsecond + min(time.Duration(r.ExpFloat64()*300e3), 3*time.Millisecond)
}

// simFate is what the network does to one command.
type simFate struct {
	req, reply time.Duration
	drop       bool
	refuse     bool
}

// simStream is a PCG stream owned by one caller.
type simStream struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newSimStream(seed uint64, name string) *simStream {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &simStream{r: rand.New(rand.NewPCG(seed, h.Sum64()))}
}

// fate draws the fate of a command sent at now by a process whose I/O
// timeout is io.
func (st *simStream) fate(p *simPlan, now time.Time, io time.Duration, stats *simStats) simFate {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.r
	f := simFate{req: simNetDelay(r), reply: simNetDelay(r)}
	rt := p.ratesAt(now)
	if rt == nil {
		return f
	}
	// A slow trip takes from 200 µs to 3 I/O timeouts, log-uniform: as
	// often a little late (the caller still takes the reply) as too late.
	if r.Float64() < rt.slow {
		f.req += simLogUniform(r, 200*time.Microsecond, 3*io)
		stats.slow.Add(1)
	}
	if r.Float64() < rt.slow {
		f.reply += simLogUniform(r, 200*time.Microsecond, 3*io)
		stats.slow.Add(1)
	}
	if r.Float64() < rt.drop {
		f.drop = true
		stats.dropped.Add(1)
	}
	if r.Float64() < rt.refuse {
		f.refuse = true
		stats.refused.Add(1)
	}
	return f
}

// child returns a new stream seeded from st.
func (st *simStream) child() *simStream {
	st.mu.Lock()
	defer st.mu.Unlock()
	return &simStream{r: rand.New(rand.NewPCG(st.r.Uint64(), st.r.Uint64()))}
}

// simStreamKey is the context key of a caller's stream.
type simStreamKey struct{}

// withSimStream returns ctx carrying st: the store draws the fates of the
// commands made with it from st.
func withSimStream(ctx context.Context, st *simStream) context.Context {
	return context.WithValue(ctx, simStreamKey{}, st)
}

// simStats counts what the simulation did.
type simStats struct {
	ops                  [simOpKinds]atomic.Int64 // commands sent, by kind
	slow, dropped        atomic.Int64
	refused              atomic.Int64
	msgDropped, msgDuped atomic.Int64
	msgSlow, pollReqs    atomic.Int64
	frozen, paused       atomic.Int64 // commands held by a freeze; deliveries held by a pause
	zeroTTL              atomic.Int64 // answers that a waiter holds the key with less than 1 ms left
}

// Kinds of command.
const (
	simOpTryAcquire = iota
	simOpEnqueue
	simOpPoll
	simOpRelease
	simOpDequeue
	simOpExtend
	simOpRaiseFence
	simOpUndo
	simOpTryAcquireWaiting
	simOpTryAcquireShare
	simOpReleaseShare
	simOpExtendShare
	simOpTryAcquireAll
	simOpTryAcquireHeld
	simOpKinds
)

var simOpNames = [simOpKinds]string{"TryAcquire", "Enqueue", "Poll", "Release", "Dequeue", "Extend", "RaiseFence", "Undo",
	"TryAcquireWaiting", "TryAcquireShare", "ReleaseShare", "ExtendShare", "TryAcquireAll", "TryAcquireHeld"}

// lockOps returns the lock operations sent: acquire attempts (TryAcquire,
// TryAcquireHeld, Enqueue, Poll and those of shares), releases (Release, Dequeue,
// ReleaseShare) and extends.
func (s *simStats) lockOps() int64 {
	var n int64
	for _, op := range []int{simOpTryAcquire, simOpEnqueue, simOpPoll, simOpRelease, simOpDequeue, simOpExtend,
		simOpTryAcquireWaiting, simOpTryAcquireShare, simOpReleaseShare, simOpExtendShare, simOpTryAcquireAll, simOpTryAcquireHeld} {
		n += s.ops[op].Load()
	}
	return n
}

// simKey is the store's state of one key.
type simKey struct {
	holder  string           // "" when free (of an exclusive holder)
	expiry  time.Time        // while held
	fence   int64            // the fence counter (0 before the first draw)
	drawn   map[string]int64 // token → the last fence drawn for it
	queue   []simEntry       // the fair queue, in arrival order
	qExpiry time.Time        // the queue's keys expire then (2 patiences after the last touch)

	// The shares (lockstore.Sharer): while one is live, the key is held
	// for every exclusive command, as the main key holding a marker is in
	// the stores' design; they live in a record of their own, by token.
	shares map[string]*simShare
	shareN int       // the Hold.N of the live shares: 0 shared, n permits
	waiter time.Time // the exclusive waiter's record (TryAcquireWaiting) lasts until then; zero: none
}

// simShare is one live share of a key.
type simShare struct {
	expiry time.Time
	slot   int
}

// shared reports whether shares of k are live; settle has run.
func (k *simKey) shared() bool { return len(k.shares) > 0 }

// free reports whether nobody holds k, exclusively or by a share; settle
// has run.
func (k *simKey) free() bool { return k.holder == "" && !k.shared() }

// simEntry is a waiter's place in a queue.
type simEntry struct {
	token         string
	deadline      time.Time // dead from then on
	ttl, patience time.Duration
	fenced        bool
}

func (k *simKey) index(token string) int {
	return slices.IndexFunc(k.queue, func(e simEntry) bool { return e.token == token })
}

func (k *simKey) remove(token string) {
	if i := k.index(token); i >= 0 {
		k.queue = slices.Delete(k.queue, i, i+1)
	}
}

// simMsg is a pub/sub message: a release notice, or a grant for token.
type simMsg struct {
	notice bool
	token  string
	grant  core.Grant
}

// simEvent is something the scheduler does at an instant.
type simEvent struct {
	at  time.Time
	seq uint64
	run func(now time.Time)
}

type simEventQueue []*simEvent

func (q simEventQueue) Len() int { return len(q) }
func (q simEventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simEventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simEventQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simEventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// simStore is the simulated store and its network.
type simStore struct {
	seed   uint64
	drift  float64 // the store's clock runs this much faster than the processes' (a fraction)
	plan   *simPlan
	bubble bool // in a synctest bubble: wait for quiescence after each event
	trace  *simTrace
	stats  *simStats
	after  func()        // the checker, run after each event
	beat   *atomic.Int64 // counts events, for a watch from outside the bubble
	mutant simMutant     // a defect put in on purpose (simshare_test.go); "" for none
	// slots, when above 0, makes TryAcquireAll take keys of one slot only
	// (slot: a hash of the key modulo slots), as on a Redis Cluster;
	// ErrNotAtomic otherwise.
	slots int
	// told reports an answer that contradicts the store's state (the
	// checker's fail); nil: such answers are not checked.
	told func(format string, args ...any)

	mu   sync.Mutex
	rng  *rand.Rand // the scheduler's draws (message fates, resume order)
	keys map[string]*simKey
	born map[string]uint64 // token → when the store first queued it, in order
	// For each token, the commands naming it that the store has not run
	// yet (pending), and the calls naming it that have not returned yet
	// (outstanding): while there are none, nothing but its expiry can
	// change what the store holds for it, or what its lease believes.
	pending, outstanding map[string]int
	nborn                uint64
	views                []*simView
	q                    simEventQueue
	seq                  uint64

	wake   chan struct{}
	quit   chan struct{}
	exited chan struct{}
}

func newSimStore(seed uint64, plan *simPlan, tr *simTrace, bubble bool) *simStore {
	return &simStore{
		seed:   seed,
		plan:   plan,
		bubble: bubble,
		trace:  tr,
		stats:  &simStats{},
		rng:    rand.New(rand.NewPCG(seed, 0x5c4ed)),
		keys:   make(map[string]*simKey),
		born:   make(map[string]uint64),

		pending:     make(map[string]int),
		outstanding: make(map[string]int),
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		exited:      make(chan struct{}),
	}
}

// start runs the scheduler; stop ends it (events still pending are
// dropped: their callers time out).
func (s *simStore) start() { go s.loop() }

func (s *simStore) stop() {
	close(s.quit)
	<-s.exited
}

// push schedules run at at.
func (s *simStore) push(at time.Time, run func(now time.Time)) {
	s.mu.Lock()
	s.pushLocked(at, run)
	s.mu.Unlock()
}

func (s *simStore) pushLocked(at time.Time, run func(now time.Time)) {
	s.seq++
	heap.Push(&s.q, &simEvent{at: at, seq: s.seq, run: run})
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop is the scheduler: it runs each event at its instant, then lets the
// bubble settle and runs the checker.
func (s *simStore) loop() {
	defer close(s.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var next *simEvent
		if len(s.q) > 0 {
			next = s.q[0]
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-s.wake:
				continue
			case <-s.quit:
				return
			}
		}
		if d := time.Until(next.at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.wake:
				timer.Stop()
				continue // an earlier event may have come
			case <-s.quit:
				return
			}
		}
		s.mu.Lock()
		e := heap.Pop(&s.q).(*simEvent)
		s.mu.Unlock()
		e.run(time.Now())
		if s.bubble {
			synctest.Wait()
		}
		if s.after != nil {
			s.after()
		}
		if s.beat != nil {
			s.beat.Add(1)
		}
	}
}

// keyOf returns the state of key, made on first use; s.mu is held.
func (s *simStore) keyOf(key string) *simKey {
	k := s.keys[key]
	if k == nil {
		k = &simKey{}
		s.keys[key] = k
	}
	return k
}

// hold sets k to token until expiry, and schedules an event at expiry, so
// that the checker runs at the instant the key is freed; s.mu is held.
func (s *simStore) hold(k *simKey, token string, expiry time.Time) {
	k.holder, k.expiry = token, expiry
	s.pushLocked(expiry, func(time.Time) {})
}

// truth returns who holds key at now, and until when ("" if nobody).
func (s *simStore) truth(key string, now time.Time) (holder string, expiry time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil || k.holder == "" || !now.Before(k.expiry) {
		return "", time.Time{}
	}
	return k.holder, k.expiry
}

// busy adds n to the count of each token in m.
func (s *simStore) busy(m map[string]int, tokens []string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		if m[t] += n; m[t] == 0 {
			delete(m, t)
		}
	}
}

// settled reports whether no command or call naming token is in flight.
func (s *simStore) settled(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[token] == 0 && s.outstanding[token] == 0
}

// fenceOf returns the last fence the store drew for token on key.
func (s *simStore) fenceOf(key, token string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return k.drawn[token]
	}
	return 0
}

// The store's commands. Each runs on the scheduler with s.mu held, at now,
// and returns its reply and a note for the trace.

// simReply is a command's answer.
type simReply struct {
	ok     bool
	fence  int64
	index  int
	grant  core.Grant
	slot   int     // TryAcquireShare: the permit's slot
	shared bool    // TryAcquireHeld: shares hold the key
	fences []int64 // TryAcquireAll: a fence per key
	err    error   // an error the store answers (ErrModeMismatch)
	note   string
}

// settle applies the expiries of the lock and of its queue at now.
func (s *simStore) settle(k *simKey, now time.Time) {
	if k.holder != "" && !now.Before(k.expiry) {
		k.holder = ""
	}
	if len(k.queue) > 0 && !now.Before(k.qExpiry) {
		k.queue = nil
	}
	for tok, sh := range k.shares {
		if !now.Before(sh.expiry) {
			delete(k.shares, tok)
		}
	}
	if !k.waiter.IsZero() && !now.Before(k.waiter) {
		k.waiter = time.Time{}
	}
}

// draw draws the next fence of k for token.
func (s *simStore) draw(k *simKey, token string) int64 {
	k.fence++
	if k.drawn == nil {
		k.drawn = make(map[string]int64)
	}
	k.drawn[token] = k.fence
	return k.fence
}

// current returns the fence an answer to k's holder carries: the counter,
// drawn first if nothing was drawn yet.
func (s *simStore) current(k *simKey, token string) int64 {
	if k.fence == 0 {
		return s.draw(k, token)
	}
	return k.fence
}

// head drops the dead entries at the head of k's queue and returns the
// first live one.
func (s *simStore) head(k *simKey, now time.Time) (simEntry, bool) {
	for len(k.queue) > 0 {
		if e := k.queue[0]; e.deadline.After(now) {
			return e, true
		}
		k.queue = k.queue[1:]
	}
	return simEntry{}, false
}

// grant gives the free key to e for the smaller of its TTL and patience,
// and tells it.
func (s *simStore) grant(key string, k *simKey, e simEntry, now time.Time) string {
	ttl := min(e.ttl, e.patience)
	s.hold(k, e.token, now.Add(s.span(ttl)))
	var fence int64
	if e.fenced {
		fence = s.draw(k, e.token)
	}
	k.remove(e.token)
	s.publishLocked(key, simMsg{token: e.token, grant: core.Grant{OK: true, Fence: fence, TTL: ttl}})
	return fmt.Sprintf("granted to %s (fence %d, %v)", s.trace.tok(e.token), fence, ttl)
}

// touch renews the expiry of k's queue keys.
func (s *simStore) touch(k *simKey, now time.Time, patience time.Duration, wasEmpty bool) {
	keep := now.Add(s.span(2 * patience))
	if wasEmpty || keep.After(k.qExpiry) {
		k.qExpiry = keep
	}
}

// pttl is what is left of k's lock at now, on the store's clock, in whole
// milliseconds (Redis's PTTL): 0 when less than a millisecond is left.
func (s *simStore) pttl(k *simKey, now time.Time) time.Duration {
	left := time.Duration(float64(k.expiry.Sub(now)) / (1 - s.drift))
	if left < time.Millisecond {
		s.stats.zeroTTL.Add(1)
	}
	return max(left.Truncate(time.Millisecond), 0)
}

// span is how long, on the bubble's clock, the store keeps something it is
// asked to keep for d: its clock runs drift faster.
func (s *simStore) span(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - s.drift))
}

func (s *simStore) tryAcquire(key, token string, ttl time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	switch {
	case k.holder == token: // a re-sent attempt: reset the TTL
		s.hold(k, token, now.Add(s.span(ttl)))
		var fence int64
		if fenced {
			fence = s.current(k, token)
		}
		return simReply{ok: true, fence: fence, note: fmt.Sprintf("ours already: reset (fence %d)", fence)}
	case k.holder == "" && k.shared() && s.mutant != simMutExclusiveIgnoresShares:
		return simReply{note: fmt.Sprintf("%d shares hold it", len(k.shares))}
	case k.holder == "":
		s.hold(k, token, now.Add(s.span(ttl)))
		var fence int64
		if fenced {
			fence = s.draw(k, token)
		}
		return simReply{ok: true, fence: fence, note: fmt.Sprintf("taken (fence %d)", fence)}
	}
	return simReply{note: "held by " + s.trace.tok(k.holder)}
}

func (s *simStore) release(v *simView, key, token string, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.holder != token {
		k.remove(token) // a waiter that has gone loses its place
		return simReply{note: "not ours"}
	}
	k.holder = ""
	if e, ok := s.head(k, now); ok {
		return simReply{ok: true, note: "released, " + s.grant(key, k, e, now)}
	}
	if v.announce.Load() {
		s.publishLocked(key, simMsg{notice: true})
		return simReply{ok: true, note: "released, announced"}
	}
	return simReply{ok: true, note: "released"}
}

func (s *simStore) extend(key, token string, ttl time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.holder != token {
		return simReply{note: "not ours"}
	}
	s.hold(k, token, now.Add(s.span(ttl)))
	var fence int64
	if fenced {
		fence = s.draw(k, token)
	}
	return simReply{ok: true, fence: fence, note: fmt.Sprintf("extended (fence %d)", fence)}
}

func (s *simStore) raiseFence(key, token string, fence int64, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	if k.holder != token {
		return simReply{note: "not ours"}
	}
	if fence > k.fence {
		k.fence = fence
		if k.drawn == nil {
			k.drawn = make(map[string]int64)
		}
		k.drawn[token] = fence
	}
	return simReply{ok: true, note: fmt.Sprintf("fence at least %d", fence)}
}

func (s *simStore) bornOf(token string) uint64 {
	b, ok := s.born[token]
	if !ok {
		s.nborn++
		b = s.nborn
		s.born[token] = b
	}
	return b
}

func (s *simStore) enqueue(key, token string, ttl, patience time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	s.bornOf(token)
	if k.holder == token {
		k.remove(token)
		var fence int64
		if fenced {
			fence = s.current(k, token)
		}
		g := core.Grant{OK: true, Fence: fence, TTL: s.pttl(k, now)}
		return simReply{ok: true, grant: g, note: fmt.Sprintf("holds it (fence %d, %v left)", g.Fence, g.TTL)}
	}
	note := ""
	if k.free() {
		first, ok := s.head(k, now)
		if !ok || first.token == token {
			s.hold(k, token, now.Add(s.span(ttl)))
			k.remove(token)
			var fence int64
			if fenced {
				fence = s.draw(k, token)
			}
			return simReply{ok: true, grant: core.Grant{OK: true, Fence: fence, TTL: ttl}, note: fmt.Sprintf("taken (fence %d)", fence)}
		}
		note = s.grant(key, k, first, now) + ", "
	}
	s.touch(k, now, patience, len(k.queue) == 0)
	e := simEntry{token: token, deadline: now.Add(s.span(patience)), ttl: ttl, patience: patience, fenced: fenced}
	if i := k.index(token); i >= 0 {
		k.queue[i] = e
	} else {
		k.queue = append(k.queue, e)
	}
	return simReply{note: fmt.Sprintf("%sin line (%d)", note, k.index(token)+1)}
}

func (s *simStore) poll(key string, waiters []core.Waiter, patience time.Duration, fenced bool, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	holder := k.holder
	wasEmpty := len(k.queue) == 0
	// Waiters that lost their places go to the tail in the order the store
	// first queued them: the Locker lists them in map order.
	order := make([]int, len(waiters))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return s.bornOf(waiters[order[a]].Token) < s.bornOf(waiters[order[b]].Token) })
	for _, j := range order {
		w := waiters[j]
		if w.Token == holder {
			continue
		}
		e := simEntry{token: w.Token, deadline: now.Add(s.span(patience)), ttl: w.TTL, patience: patience, fenced: fenced}
		if i := k.index(w.Token); i >= 0 {
			k.queue[i] = e
		} else {
			k.queue = append(k.queue, e)
		}
	}
	note := ""
	if k.free() {
		if first, ok := s.head(k, now); ok {
			note = s.grant(key, k, first, now) + ", "
			holder = first.token
		}
	}
	if len(k.queue) > 0 {
		s.touch(k, now, patience, wasEmpty)
	}
	for i, w := range waiters {
		if w.Token == holder {
			k.remove(holder)
			var fence int64
			if fenced {
				fence = s.current(k, holder)
			}
			g := core.Grant{OK: true, Fence: fence, TTL: s.pttl(k, now)}
			return simReply{ok: true, index: i, grant: g, note: fmt.Sprintf("%s%s holds it (fence %d, %v left)", note, s.trace.tok(holder), fence, g.TTL)}
		}
	}
	return simReply{index: -1, note: note + "none holds it"}
}

func (s *simStore) dequeue(key, token string, now time.Time) simReply {
	k := s.keyOf(key)
	s.settle(k, now)
	k.remove(token)
	if k.holder != token {
		return simReply{note: "left the line"}
	}
	k.holder = ""
	if e, ok := s.head(k, now); ok {
		return simReply{ok: true, note: "gave the grant back, " + s.grant(key, k, e, now)}
	}
	return simReply{ok: true, note: "gave the grant back"}
}

// publishLocked sends m on key's channel. Each listener of each view
// subscribed to it gets its copy at an instant of its own (a message that
// woke several goroutines at one instant would let the Go scheduler order
// what they do next), with a fate of its own: lost, duplicated, slow. A
// grant may come with poll requests to the key's other waiters of the view
// (as after a resubscription).
func (s *simStore) publishLocked(key string, m simMsg) {
	now := time.Now()
	rt := s.plan.ratesAt(now)
	for _, v := range s.views {
		if _, ok := inWindow(v.unsubscribed, now); ok {
			s.stats.msgDropped.Add(1) // its subscription is down: what is published meanwhile is lost
			continue
		}
		targets := v.targets(key, m)
		if !m.notice && len(targets) > 0 && rt != nil && s.rng.Float64() < rt.pollReq {
			s.stats.pollReqs.Add(1)
			targets = append(targets, v.pollRequests(key, m.token)...)
		}
		for _, tg := range targets {
			copies := 1
			if rt != nil {
				switch x := s.rng.Float64(); {
				case x < rt.msgDrop:
					copies = 0
					s.stats.msgDropped.Add(1)
				case x < rt.msgDrop+rt.msgDup:
					copies = 2
					s.stats.msgDuped.Add(1)
				}
			}
			for range copies {
				d := simNetDelay(s.rng)
				if v.lag > 0 {
					d += simLogUniform(s.rng, 100*time.Microsecond, v.lag)
				}
				if rt != nil && s.rng.Float64() < rt.msgSlow {
					d += time.Duration(s.rng.Int64N(int64(simSlowMessage)))
					s.stats.msgSlow.Add(1)
				}
				s.pushLocked(now.Add(d), s.delivery(v, v.deaf, func(now time.Time) {
					s.trace.add("%s hears %s", v.name, tg.what)
					tg.deliver(now)
				}))
			}
		}
	}
}

// deliverer returns the event that delivers something to v: dropped once v
// is dead, held until the end of a pause of v.
func (s *simStore) deliverer(v *simView, deliver func(now time.Time)) func(time.Time) {
	return s.delivery(v, nil, deliver)
}

// delivery is deliverer, also held during the windows of also.
func (s *simStore) delivery(v *simView, also []simWindow, deliver func(now time.Time)) func(time.Time) {
	var ev func(now time.Time)
	ev = func(now time.Time) {
		if v.dead(now) {
			return
		}
		w, ok := inWindow(v.pauses, now)
		if !ok {
			w, ok = inWindow(also, now)
		}
		if ok {
			s.stats.paused.Add(1)
			s.mu.Lock()
			at := w.to.Add(time.Duration(s.rng.Int64N(int64(time.Millisecond))))
			s.pushLocked(at, ev)
			s.mu.Unlock()
			return
		}
		deliver(now)
	}
	return ev
}

// simView is one process's client of the store. It implements core.Store,
// core.Queuer, core.Notifier, core.FenceRaiser, core.Undoer,
// core.FreeAcquirer, core.Sharer, core.ShareUndoer and core.MultiAcquirer.
type simView struct {
	s      *simStore
	name   string        // "p0", "p1"...
	io     time.Duration // the process's I/O timeout: bounds its clean-up rounds
	pauses []simWindow   // the process is cut off: its requests and deliveries wait for the end
	deaf   []simWindow   // its pub/sub connection stalls: messages wait for the end
	// its pub/sub connection is down (it reconnects and resubscribes at the
	// end): messages published meanwhile are lost
	unsubscribed []simWindow
	lag          time.Duration // its pub/sub connection is slow: every message comes up to lag late
	killAt       time.Time     // the process dies then (zero: never)

	announce atomic.Bool
	closed   atomic.Bool // Close was called: clean-ups stop, messages are not heard

	mu        sync.Mutex
	streams   map[string]*simStream              // the engine's own goroutines' streams, by operation and key
	watchers  map[string]map[chan struct{}]int64 // by key: each watcher and its registration number
	grants    map[string]*simGrantSub            // by token
	nextID    int64
	unclaimed map[string]simHeldGrant // grants heard before their waiter listened, by token
}

type simGrantSub struct {
	key string
	c   chan core.Grant
	id  int64 // registration number
}

type simHeldGrant struct {
	g     core.Grant
	heard time.Time
}

var (
	_ core.Queuer       = (*simView)(nil)
	_ core.Notifier     = (*simView)(nil)
	_ core.FenceRaiser  = (*simView)(nil)
	_ core.Undoer       = (*simView)(nil)
	_ core.FreeAcquirer = (*simView)(nil)
)

// newView returns a new client of s for the process called name.
func (s *simStore) newView(name string, io time.Duration, pauses []simWindow, killAt time.Time) *simView {
	v := &simView{
		s:         s,
		name:      name,
		io:        io,
		pauses:    pauses,
		killAt:    killAt,
		streams:   make(map[string]*simStream),
		watchers:  make(map[string]map[chan struct{}]int64),
		grants:    make(map[string]*simGrantSub),
		unclaimed: make(map[string]simHeldGrant),
	}
	s.mu.Lock()
	s.views = append(s.views, v)
	s.mu.Unlock()
	return v
}

// dead reports whether v's process is dead at now.
func (v *simView) dead(now time.Time) bool {
	return !v.killAt.IsZero() && !now.Before(v.killAt)
}

// Close ends v's clean-ups.
func (v *simView) Close() error {
	v.closed.Store(true)
	return nil
}

// stream returns the stream that draws the fate of a command: the caller's
// (withSimStream), or the process's stream for op on key.
func (v *simView) stream(ctx context.Context, op int, key string) *simStream {
	if st, ok := ctx.Value(simStreamKey{}).(*simStream); ok {
		return st
	}
	name := simOpNames[op] + " " + key
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.streams[name]
	if st == nil {
		st = newSimStream(v.s.seed, v.name+" "+name)
		v.streams[name] = st
	}
	return st
}

// post sends a command whose fate st draws. apply runs it at the store, on
// the scheduler, with s.mu held; reply gets its answer, on the scheduler,
// unless it is lost. A dead process sends nothing; a refused command fails
// at once with errSimRefused.
func (v *simView) post(st *simStream, op int, key string, tokens []string, describe func() string, apply func(now time.Time) simReply, reply func(simReply)) error {
	s := v.s
	now := time.Now()
	sent := now
	f := st.fate(s.plan, now, v.io, s.stats)
	s.stats.ops[op].Add(1)
	switch {
	case v.dead(now):
		return nil
	case f.refuse:
		s.trace.add("%s %s %s: refused", v.name, simOpNames[op], key)
		return errSimRefused
	}
	at := now
	if w, ok := inWindow(v.pauses, now); ok {
		at = w.to
	}
	at = at.Add(f.req)
	s.busy(s.pending, tokens, +1)
	var ev func(now time.Time)
	ev = func(now time.Time) {
		if w, ok := inWindow(s.plan.freezes, now); ok {
			s.stats.frozen.Add(1)
			s.mu.Lock()
			s.pushLocked(w.to.Add(time.Duration(s.rng.Int64N(int64(time.Millisecond)))), ev) // resumed in an order of its own
			s.mu.Unlock()
			return
		}
		what := describe() // here, on the scheduler: tokens are named in the order the store sees them
		s.mu.Lock()
		r := apply(now)
		s.mu.Unlock()
		s.busy(s.pending, tokens, -1)
		late := ""
		if d := now.Sub(sent); d > v.io {
			late = fmt.Sprintf(" [late: sent %v ago]", d.Round(time.Microsecond))
		}
		s.trace.mix(strconv.FormatInt(now.UnixNano(), 10) + v.name + simOpNames[op] + key + what + r.note)
		if f.drop {
			s.trace.add("%s %s %s %s: %s%s; reply lost", v.name, simOpNames[op], key, what, r.note, late)
			return
		}
		s.trace.add("%s %s %s %s: %s%s", v.name, simOpNames[op], key, what, r.note, late)
		s.push(now.Add(f.reply), s.deliverer(v, func(time.Time) { reply(r) }))
	}
	s.push(at, ev)
	return nil
}

// call sends a command and waits for its reply until ctx ends. A context
// that has ended (or whose deadline is now) sends nothing: whether its
// timer has fired yet at this very instant must not decide what happens.
func (v *simView) call(ctx context.Context, op int, key string, tokens []string, describe func() string, apply func(now time.Time) simReply) (_ simReply, err error) {
	defer func() { noteCall(ctx, tokens, err) }()
	if err := ctx.Err(); err != nil {
		return simReply{}, simNotSent{err}
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return simReply{}, simNotSent{context.DeadlineExceeded}
	}
	c := make(chan simReply, 1)
	v.s.busy(v.s.outstanding, tokens, +1)
	defer v.s.busy(v.s.outstanding, tokens, -1)
	if err := v.post(v.stream(ctx, op, key), op, key, tokens, describe, apply, func(r simReply) { c <- r }); err != nil {
		return simReply{}, err
	}
	select {
	case r := <-c:
		return r, nil
	case <-ctx.Done():
		return simReply{}, ctx.Err()
	}
}

// simNotSent is the error of a command not sent: its context had ended.
type simNotSent struct{ err error }

func (e simNotSent) Error() string { return "simstore: not sent: " + e.err.Error() }
func (e simNotSent) Unwrap() error { return e.err }

// simMayHaveApplied reports whether a command that failed with err may
// still run: all but a refused one or one not sent.
func simMayHaveApplied(err error) bool {
	var notSent simNotSent
	return !errors.Is(err, errSimRefused) && !errors.As(err, &notSent)
}

func (v *simView) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	sent := time.Now()
	r, err := v.call(ctx, simOpTryAcquire, key, []string{token}, func() string { return fmt.Sprintf("%s ttl=%v", v.s.trace.tok(token), ttl) }, func(now time.Time) simReply {
		return v.s.tryAcquire(key, token, ttl, fenced, now)
	})
	if err != nil {
		if simMayHaveApplied(err) { // it may run late: undo it, now and in the background
			v.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, err
	}
	return r.ok, r.fence, nil
}

// TryAcquireFree is TryAcquire (core.FreeAcquirer), the Locker's first
// attempt of an Acquire with a wait budget, but for one attempt in eight
// (by its token), which takes the name and reports false: the answer of a
// re-sent transmission whose first reply was lost, which FreeAcquirer
// allows (the Redis store's native SET NX PX gives it). The Locker's next
// attempt must find the name its own, or its end release it.
func (v *simView) TryAcquireFree(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := v.TryAcquire(ctx, key, token, ttl, fenced)
	if ok && simResent(token) {
		return false, 0, nil
	}
	return ok, fence, err
}

// simResent picks one token in eight, by its hash.
func simResent(token string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(token))
	return h.Sum32()%8 == 0
}

func (v *simView) Release(ctx context.Context, key, token string) (bool, error) {
	r, err := v.call(ctx, simOpRelease, key, []string{token}, func() string { return v.s.trace.tok(token) }, func(now time.Time) simReply {
		return v.s.release(v, key, token, now)
	})
	return r.ok, err
}

func (v *simView) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	r, err := v.call(ctx, simOpExtend, key, []string{token}, func() string { return fmt.Sprintf("%s ttl=%v fenced=%v", v.s.trace.tok(token), ttl, fenced) }, func(now time.Time) simReply {
		return v.s.extend(key, token, ttl, fenced, now)
	})
	return r.ok, r.fence, err
}

func (v *simView) RaiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	r, err := v.call(ctx, simOpRaiseFence, key, []string{token}, func() string { return v.s.trace.tok(token) }, func(now time.Time) simReply {
		return v.s.raiseFence(key, token, fence, now)
	})
	return r.ok, err
}

func (v *simView) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	sent := time.Now()
	r, err := v.call(ctx, simOpEnqueue, key, []string{token}, func() string { return fmt.Sprintf("%s ttl=%v patience=%v", v.s.trace.tok(token), ttl, patience) }, func(now time.Time) simReply {
		return v.s.enqueue(key, token, ttl, patience, fenced, now)
	})
	if err != nil {
		if simMayHaveApplied(err) { // as the Redis store: leave, at once and in the background
			v.Undo(ctx, key, token, ttl, sent)
		}
		return core.Grant{}, err
	}
	return r.grant, nil
}

func (v *simView) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	waiters = slices.Clone(waiters)
	tokens := make([]string, len(waiters))
	for i, w := range waiters {
		tokens[i] = w.Token
	}
	what := func() string {
		names := make([]string, len(waiters))
		for i, w := range waiters {
			names[i] = v.s.trace.tok(w.Token)
		}
		slices.Sort(names)
		return "[" + strings.Join(names, " ") + "]"
	}
	r, err := v.call(ctx, simOpPoll, key, tokens, what, func(now time.Time) simReply {
		return v.s.poll(key, waiters, patience, fenced, now)
	})
	if err != nil {
		return -1, core.Grant{}, err
	}
	return r.index, r.grant, nil
}

func (v *simView) Dequeue(ctx context.Context, key, token string) error {
	_, err := v.call(ctx, simOpDequeue, key, []string{token}, func() string { return v.s.trace.tok(token) }, func(now time.Time) simReply {
		return v.s.dequeue(key, token, now)
	})
	return err
}

// Undo removes what a failed attempt may have set (core.Undoer), under the
// rules of internal/undo, the clean-up the real stores share: a
// compare-and-delete at once within ctx, then one every undoInterval in the
// background, until one deletes the key, or the store has answered for ttl
// since its first answer, or undoHorizon has passed since sent, or the
// view is closed. The background rounds run on the scheduler, each
// attempt's fates drawn from a stream of its own, so that they replay
// exactly (internal/undo's goroutine would send the rounds of attempts made
// at one instant in an order of the Go scheduler's).
func (v *simView) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	v.undo(ctx, key, token, ttl, sent, false)
}

// undo is Undo, or for share the undo of a failed TryAcquireShare (a
// ReleaseShare of its token, under the same rules, as the Redis stores'
// UndoShare).
func (v *simView) undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time, share bool) {
	u := &simUndo{v: v, key: key, token: token, ttl: ttl, horizon: sent.Add(max(ttl, undoHorizon)), share: share}
	st := v.stream(ctx, simOpUndo, key)
	u.st = st.child()
	r, err := v.call(ctx, simOpUndo, key, []string{token}, func() string { return v.s.trace.tok(token) + u.what() }, u.apply)
	if u.outcome(r, err, time.Now()) {
		return
	}
	v.s.push(time.Now(), u.run)
}

// The rules of internal/undo.
const (
	undoInterval = 250 * time.Millisecond
	undoHorizon  = 10 * time.Minute
)

// simUndo is one clean-up in the background.
type simUndo struct {
	v          *simView
	key, token string
	ttl        time.Duration
	horizon    time.Time
	until      time.Time  // zero until the store answered; then given up at
	st         *simStream // the fates of its rounds
	share      bool       // a share's: ReleaseShare, not Release
}

// apply runs one round at the store, on the scheduler, with s.mu held.
func (u *simUndo) apply(now time.Time) simReply {
	if u.share {
		return u.v.s.releaseShare(u.v, u.key, u.token, now)
	}
	return u.v.s.release(u.v, u.key, u.token, now)
}

// what tells a share's clean-up apart in the trace.
func (u *simUndo) what() string {
	if u.share {
		return " (share)"
	}
	return ""
}

// outcome takes in the answer (or error) of one compare-and-delete at now,
// and reports whether the clean-up is over. A refusal, a timeout or a lost
// reply is no answer: the command may still arrive.
func (u *simUndo) outcome(r simReply, err error, now time.Time) bool {
	switch {
	case err == nil && r.ok:
		return true
	case err == nil && u.until.IsZero():
		u.until = now.Add(u.ttl)
	}
	return u.v.closed.Load() || !now.Before(u.horizon) || (!u.until.IsZero() && !now.Before(u.until))
}

// run sends one background round, on the scheduler, and schedules the next
// one undoInterval after it ends (at its reply, or at its deadline: the
// smaller of the I/O timeout and two intervals).
func (u *simUndo) run(now time.Time) {
	s := u.v.s
	if u.v.closed.Load() || u.v.dead(now) {
		return
	}
	ended := false
	end := func(r simReply, err error) {
		if ended {
			return
		}
		ended = true
		at := time.Now()
		if !u.outcome(r, err, at) {
			s.push(at.Add(undoInterval), u.run)
		}
	}
	err := u.v.post(u.st, simOpUndo, u.key, []string{u.token}, func() string { return s.trace.tok(u.token) + u.what() + " (background)" }, u.apply, func(r simReply) { end(r, nil) })
	if err != nil {
		s.push(now.Add(undoInterval), u.run)
		return
	}
	s.push(now.Add(min(u.v.io, 2*undoInterval)), func(time.Time) { end(simReply{}, context.DeadlineExceeded) })
}

func (v *simView) Announce() { v.announce.Store(true) }

func (v *simView) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	v.mu.Lock()
	if v.watchers[key] == nil {
		v.watchers[key] = make(map[chan struct{}]int64)
	}
	v.nextID++
	v.watchers[key][c] = v.nextID
	v.mu.Unlock()
	return c, func() {
		v.mu.Lock()
		delete(v.watchers[key], c)
		if len(v.watchers[key]) == 0 {
			delete(v.watchers, key)
		}
		v.mu.Unlock()
	}
}

// simUnclaimedFor is how long a grant heard before its waiter listened is kept
// (internal/unclaimed.For).
const simUnclaimedFor = 5 * time.Second

func (v *simView) Grants(key, token string) (<-chan core.Grant, func()) {
	sub := &simGrantSub{key: key, c: make(chan core.Grant, 1)}
	v.mu.Lock()
	v.nextID++
	sub.id = v.nextID
	v.grants[token] = sub
	if h, ok := v.unclaimed[token]; ok {
		delete(v.unclaimed, token)
		if time.Since(h.heard) <= simUnclaimedFor {
			pubsub.Offer(sub.c, h.g)
		}
	}
	v.mu.Unlock()
	return sub.c, func() {
		v.mu.Lock()
		if v.grants[token] == sub {
			delete(v.grants, token)
		}
		v.mu.Unlock()
	}
}

// simTarget is one listener of a message, and how to deliver it there.
type simTarget struct {
	id      int64 // registration number: targets go in this order
	what    string
	deliver func(now time.Time) // on the scheduler
}

// subscribedLocked reports whether v listens to key's channel; v.mu is held.
func (v *simView) subscribedLocked(key string) bool {
	if v.closed.Load() {
		return false
	}
	if len(v.watchers[key]) > 0 {
		return true
	}
	for _, g := range v.grants {
		if g.key == key {
			return true
		}
	}
	return false
}

// subscribed reports whether v listens to key's channel.
func (v *simView) subscribed(key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.subscribedLocked(key)
}

// targets returns the listeners of v that m, published on key's channel,
// goes to, in registration order: each watcher of a release notice; for a
// grant, the view itself, which hands it to the waiter of its token or
// keeps it until that waiter listens (internal/unclaimed).
func (v *simView) targets(key string, m simMsg) []simTarget {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.subscribedLocked(key) {
		return nil
	}
	if !m.notice {
		what := fmt.Sprintf("the grant of %s to %s (fence %d, %v)", key, v.s.trace.tok(m.token), m.grant.Fence, m.grant.TTL)
		return []simTarget{{what: what, deliver: func(now time.Time) { v.deliverGrant(key, m, now) }}}
	}
	var ts []simTarget
	for c, id := range v.watchers[key] {
		ts = append(ts, simTarget{id: id, what: "the release notice of " + key, deliver: func(time.Time) { v.signal(key, c) }})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
	return ts
}

// pollRequests returns a poll request for each waiter of key in v but
// token's, in registration order.
func (v *simView) pollRequests(key, token string) []simTarget {
	v.mu.Lock()
	defer v.mu.Unlock()
	var ts []simTarget
	for tok, sub := range v.grants {
		if sub.key == key && tok != token {
			ts = append(ts, simTarget{id: sub.id, what: "a poll request for " + v.s.trace.tok(tok), deliver: func(time.Time) { v.pollRequest(tok, sub) }})
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
	return ts
}

// signal wakes the watcher c of key, if it still watches.
func (v *simView) signal(key string, c chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.watchers[key][c]; ok {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// deliverGrant hands a grant heard on key's channel to its waiter, or keeps
// it for a while if the waiter does not listen yet.
func (v *simView) deliverGrant(key string, m simMsg, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sub := v.grants[m.token]; sub != nil {
		pubsub.Offer(sub.c, m.grant)
	} else if v.subscribedLocked(key) {
		v.unclaimed[m.token] = simHeldGrant{g: m.grant, heard: now}
	}
}

// pollRequest asks the waiter of token to poll, if it still listens.
func (v *simView) pollRequest(token string, sub *simGrantSub) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.grants[token] == sub {
		pubsub.Offer(sub.c, core.Grant{})
	}
}

// simTrace records what happened, for the report of a failing seed: the
// last simTraceTail events, or all of them with REQLOCK_SIM_TRACE=1.
type simTrace struct {
	mu     sync.Mutex
	start  time.Time
	full   bool
	lines  []simTraceLine // all, or a ring of simTraceTail
	next   int
	tokens map[string]string // token → "t<n>", in order of first sight
	digest uint64            // FNV-1a of the scheduler's lines: equal on every run of a seed
}

type simTraceLine struct {
	at     time.Time
	format string
	args   []any
}

const simTraceTail = 60

func newSimTrace(start time.Time, full bool) *simTrace {
	return &simTrace{start: start, full: full, tokens: make(map[string]string), digest: 14695981039346656037}
}

func (tr *simTrace) add(format string, args ...any) {
	l := simTraceLine{at: time.Now(), format: format, args: args}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.full || len(tr.lines) < simTraceTail {
		tr.lines = append(tr.lines, l)
		return
	}
	tr.lines[tr.next] = l
	tr.next = (tr.next + 1) % simTraceTail
}

// mix adds a line of the scheduler to the digest.
func (tr *simTrace) mix(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := 0; i < len(s); i++ {
		tr.digest ^= uint64(s[i])
		tr.digest *= 1099511628211
	}
}

// tok returns the short name of token.
func (tr *simTrace) tok(token string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n, ok := tr.tokens[token]
	if !ok {
		n = fmt.Sprintf("t%d", len(tr.tokens)+1)
		tr.tokens[token] = n
	}
	return n
}

// since formats an instant of the run.
func (tr *simTrace) since(t time.Time) string {
	return fmt.Sprintf("+%.6fs", t.Sub(tr.start).Seconds())
}

// dump returns the recorded lines, oldest first.
func (tr *simTrace) dump() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	lines := append(slices.Clone(tr.lines[tr.next:]), tr.lines[:tr.next]...)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = tr.since(l.at) + " " + fmt.Sprintf(l.format, l.args...)
	}
	return out
}

// TestSimStoreConformance runs core/storetest against the simulated store,
// so that the simulation's store behaves as a real one must. It runs in
// real time (storetest's subtests cannot run in a bubble) and without
// faults: small network delays only.
func TestSimStoreConformance(t *testing.T) {
	t.Parallel()
	tr := newSimTrace(time.Now(), false)
	s := newSimStore(1, &simPlan{}, tr, false) // quietFrom zero: no faults
	s.start()
	t.Cleanup(s.stop)
	n := 0
	storetest.Run(t, func(t *testing.T) core.Store {
		n++
		return s.newView(fmt.Sprintf("c%d", n), time.Second, nil, time.Time{})
	})
}
