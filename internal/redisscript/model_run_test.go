package redisscript_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// This file drives the fair queue's scripts against a real redis-server
// with a seeded random schedule of simulated waiters, and checks, after
// every step, the state Redis shows against the model (model_test.go) and
// against the queue's invariants.

var (
	seedFlag  = flag.Uint64("model.seed", 0, "run TestModel with this seed only (a failure prints its seed)")
	stepsFlag = flag.Int("model.steps", 0, "steps per seed of TestModel (default 250)")
)

// scripts are the scripts a run sends: the real ones, or mutants.
type scripts struct{ enqueue, poll, release, dequeue string }

var realScripts = scripts{redisscript.Enqueue, redisscript.Poll, redisscript.Release, redisscript.Dequeue}

// snapshotScript reads the state of a name at one instant: a script sees no
// key expire while it runs, so that the lock, the queue and its entries are
// read as of the same moment. It returns the server's clock (TIME, read
// after that moment), the lock's holder and PEXPIRETIME, the queue, the
// entries, the PEXPIRETIME of the queue and of the entries, and the fence
// counter. PEXPIRETIME needs Redis 7.0.
const snapshotScript = `
local t = redis.call("TIME")
return {t[1], t[2],
  redis.call("GET", KEYS[1]) or "", redis.call("PEXPIRETIME", KEYS[1]),
  redis.call("ZRANGE", KEYS[3], 0, -1), redis.call("HGETALL", KEYS[4]),
  redis.call("PEXPIRETIME", KEYS[3]), redis.call("PEXPIRETIME", KEYS[4]),
  redis.call("GET", KEYS[2]) or "0"}
`

// Bounds of the simulated waiters' requests, in ms: short, so that
// patience and TTLs run out often within a run.
const (
	minTTL, maxTTL           = 20, 400
	minPatience, maxPatience = 20, 100
)

// processes is how many processes the simulated waiters belong to (waiter
// i to process i % processes). The waiters of a process share its patience
// and fencing, as the waiters of one Locker do: a waiter that arrives while
// another of its process is active takes that one's.
const processes = 2

// config is one run of the model test.
type config struct {
	seed    uint64
	steps   int
	waiters int
	scripts scripts
}

// wstate is what a simulated waiter believes.
type wstate int

const (
	idle    wstate = iota // no request
	waiting               // in line, as far as it knows
	holding               // holds the lock, as far as it knows
)

// waiter is a simulated process that asks for the lock, one request (one
// token) at a time.
type waiter struct {
	id, gen       int
	token         string
	ttl, patience int64
	fenced        bool
	deaf          bool // does not hear grant messages: learns of a grant at its next poll
	state         wstate
	until         int64 // holding: the server time until which it counts on the lock
	fence         int64
}

func (w *waiter) entry() entry {
	return entry{token: w.token, ttl: w.ttl, patience: w.patience, fenced: w.fenced}
}

// kind is a step of the schedule.
type kind int

const (
	arrive       kind = iota // an idle waiter asks: its first enqueue
	poll                     // a waiting waiter polls: enqueue again
	batchPoll                // waiting waiters of one process poll together: poll.lua
	repoll                   // a holder sends its enqueue again (a retry whose reply was lost)
	release                  // a holder releases
	giveUp                   // a waiting waiter gives up: dequeue
	crash                    // a waiter's process dies: it calls no more
	staleRelease             // a release with an old token (a late duplicate, or a lease long lost)
	staleDequeue             // a dequeue with an old token
	advance                  // time passes
	kinds
)

var kindNames = [kinds]string{"arrive", "poll", "batch poll", "repoll", "release", "give up", "crash", "stale release", "stale dequeue", "advance"}

// action is one step: its kind, its waiter or token, and its details.
type action struct {
	kind     kind
	w        *waiter
	batch    []*waiter // batch poll: its waiters, in the call's order
	token    string
	announce bool
	sleep    time.Duration
}

// failure is a check that failed, with what reproduces it.
type failure struct {
	test  string // the test that reruns it; TestModel when empty
	seed  uint64
	step  int
	check string
	msg   string
	trace []string
}

func (f *failure) Error() string {
	test := f.test
	if test == "" {
		test = "TestModel"
	}
	return fmt.Sprintf("seed %d, step %d: %s: %s\n(rerun: go test ./internal/redisscript -run '%s$' -model.seed=%d)\nlast steps:\n%s",
		f.seed, f.step, f.check, f.msg, test, f.seed, strings.Join(f.trace, "\n"))
}

// Checks, as failures name them.
const (
	checkCall     = "call failed"
	checkHolder   = "at most one holder"
	checkOrder    = "grants in arrival order among live waiters"
	checkFree     = "a free name with a live waiter is granted"
	checkKeys     = "the queue's keys vanish when nobody waits"
	checkFence    = "fences strictly increase across holders"
	checkGrantMsg = "a grant message names the holder"
	checkModel    = "the model"
)

const (
	traceLen       = 40               // steps a failure shows
	markerPrefix   = "~mark "         // the payload that ends a step's messages
	messageTimeout = 10 * time.Second // how long a step's marker may take to arrive
)

// run is the state of one run.
type run struct {
	cfg  config
	ctx  context.Context
	rdb  *redis.Client
	ps   *redis.PubSub
	key  string
	keys []string
	rnd  *rand.Rand

	m          model
	ws         []*waiter
	old        []string         // tokens no longer in use
	granted    map[string]int64 // token → the fence of its lock, once it held it
	lastFence  int64
	lastQueued int64 // server time of the last enqueue that left its caller in line
	now        int64 // server time of the last snapshot
	t0         int64
	stats      map[string]int // what the steps did, for the log
	step       int
	trace      []string
}

// modelRun runs cfg on a fresh name of rdb's server, and returns the first
// failed check, or nil.
func modelRun(ctx context.Context, rdb *redis.Client, name string, cfg config) (stats map[string]int, err error) {
	r := &run{
		cfg:     cfg,
		ctx:     ctx,
		rdb:     rdb,
		key:     "model:{" + name + "}",
		rnd:     rand.New(rand.NewPCG(cfg.seed, 0x9e3779b97f4a7c15)),
		granted: map[string]int64{},
		stats:   map[string]int{},
	}
	r.keys = redisscript.Keys(r.key)
	for i := range cfg.waiters {
		r.ws = append(r.ws, &waiter{id: i})
	}
	r.ps = rdb.Subscribe(ctx, redisscript.Channel(r.key))
	defer r.ps.Close()
	if _, err := r.ps.Receive(ctx); err != nil { // the subscription's confirmation
		return r.stats, fmt.Errorf("subscribe: %w", err)
	}
	for r.step = 1; r.step <= cfg.steps; r.step++ {
		if err := r.do(r.pick()); err != nil {
			return r.stats, err
		}
	}
	return r.stats, nil
}

func (r *run) fail(check, format string, args ...any) *failure {
	return &failure{seed: r.cfg.seed, step: r.step, check: check, msg: fmt.Sprintf(format, args...), trace: r.trace}
}

// pick draws the next step: any step that makes sense for the waiters as
// they are, with weights that keep a few waiters in line most of the time.
func (r *run) pick() action {
	var idles, waits, holds, active []*waiter
	for _, w := range r.ws {
		switch w.state {
		case idle:
			idles = append(idles, w)
		case waiting:
			waits = append(waits, w)
			active = append(active, w)
		case holding:
			holds = append(holds, w)
			active = append(active, w)
		}
	}
	// A grant that its waiter did not hear of is a race worth running
	// often: the waiter gives up before its next poll would tell it; or
	// its process's next poll tells it.
	for _, w := range waits {
		if r.m.holder == w.token {
			switch r.rnd.IntN(4) {
			case 0:
				return action{kind: giveUp, w: w}
			case 1:
				return action{kind: batchPoll, batch: r.batchOf(w, waits)}
			}
		}
	}
	var weights [kinds]int
	if len(idles) > 0 {
		weights[arrive] = 14
	}
	if len(waits) > 0 {
		weights[poll], weights[batchPoll], weights[giveUp] = 18, 18, 10
	}
	if len(holds) > 0 {
		weights[release], weights[repoll] = 14, 4
	}
	if len(active) > 0 {
		weights[crash] = 4
	}
	weights[staleRelease], weights[staleDequeue], weights[advance] = 3, 3, 18
	total := 0
	for _, n := range weights {
		total += n
	}
	n := r.rnd.IntN(total)
	k := kind(0)
	for ; n >= weights[k]; k++ {
		n -= weights[k]
	}
	a := action{kind: k}
	one := func(ws []*waiter) *waiter { return ws[r.rnd.IntN(len(ws))] }
	switch k {
	case arrive:
		w := one(idles)
		w.gen++
		w.token = fmt.Sprintf("w%d.%d", w.id, w.gen)
		w.ttl = minTTL + r.rnd.Int64N(maxTTL-minTTL+1)
		w.patience = minPatience + r.rnd.Int64N(maxPatience-minPatience+1)
		w.fenced = r.rnd.IntN(2) == 0
		w.deaf = r.rnd.IntN(10) < 4
		for _, x := range r.ws {
			if x != w && x.state != idle && x.id%processes == w.id%processes {
				w.patience, w.fenced = x.patience, x.fenced
				break
			}
		}
		w.state = waiting
		a.w = w
	case poll:
		// Half the polls come from the waiter whose place dies first, as
		// live waiters poll before their patience runs out; the others
		// from anyone, so that places die too.
		a.w = one(waits)
		if r.rnd.IntN(2) == 0 {
			if w := r.soonest(waits); w != nil {
				a.w = w
			}
		}
	case batchPoll:
		// Half the time, the process of the waiter whose place dies first.
		w0 := one(waits)
		if r.rnd.IntN(2) == 0 {
			if w := r.soonest(waits); w != nil {
				w0 = w
			}
		}
		a.batch = r.batchOf(w0, waits)
	case giveUp:
		a.w = one(waits)
	case release, repoll:
		a.w = one(holds)
		a.announce = r.rnd.IntN(2) == 0
	case crash:
		a.w = one(active)
	case staleRelease, staleDequeue:
		if len(r.old) > 0 && r.rnd.IntN(5) > 0 {
			a.token = r.old[r.rnd.IntN(len(r.old))]
		} else {
			a.token = fmt.Sprintf("never.%d", r.step)
		}
		a.announce = r.rnd.IntN(2) == 0
	case advance:
		a.sleep = r.pause()
	}
	return a
}

// batchOf returns the waiters of a poll of w0's process, in a random
// order: w0 and, half the time, all the process's other waiters of waits,
// else some of them.
func (r *run) batchOf(w0 *waiter, waits []*waiter) []*waiter {
	var batch []*waiter
	all := r.rnd.IntN(2) == 0
	for _, w := range waits {
		mine := w.id%processes == w0.id%processes && w.patience == w0.patience && w.fenced == w0.fenced
		if w == w0 || (mine && (all || r.rnd.IntN(2) == 0)) {
			batch = append(batch, w)
		}
	}
	r.rnd.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	return batch
}

// soonest returns the waiter of ws whose place in the queue dies first, or
// nil if none of them has one.
func (r *run) soonest(ws []*waiter) *waiter {
	var first *waiter
	var at int64
	for _, w := range ws {
		if i := r.m.index(w.token); i >= 0 && (first == nil || r.m.queue[i].deadline.lo < at) {
			first, at = w, r.m.queue[i].deadline.lo
		}
	}
	return first
}

// pause draws how long time advances: mostly a few ms; often until just
// past the lock's expiry, or the next deadline or expiry the model knows
// of (a patience at most); sometimes up to a patience.
func (r *run) pause() time.Duration {
	switch n := r.rnd.IntN(10); {
	case n < 5:
		return time.Duration(1+r.rnd.IntN(3)) * time.Millisecond
	case n < 7 && r.m.holder != "" && r.m.expiry.hi > r.now:
		// until the lock expires: its holder overstays (a crash, a stall)
		return time.Duration(min(r.m.expiry.hi-r.now+1+r.rnd.Int64N(3), maxPatience)) * time.Millisecond
	case n < 9:
		next := int64(-1)
		consider := func(t int64) {
			if t > r.now && (next < 0 || t < next) {
				next = t
			}
		}
		if r.m.holder != "" {
			consider(r.m.expiry.hi)
		}
		for _, e := range r.m.queue {
			consider(e.deadline.hi)
		}
		if len(r.m.queue) > 0 {
			consider(r.m.keys.hi)
		}
		if next >= 0 {
			return time.Duration(min(next-r.now+1+r.rnd.Int64N(3), maxPatience)) * time.Millisecond
		}
	}
	return time.Duration(1+r.rnd.Int64N(maxPatience)) * time.Millisecond
}

// call is a script call of a step.
type call struct {
	op     string // "enqueue", "poll", "release", "dequeue"
	script string
	args   []any
}

func (r *run) callOf(a action) *call {
	channel := redisscript.Channel(r.key)
	announce := "0"
	if a.announce {
		announce = "1"
	}
	switch a.kind {
	case arrive, poll, repoll:
		w := a.w
		fenced := "0"
		if w.fenced {
			fenced = "1"
		}
		return &call{"enqueue", r.cfg.scripts.enqueue, []any{w.token, w.ttl, w.patience, fenced, channel, grace}}
	case batchPoll:
		w := a.batch[0] // the waiters of a batch share patience and fencing
		fenced := "0"
		if w.fenced {
			fenced = "1"
		}
		args := []any{w.patience, fenced, channel, grace}
		for _, x := range a.batch {
			args = append(args, x.token, x.ttl)
		}
		return &call{"poll", r.cfg.scripts.poll, args}
	case release:
		return &call{"release", r.cfg.scripts.release, []any{a.w.token, channel, announce, grace}}
	case giveUp:
		return &call{"dequeue", r.cfg.scripts.dequeue, []any{a.w.token, channel, grace}}
	case staleRelease:
		return &call{"release", r.cfg.scripts.release, []any{a.token, channel, announce, grace}}
	case staleDequeue:
		return &call{"dequeue", r.cfg.scripts.dequeue, []any{a.token, channel, grace}}
	}
	return nil
}

// exec runs c (if any) and the snapshot after it in one pipeline: TIME,
// the call, the snapshot, and a marker published on the name's channel, so
// that the messages read up to the marker are those of the call.
func (r *run) exec(c *call) (snapshot, error) {
	var s snapshot
	marker := markerPrefix + strconv.Itoa(r.step)
	pipe := r.rdb.Pipeline()
	tb := pipe.Do(r.ctx, "TIME")
	var ev *redis.Cmd
	if c != nil {
		ev = pipe.Eval(r.ctx, c.script, r.keys, c.args...)
	}
	snap := pipe.Eval(r.ctx, snapshotScript, r.keys)
	pipe.Publish(r.ctx, redisscript.Channel(r.key), marker)
	_, _ = pipe.Exec(r.ctx) // each command's error is read below
	t, err := tb.Slice()
	if err != nil {
		return s, fmt.Errorf("TIME: %w", err)
	}
	if s.tb, err = serverMs(t[0], t[1]); err != nil {
		return s, err
	}
	if ev != nil {
		v, err := ev.Result()
		if err != nil {
			return s, fmt.Errorf("%s: %w", c.op, err)
		}
		switch v := v.(type) {
		case int64:
			s.reply = []int64{v}
		case []any:
			for _, x := range v {
				n, ok := x.(int64)
				if !ok {
					return s, fmt.Errorf("%s answered %v", c.op, v)
				}
				s.reply = append(s.reply, n)
			}
		default:
			return s, fmt.Errorf("%s answered %v", c.op, v)
		}
	}
	v, err := snap.Slice()
	if err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	if err := s.read(v); err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(r.ctx, messageTimeout)
	defer cancel()
	for {
		msg, err := r.ps.ReceiveMessage(ctx)
		if err != nil {
			return s, fmt.Errorf("the name's channel: %w", err)
		}
		if msg.Payload == marker {
			return s, nil
		}
		if strings.HasPrefix(msg.Payload, markerPrefix) {
			return s, fmt.Errorf("the name's channel: marker %q while waiting for %q", msg.Payload, marker)
		}
		s.msgs = append(s.msgs, msg.Payload)
	}
}

func serverMs(sec, usec any) (int64, error) {
	a, err1 := strconv.ParseInt(fmt.Sprint(sec), 10, 64)
	b, err2 := strconv.ParseInt(fmt.Sprint(usec), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("TIME answered %v %v", sec, usec)
	}
	return a*1000 + b/1000, nil
}

// read fills s from the snapshot script's answer.
func (s *snapshot) read(v []any) error {
	bad := func() error { return fmt.Errorf("snapshot answered %v", v) }
	if len(v) != 9 {
		return bad()
	}
	var err error
	if s.ts, err = serverMs(v[0], v[1]); err != nil {
		return err
	}
	var ok [5]bool
	s.holder, ok[0] = v[2].(string)
	s.expiry, ok[1] = v[3].(int64)
	s.qExpiry, ok[2] = v[6].(int64)
	s.wExpiry, ok[3] = v[7].(int64)
	fence, ok4 := v[8].(string)
	q, ok5 := v[4].([]any)
	h, ok6 := v[5].([]any)
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] || !ok4 || !ok5 || !ok6 || len(h)%2 != 0 {
		return bad()
	}
	if s.fence, err = strconv.ParseInt(fence, 10, 64); err != nil {
		return fmt.Errorf("the fence counter holds %q", fence)
	}
	for _, x := range q {
		s.queue = append(s.queue, fmt.Sprint(x))
	}
	s.entries = map[string]string{}
	for i := 0; i < len(h); i += 2 {
		s.entries[fmt.Sprint(h[i])] = fmt.Sprint(h[i+1])
	}
	return nil
}

// do runs one step and checks what it did.
func (r *run) do(a action) error {
	if a.kind == advance {
		time.Sleep(a.sleep)
	}
	c := r.callOf(a)
	s, err := r.exec(c)
	if r.t0 == 0 {
		r.t0 = s.tb
	}
	r.log(a, s)
	if err != nil {
		return r.fail(checkCall, "%v", err)
	}
	w := span{s.tb, s.ts}
	pre := r.m
	op := ""
	if c != nil {
		op = c.op
	}
	if f := r.invariants(a, op, pre, s, w); f != nil {
		return f
	}
	if f := r.follow(a, op, s, w); f != nil {
		return f
	}
	r.now = s.ts
	return nil
}

// follow runs the model on the step, each branch of its open questions in
// turn, and keeps the first branch that agrees with what Redis shows.
func (r *run) follow(a action, op string, s snapshot, w span) *failure {
	var first error
	c := &chooser{}
	for branches := 1; ; branches++ {
		m := r.m.clone()
		var out outcome
		switch a.kind {
		case arrive, poll, repoll:
			out = m.enqueue(c, w, a.w.entry())
		case batchPoll:
			es := make([]entry, len(a.batch))
			for i, x := range a.batch {
				es[i] = x.entry()
			}
			out = m.poll(c, w, a.batch[0].patience, a.batch[0].fenced, es)
		case release:
			out = m.release(c, w, a.w.token, a.announce)
		case staleRelease:
			out = m.release(c, w, a.token, a.announce)
		case giveUp:
			out = m.dequeue(c, w, a.w.token)
		case staleDequeue:
			out = m.dequeue(c, w, a.token)
		}
		m.settle(c, w) // expiries between the call and the snapshot, or of a step without a call
		err := agree(op, m, out, r.m.fence, s)
		if err == nil {
			m.adopt(s)
			r.count(a, op, out, m)
			r.m = m
			return nil
		}
		if first == nil {
			first = err
		}
		if !c.next() || branches == 1<<12 {
			return r.fail(checkModel, "%v (%d branches of the model tried)", first, branches)
		}
	}
}

// count adds what the step did (out, leaving the model in m) to the run's
// statistics.
func (r *run) count(a action, op string, out outcome, m model) {
	r.stats[kindNames[a.kind]]++
	left := map[string]bool{}
	for _, e := range m.queue {
		left[e.token] = true
	}
	for _, g := range out.msgs {
		if g.notice {
			r.stats["release notices"]++
		} else {
			r.stats["grants by "+op]++
			left[g.token] = true
		}
	}
	if op == "enqueue" && out.ok {
		if r.m.holder == a.w.token {
			r.stats["grants found at a poll"]++
		} else {
			r.stats["takes"]++
		}
	}
	if op == "poll" {
		if len(a.batch) > 1 {
			r.stats["batch polls of several"]++
		}
		if out.ok && r.m.holder == a.batch[out.index-1].token {
			r.stats["grants found at a batch poll"]++
		}
		for _, x := range a.batch {
			if x.token != r.m.holder && r.m.index(x.token) < 0 {
				r.stats["queued by a batch poll"]++
			}
		}
	}
	if a.w != nil {
		left[a.w.token] = true
	}
	for _, x := range a.batch {
		left[x.token] = true
	}
	left[a.token] = true
	for _, e := range r.m.queue {
		if !left[e.token] {
			r.stats["dead entries dropped"]++
		}
	}
	if r.m.holder != "" && m.holder == "" && !out.ok {
		r.stats["locks expired"]++
	}
}

// invariants checks the step against the properties of the queue, from
// what Redis shows and what the waiters know, before the model does. It
// also updates what the waiters know.
func (r *run) invariants(a action, op string, pre model, s snapshot, w span) *failure {
	// New holders: a grant message, or an enqueue that took the lock.
	type holder struct {
		token string
		fence int64
		via   string
	}
	var news []holder
	lines := linesOf(pre, a.batch, w)
	for _, p := range s.msgs {
		if p == "" {
			continue // a release notice
		}
		token, fence, ttl, err := parsedGrant(p)
		if err != nil {
			return r.fail(checkGrantMsg, "%v", err)
		}
		if s.holder != token && s.tb+ttl > s.ts+slack {
			return r.fail(checkGrantMsg, "a message granted the lock to %s, but the lock holds %q", token, s.holder)
		}
		var f *failure
		for _, line := range lines {
			if f = r.grantedFrom(line, token, ttl, w); f == nil {
				break
			}
		}
		if f != nil {
			return f
		}
		news = append(news, holder{token, fence, "granted"})
		if x := r.waiterOf(token); x != nil && x.state == waiting && !x.deaf {
			x.state, x.until, x.fence = holding, s.tb+ttl, fence
		}
	}
	if op == "enqueue" && len(s.reply) == 3 && s.reply[0] == 1 {
		x := a.w
		fence := s.reply[1]
		// The caller held the lock already (granted, or taken by a call
		// whose reply was lost) unless the lock had expired for sure.
		known := pre.holder == x.token && pre.expiry.hi+slack >= w.lo
		if !known {
			if pre.holder != "" && pre.holder != x.token && pre.expiry.lo-slack >= w.hi {
				return r.fail(checkHolder, "%s took the lock while %s held it until %d", x.token, pre.holder, pre.expiry.lo)
			}
			i := pre.index(x.token)
			if i < 0 {
				i = len(pre.queue)
			}
			if f := r.ahead(x.token, pre.queue[:i], w); f != nil {
				return f
			}
			news = append(news, holder{x.token, fence, "took"})
		} else if had, ok := r.granted[x.token]; ok && fence != had {
			if !(pre.expiry.lo-slack < w.hi && fence > r.lastFence) {
				return r.fail(checkFence, "%s learnt at a poll that it holds the lock with fence %d, but it was given fence %d", x.token, fence, had)
			}
			// the lock expired just before the call, which took it anew
			news = append(news, holder{x.token, fence, "took"})
		}
		x.state, x.until, x.fence = holding, s.tb+s.reply[2], fence
	}
	if op == "poll" && len(s.reply) == 3 && s.reply[0] >= 1 && s.reply[0] <= int64(len(a.batch)) {
		x := a.batch[s.reply[0]-1]
		fence := s.reply[1]
		// The poll granted the lock to the waiter (and published it), or
		// the waiter held it already (granted by a release, its message
		// unheard) and the lock had not expired for sure.
		known := pre.holder == x.token && pre.expiry.hi+slack >= w.lo
		i := slices.IndexFunc(news, func(h holder) bool { return h.token == x.token })
		switch had, ok := r.granted[x.token]; {
		case i >= 0 && news[i].fence != fence:
			return r.fail(checkFence, "the poll answered that %s holds the lock with fence %d, but its grant gave fence %d", x.token, fence, news[i].fence)
		case i >= 0:
		case !known:
			return r.fail(checkHolder, "the poll answered that %s holds the lock, but it did not hold it and was not granted it", x.token)
		case ok && fence != had:
			return r.fail(checkFence, "%s learnt at a poll that it holds the lock with fence %d, but it was given fence %d", x.token, fence, had)
		}
		x.state, x.until, x.fence = holding, s.tb+s.reply[2], fence
	}
	for _, h := range news {
		x := r.waiterOf(h.token)
		fenced := x != nil && x.fenced
		if i := pre.index(h.token); i >= 0 {
			fenced = pre.queue[i].fenced
		}
		switch {
		case fenced && h.fence <= r.lastFence:
			return r.fail(checkFence, "%s %s the lock with fence %d, after fence %d", h.token, h.via, h.fence, r.lastFence)
		case !fenced && h.fence != 0:
			return r.fail(checkFence, "%s, which asked for no fence, %s the lock with fence %d", h.token, h.via, h.fence)
		}
		if fenced {
			r.lastFence = h.fence
		}
		r.granted[h.token] = h.fence
	}

	// What the caller does next, as it knows.
	switch a.kind {
	case arrive, poll, repoll:
		if len(s.reply) == 3 && s.reply[0] == 0 {
			a.w.state = waiting
			r.lastQueued = s.ts
		}
	case batchPoll:
		r.lastQueued = s.ts // it renews the queue's keys, whatever it answers
	case release, giveUp, crash:
		r.old = append(r.old, a.w.token)
		a.w.state = idle
	}

	// At most one holder: those who count on the lock now hold it.
	var counting []*waiter
	for _, x := range r.ws {
		if x.state == holding && x.until >= s.ts {
			counting = append(counting, x)
		}
	}
	if len(counting) > 1 {
		return r.fail(checkHolder, "%s counts on the lock until %d and %s until %d (now %d)",
			counting[0].token, counting[0].until, counting[1].token, counting[1].until, s.ts)
	}
	if len(counting) == 1 && s.holder != counting[0].token {
		return r.fail(checkHolder, "%s counts on the lock until %d (now %d), but the lock holds %q",
			counting[0].token, counting[0].until, s.ts, s.holder)
	}

	// A free name with a live waiter: after an enqueue (the caller takes
	// the lock or someone ahead of it gets it), a batch poll, or a release
	// or give-up that freed the lock, nobody alive waits for a free lock.
	freed := op == "enqueue" || op == "poll" || (op != "" && len(s.reply) == 1 && s.reply[0] == 1)
	expiring := pre.holder != "" && pre.expiry.lo-slack <= s.ts // may have expired after the call
	if freed && s.holder == "" && len(news) == 0 && !expiring {
		for _, token := range s.queue {
			if e, err := parsedEntry(s.entries[token]); err == nil && e.deadline.lo > s.ts+slack {
				return r.fail(checkFree, "after the %s the lock is free while %s waits, alive until %d (now %d)",
					op, token, e.deadline.lo, s.ts)
			}
		}
	}

	// The queue's keys: gone with the last entry; else both expire at one
	// instant, after every entry's deadline, and no later than two
	// patiences after the last poll.
	switch {
	case len(s.queue) == 0 && (s.qExpiry != -2 || s.wExpiry != -2):
		return r.fail(checkKeys, "nobody is in line, but the queue's keys are left (PEXPIRETIME %d, %d; entries %v)", s.qExpiry, s.wExpiry, s.entries)
	case len(s.queue) == 0:
	case s.qExpiry < 0 || s.wExpiry < 0:
		return r.fail(checkKeys, "the queue's keys have no TTL (PEXPIRETIME %d, %d): they would outlive their waiters", s.qExpiry, s.wExpiry)
	case s.qExpiry != s.wExpiry:
		return r.fail(checkKeys, "the queue expires at %d and its entries at %d: a poll in between finds one without the other", s.qExpiry, s.wExpiry)
	case s.qExpiry > r.lastQueued+2*maxPatience+slack:
		return r.fail(checkKeys, "the queue's keys expire at %d, more than two patiences (at most %d ms) after the last poll at %d", s.qExpiry, maxPatience, r.lastQueued)
	default:
		for token, v := range s.entries {
			if e, err := parsedEntry(v); err == nil && e.deadline.lo >= s.qExpiry {
				return r.fail(checkKeys, "the entry of %s lives until %d, but the queue's keys expire at %d", token, e.deadline.lo, s.qExpiry)
			}
		}
	}
	return nil
}

// linesOf returns the lines that the grants of a call at w may see, from
// the line pre: pre itself, but a batch poll renews its waiters first,
// each in its place, or at the tail (in the call's order) when it has none,
// as when the queue's keys expired before the call (which the window may
// not tell).
func linesOf(pre model, batch []*waiter, w span) [][]entry {
	if len(batch) == 0 {
		return [][]entry{pre.queue}
	}
	var lines [][]entry
	renewed := func(queue []entry) []entry {
		line := model{queue: slices.Clone(queue)}
		for _, x := range batch {
			e := x.entry()
			e.deadline = w.plus(x.patience)
			if i := line.index(x.token); i >= 0 {
				line.queue[i] = e
			} else {
				line.queue = append(line.queue, e)
			}
		}
		return line.queue
	}
	if len(pre.queue) > 0 && pre.keys.hi+slack >= w.lo { // the keys may be there
		lines = append(lines, renewed(pre.queue))
	}
	if len(pre.queue) == 0 || pre.keys.lo-slack < w.hi { // they may be gone
		lines = append(lines, renewed(nil))
	}
	return lines
}

// grantedFrom fails the step if a grant of the lock to token for ttl ms,
// by a call at w, did not go to the first live waiter of line.
func (r *run) grantedFrom(line []entry, token string, ttl int64, w span) *failure {
	i := slices.IndexFunc(line, func(e entry) bool { return e.token == token })
	if i < 0 {
		return r.fail(checkOrder, "the lock was granted to %s, which was not in line", token)
	}
	e := line[i]
	if want := min(e.ttl, e.patience); ttl != want {
		return r.fail(checkGrantMsg, "the grant to %s lasts %d ms, want %d (the smaller of its TTL %d and its patience %d)",
			token, ttl, want, e.ttl, e.patience)
	}
	if e.deadline.hi+slack <= w.lo {
		return r.fail(checkOrder, "the lock was granted to %s, whose place died at %d (%d ms before the call)", token, e.deadline.hi, w.lo-e.deadline.hi)
	}
	return r.ahead(token, line[:i], w)
}

// ahead fails the step if a waiter ahead of token in line was alive for
// sure while token got the lock.
func (r *run) ahead(token string, ahead []entry, w span) *failure {
	for _, e := range ahead {
		if aliveAt(e.deadline, w) {
			return r.fail(checkOrder, "%s got the lock while %s, ahead of it in line, was alive until %d (call at %v)",
				token, e.token, e.deadline.lo, w)
		}
	}
	return nil
}

// tokensOf returns the tokens of ws.
func tokensOf(ws []*waiter) []string {
	t := make([]string, len(ws))
	for i, w := range ws {
		t[i] = w.token
	}
	return t
}

func (r *run) waiterOf(token string) *waiter {
	for _, w := range r.ws {
		if w.token == token && w.state != idle {
			return w
		}
	}
	return nil
}

// log adds the step to the trace of the last steps.
func (r *run) log(a action, s snapshot) {
	what := kindNames[a.kind]
	switch {
	case a.w != nil:
		what += " " + a.w.token
		if a.kind == arrive {
			what += fmt.Sprintf(" (ttl %d, patience %d, fenced %v, deaf %v)", a.w.ttl, a.w.patience, a.w.fenced, a.w.deaf)
		}
	case a.batch != nil:
		what += fmt.Sprintf(" %s (patience %d, fenced %v)", strings.Join(tokensOf(a.batch), " "), a.batch[0].patience, a.batch[0].fenced)
	case a.token != "":
		what += " " + a.token
	case a.kind == advance:
		what += " " + a.sleep.String()
	}
	lock := "free"
	if s.holder != "" {
		lock = fmt.Sprintf("%s until +%d", s.holder, s.expiry-r.t0)
	}
	var line []string
	for _, token := range s.queue {
		e, _ := parsedEntry(s.entries[token])
		line = append(line, fmt.Sprintf("%s(+%d)", token, e.deadline.lo-r.t0))
	}
	r.trace = append(r.trace, fmt.Sprintf("%4d +%5dms %-60s → %v %q | lock %s | fence %d | queue %v",
		r.step, s.tb-r.t0, what, s.reply, s.msgs, lock, s.fence, line))
	if len(r.trace) > traceLen {
		r.trace = slices.Delete(r.trace, 0, len(r.trace)-traceLen)
	}
}

// asFailure returns err's failure, or nil if it is not one.
func asFailure(err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}
