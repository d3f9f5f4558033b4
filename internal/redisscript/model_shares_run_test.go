package redisscript_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// This file drives the scripts of shares, of the writer they let in, of
// the exclusive lock beside them and of acquire_all.lua against a real
// redis-server, with a seeded random schedule of simulated clients (shared
// readers, permit holders, writers and holders of both names at once),
// and checks after every step the state Redis shows against the model
// (model_shares_test.go) and against the invariants of the modes.

// sscripts are the scripts a run of the share model sends: the real ones,
// or mutants.
type sscripts struct {
	acquireShare, releaseShare, extendShare, acquireWaiting, acquireAll string
	acquire, acquireFenced, release                                     string
}

var realShareScripts = sscripts{
	redisscript.AcquireShare, redisscript.ReleaseShare, redisscript.ExtendShare, redisscript.AcquireWaiting, redisscript.AcquireAll,
	redisscript.Acquire, redisscript.AcquireFenced, redisscript.Release,
}

// texts returns pointers to the scripts' texts, for mutants.
func (s *sscripts) texts() []*string {
	return []*string{&s.acquireShare, &s.releaseShare, &s.extendShare, &s.acquireWaiting, &s.acquireAll, &s.acquire, &s.acquireFenced, &s.release}
}

// shareSnapshotScript reads the state of the two names at one instant:
// KEYS as redisscript.ShareKeys, then the second name and its counter.
const shareSnapshotScript = `
local t = redis.call("TIME")
return {t[1], t[2],
  redis.call("GET", KEYS[1]) or "", redis.call("PEXPIRETIME", KEYS[1]),
  redis.call("ZRANGE", KEYS[3], 0, -1, "WITHSCORES"), redis.call("HGETALL", KEYS[4]),
  redis.call("PEXPIRETIME", KEYS[3]), redis.call("PEXPIRETIME", KEYS[4]),
  redis.call("GET", KEYS[5]) or "", redis.call("PEXPIRETIME", KEYS[5]),
  redis.call("GET", KEYS[2]) or "0",
  redis.call("GET", KEYS[6]) or "", redis.call("PEXPIRETIME", KEYS[6]), redis.call("GET", KEYS[7]) or "0"}
`

// Checks of the share model, as failures name them (and checkCall,
// checkModel).
const (
	checkOverlap = "no exclusive holder beside another holder, at most n permits in distinct slots"
	checkSFence  = "fences strictly increase, whatever the mode"
)

// role is what a simulated client asks for.
type role int

const (
	reader role = iota // shared holds
	permit             // one of n permits
	writer             // exclusive: TryAcquire, then TryAcquireWaiting
	multi              // both names at once
)

var roleNames = [...]string{"reader", "permit", "writer", "multi"}

// sclient is a simulated client, one request (token) at a time.
type sclient struct {
	id, gen  int
	token    string
	role     role
	n        int
	ttl      int64
	patience int64
	fenced   bool
	state    wstate
	until    int64 // holding: the server time until which it counts on its hold
	slot     int
}

func (c *sclient) exclusive() bool { return c.role == writer || c.role == multi }

// skind is a step of the share schedule.
type skind int

const (
	sArrive  skind = iota // an idle client asks: its first attempt
	sRetry                // a waiting client tries again
	sResend               // a holder sends its attempt again (a retry whose reply was lost)
	sExtend               // a share holder extends its share
	sRelease              // a holder releases
	sGiveUp               // a waiting client gives up (no call: a writer's record expires)
	sCrash                // a client's process dies
	sStale                // a release with an old token
	sAdvance              // time passes
	skinds
)

var skindNames = [skinds]string{"arrive", "retry", "resend", "extend", "release", "give up", "crash", "stale release", "advance"}

type saction struct {
	kind     skind
	c        *sclient
	token    string
	announce bool
	sleep    time.Duration
}

// scall is one script call of a step, and what the model does for it.
type scall struct {
	script string
	keys   []string
	args   []any
	model  func(m *smodel, ch *chooser, w span, o *soutcome)
}

// srun is the state of one run of the share model.
type srun struct {
	cfg     config
	scripts sscripts
	ctx     context.Context
	rdb     *redis.Client
	ps      *redis.PubSub
	key     string
	other   string
	keys    []string // redisscript.ShareKeys(key), then other and its counter
	rnd     *rand.Rand
	permits int // n of the permit clients (one in eight asks for another n)

	m         smodel
	cs        []*sclient
	old       []string
	lastFence int64
	now       int64
	t0        int64
	stats     map[string]int
	step      int
	trace     []string
}

// shareModelRun runs cfg (its scripts ignored: s instead) on fresh names of
// rdb's server, and returns the first failed check, or nil.
func shareModelRun(ctx context.Context, rdb *redis.Client, name string, cfg config, s sscripts) (map[string]int, error) {
	r := &srun{
		cfg:     cfg,
		scripts: s,
		ctx:     ctx,
		rdb:     rdb,
		key:     "smodel:{" + name + "}",
		rnd:     rand.New(rand.NewPCG(cfg.seed, 0x85ebca6b)),
		stats:   map[string]int{},
	}
	r.other = r.key + ":other"
	r.keys = append(redisscript.ShareKeys(r.key), r.other, redisscript.FenceKey(r.other))
	r.permits = 1 + r.rnd.IntN(3)
	for i := range cfg.waiters {
		r.cs = append(r.cs, &sclient{id: i})
	}
	r.ps = rdb.Subscribe(ctx, redisscript.Channel(r.key), redisscript.Channel(r.other))
	defer r.ps.Close()
	if _, err := r.ps.Receive(ctx); err != nil {
		return r.stats, fmt.Errorf("subscribe: %w", err)
	}
	if _, err := r.ps.Receive(ctx); err != nil {
		return r.stats, fmt.Errorf("subscribe: %w", err)
	}
	for r.step = 1; r.step <= cfg.steps; r.step++ {
		if err := r.do(r.pick()); err != nil {
			return r.stats, err
		}
	}
	return r.stats, nil
}

func (r *srun) fail(check, format string, args ...any) *failure {
	return &failure{test: "TestShareModel", seed: r.cfg.seed, step: r.step, check: check, msg: fmt.Sprintf(format, args...), trace: r.trace}
}

// pick draws the next step among those that make sense for the clients as
// they are.
func (r *srun) pick() saction {
	var idles, waits, holds, shareHolds, active []*sclient
	for _, c := range r.cs {
		switch c.state {
		case idle:
			idles = append(idles, c)
		case waiting:
			waits = append(waits, c)
			active = append(active, c)
		case holding:
			holds = append(holds, c)
			active = append(active, c)
			if !c.exclusive() {
				shareHolds = append(shareHolds, c)
			}
		}
	}
	var weights [skinds]int
	if len(idles) > 0 {
		weights[sArrive] = 14
	}
	if len(waits) > 0 {
		weights[sRetry], weights[sGiveUp] = 20, 5
	}
	if len(holds) > 0 {
		weights[sRelease], weights[sResend] = 14, 4
	}
	if len(shareHolds) > 0 {
		weights[sExtend] = 8
	}
	if len(active) > 0 {
		weights[sCrash] = 3
	}
	weights[sStale], weights[sAdvance] = 3, 16
	total := 0
	for _, n := range weights {
		total += n
	}
	n := r.rnd.IntN(total)
	k := skind(0)
	for ; n >= weights[k]; k++ {
		n -= weights[k]
	}
	a := saction{kind: k, announce: r.rnd.IntN(2) == 0}
	one := func(cs []*sclient) *sclient { return cs[r.rnd.IntN(len(cs))] }
	switch k {
	case sArrive:
		c := one(idles)
		c.gen++
		c.token = fmt.Sprintf("c%d.%d", c.id, c.gen)
		switch p := r.rnd.IntN(20); {
		case p < 6:
			c.role, c.n = reader, 0
		case p < 13:
			c.role, c.n = permit, r.permits
			if r.rnd.IntN(8) == 0 {
				c.n = r.permits + 1 // disagrees: a mode mismatch while the others hold
			}
		case p < 17:
			c.role = writer
		default:
			c.role = multi
		}
		c.ttl = minTTL + r.rnd.Int64N(maxTTL-minTTL+1)
		c.patience = minPatience + r.rnd.Int64N(maxPatience-minPatience+1)
		c.fenced = r.rnd.IntN(2) == 0
		c.state = waiting
		a.c = c
	case sRetry, sGiveUp:
		a.c = one(waits)
	case sRelease, sResend:
		a.c = one(holds)
	case sExtend:
		a.c = one(shareHolds)
	case sCrash:
		a.c = one(active)
	case sStale:
		if len(r.old) > 0 && r.rnd.IntN(5) > 0 {
			a.token = r.old[r.rnd.IntN(len(r.old))]
		} else {
			a.token = fmt.Sprintf("never.%d", r.step)
		}
	case sAdvance:
		a.sleep = r.pause()
	}
	return a
}

// pause draws how long time advances: mostly a few ms; often until just
// past the next expiry the model knows of.
func (r *srun) pause() time.Duration {
	if n := r.rnd.IntN(10); n < 5 {
		return time.Duration(1+r.rnd.IntN(3)) * time.Millisecond
	} else if n < 9 {
		next := int64(-1)
		consider := func(t int64) {
			if t > r.now && (next < 0 || t < next) {
				next = t
			}
		}
		if r.m.holder != "" {
			consider(r.m.expiry.hi)
		}
		for _, s := range r.m.shares {
			consider(s.expiry.hi)
		}
		if r.m.writer != "" {
			consider(r.m.wexp.hi)
		}
		if next >= 0 {
			return time.Duration(min(next-r.now+1+r.rnd.Int64N(3), maxPatience)) * time.Millisecond
		}
	}
	return time.Duration(1+r.rnd.Int64N(maxPatience)) * time.Millisecond
}

// callsOf returns the script calls of a step.
func (r *srun) callsOf(a saction) []scall {
	c := a.c
	sk := r.keys[:5]
	channel := redisscript.Channel(r.key)
	announce := redisscript.Flag(a.announce)
	release := func(token string, second bool) scall {
		key := r.key
		if second {
			key = r.other
		}
		return scall{r.scripts.release, redisscript.Keys(key), []any{token, redisscript.Channel(key), announce, grace},
			func(m *smodel, ch *chooser, w span, o *soutcome) { m.release(ch, w, o, token, a.announce, second) }}
	}
	attempt := func() scall {
		switch c.role {
		case reader, permit:
			return scall{r.scripts.acquireShare, sk, []any{c.token, c.ttl, c.n, redisscript.Flag(c.fenced), grace},
				func(m *smodel, ch *chooser, w span, o *soutcome) {
					m.acquireShare(ch, w, o, c.token, c.ttl, c.n, c.fenced)
				}}
		case multi:
			return scall{r.scripts.acquireAll, redisscript.AllKeys([]string{r.key, r.other}), []any{c.token, c.ttl, redisscript.Flag(c.fenced), grace},
				func(m *smodel, ch *chooser, w span, o *soutcome) { m.acquireAll(ch, w, o, c.token, c.ttl, c.fenced) }}
		}
		if a.kind == sArrive { // a writer's first attempt: the plain set-if-absent
			if c.fenced {
				return scall{r.scripts.acquireFenced, sk[:2], []any{c.token, c.ttl, c.ttl + grace},
					func(m *smodel, ch *chooser, w span, o *soutcome) { m.acquire(ch, w, o, c.token, c.ttl, true) }}
			}
			return scall{r.scripts.acquire, sk[:1], []any{c.token, c.ttl},
				func(m *smodel, ch *chooser, w span, o *soutcome) { m.acquire(ch, w, o, c.token, c.ttl, false) }}
		}
		return scall{r.scripts.acquireWaiting, sk, []any{c.token, c.ttl, c.patience, redisscript.Flag(c.fenced), grace},
			func(m *smodel, ch *chooser, w span, o *soutcome) {
				m.acquireWaiting(ch, w, o, c.token, c.ttl, c.patience, c.fenced)
			}}
	}
	switch a.kind {
	case sArrive, sRetry, sResend:
		return []scall{attempt()}
	case sExtend:
		return []scall{{r.scripts.extendShare, sk, []any{c.token, c.ttl, redisscript.Flag(c.fenced), grace},
			func(m *smodel, ch *chooser, w span, o *soutcome) { m.extendShare(ch, w, o, c.token, c.ttl, c.fenced) }}}
	case sRelease:
		switch c.role {
		case reader, permit:
			return []scall{{r.scripts.releaseShare, sk, []any{c.token, channel, announce},
				func(m *smodel, ch *chooser, w span, o *soutcome) { m.releaseShare(ch, w, o, c.token, a.announce) }}}
		case multi:
			return []scall{release(c.token, false), release(c.token, true)}
		}
		return []scall{release(c.token, false)}
	case sStale:
		token := a.token
		return []scall{{r.scripts.releaseShare, sk, []any{token, channel, announce},
			func(m *smodel, ch *chooser, w span, o *soutcome) { m.releaseShare(ch, w, o, token, a.announce) }},
			release(token, false)}
	}
	return nil
}

// exec runs the calls and the snapshot after them in one pipeline, and
// reads the messages they published up to a marker.
func (r *srun) exec(calls []scall) (ssnapshot, error) {
	var s ssnapshot
	marker := markerPrefix + strconv.Itoa(r.step)
	pipe := r.rdb.Pipeline()
	tb := pipe.Do(r.ctx, "TIME")
	evs := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		evs[i] = pipe.Eval(r.ctx, c.script, c.keys, c.args...)
	}
	snap := pipe.Eval(r.ctx, shareSnapshotScript, r.keys)
	pipe.Publish(r.ctx, redisscript.Channel(r.key), marker)
	_, _ = pipe.Exec(r.ctx)
	t, err := tb.Slice()
	if err != nil {
		return s, fmt.Errorf("TIME: %w", err)
	}
	if s.tb, err = serverMs(t[0], t[1]); err != nil {
		return s, err
	}
	for i, ev := range evs {
		v, err := ev.Result()
		if err != nil {
			return s, fmt.Errorf("call %d: %w", i+1, err)
		}
		var reply []int64
		switch v := v.(type) {
		case int64:
			reply = []int64{v}
		case []any:
			for _, x := range v {
				n, ok := x.(int64)
				if !ok {
					return s, fmt.Errorf("call %d answered %v", i+1, v)
				}
				reply = append(reply, n)
			}
		default:
			return s, fmt.Errorf("call %d answered %v", i+1, v)
		}
		s.replies = append(s.replies, reply)
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
			return s, fmt.Errorf("the names' channels: %w", err)
		}
		if msg.Payload == marker {
			return s, nil
		}
		if strings.HasPrefix(msg.Payload, markerPrefix) {
			return s, fmt.Errorf("the names' channels: marker %q while waiting for %q", msg.Payload, marker)
		}
		s.messages = append(s.messages, msg.Payload)
	}
}

// read fills s from the snapshot script's answer.
func (s *ssnapshot) read(v []any) error {
	bad := func() error { return fmt.Errorf("snapshot answered %v", v) }
	if len(v) != 14 {
		return bad()
	}
	var err error
	if s.ts, err = serverMs(v[0], v[1]); err != nil {
		return err
	}
	var ok [12]bool
	s.value, ok[0] = v[2].(string)
	s.expiry, ok[1] = v[3].(int64)
	z, ok2 := v[4].([]any)
	h, ok3 := v[5].([]any)
	ok[2], ok[3] = ok2, ok3
	s.sExpiry, ok[4] = v[6].(int64)
	s.hExpiry, ok[5] = v[7].(int64)
	s.writer, ok[6] = v[8].(string)
	s.wExpiry, ok[7] = v[9].(int64)
	fence, ok8 := v[10].(string)
	s.other, ok[9] = v[11].(string)
	s.oExpiry, ok[10] = v[12].(int64)
	ofence, ok11 := v[13].(string)
	ok[8], ok[11] = ok8, ok11
	for _, b := range ok {
		if !b {
			return bad()
		}
	}
	if s.fence, err = strconv.ParseInt(fence, 10, 64); err != nil {
		return fmt.Errorf("the fence counter holds %q", fence)
	}
	if s.ofence, err = strconv.ParseInt(ofence, 10, 64); err != nil {
		return fmt.Errorf("the second fence counter holds %q", ofence)
	}
	if s.scores, err = parseScores(z); err != nil {
		return err
	}
	s.slots = parseSlots(h)
	return nil
}

// do runs one step and checks what it did.
func (r *srun) do(a saction) error {
	if a.kind == sAdvance {
		time.Sleep(a.sleep)
	}
	calls := r.callsOf(a)
	s, err := r.exec(calls)
	if r.t0 == 0 {
		r.t0 = s.tb
	}
	r.log(a, s)
	if err != nil {
		return r.fail(checkCall, "%v", err)
	}
	w := span{s.tb, s.ts}
	if f := r.invariants(a, s); f != nil {
		return f
	}
	if f := r.follow(a, calls, s, w); f != nil {
		return f
	}
	r.now = s.ts
	return nil
}

// follow runs the model on the step, each branch of its open questions in
// turn, and keeps the first branch that agrees with Redis.
func (r *srun) follow(a saction, calls []scall, s ssnapshot, w span) *failure {
	var first error
	ch := &chooser{}
	for branches := 1; ; branches++ {
		m := r.m.clone()
		var out soutcome
		for _, c := range calls {
			c.model(&m, ch, w, &out)
		}
		m.settle(ch, w) // expiries between the calls and the snapshot
		err := sagree(m, out, r.m.fence, r.m.ofence, s)
		if err == nil {
			m.adopt(s)
			r.count(a, m)
			r.m = m
			return nil
		}
		if first == nil {
			first = err
		}
		if !ch.next() || branches == 1<<12 {
			return r.fail(checkModel, "%v (%d branches of the model tried)", first, branches)
		}
	}
}

// count adds what the step did to the run's statistics.
func (r *srun) count(a saction, m smodel) {
	name := skindNames[a.kind]
	if a.c != nil {
		name += " " + roleNames[a.c.role]
	}
	r.stats[name]++
	if len(m.shares) > 1 {
		r.stats["steps with several shares"]++
	}
	if m.writer != "" && len(m.shares) > 0 {
		r.stats["steps with a writer waiting on shares"]++
	}
	if len(r.m.shares) > len(m.shares) && a.kind != sRelease {
		r.stats["shares expired"]++
	}
}

// invariants checks the step against the properties of the modes, from the
// replies and what the clients know, before the model does; it updates
// what the clients know.
func (r *srun) invariants(a saction, s ssnapshot) *failure {
	c := a.c
	drew := func(what string, fence int64) *failure {
		if fence <= r.lastFence {
			return r.fail(checkSFence, "%s drew fence %d, after fence %d", what, fence, r.lastFence)
		}
		r.lastFence = fence
		return nil
	}
	switch a.kind {
	case sArrive, sRetry, sResend:
		reply := s.replies[0]
		took := false
		switch c.role {
		case reader, permit:
			switch {
			case len(reply) == 3 && reply[0] == 1:
				took = true
				c.slot = int(reply[1])
				if c.fenced && c.state == waiting {
					if f := drew(c.token+"'s share", reply[2]); f != nil {
						return f
					}
				}
			case len(reply) == 3 && reply[0] == -1:
				c.state = idle // misconfigured: it gives up
				r.stats["mode mismatches"]++
			}
		case multi:
			if len(reply) == 3 && reply[0] == 1 {
				took = true
				if c.fenced && c.state == waiting && (reply[1] <= r.lastFence) {
					return r.fail(checkSFence, "%s took both names with fence %d, after fence %d", c.token, reply[1], r.lastFence)
				}
				if c.fenced {
					r.lastFence = max(r.lastFence, reply[1])
				}
			}
		default:
			if len(reply) == 1 && reply[0] > 0 {
				took = true
				if c.fenced && c.state == waiting {
					if f := drew(c.token+"'s exclusive lock", reply[0]); f != nil {
						return f
					}
				}
			}
		}
		if took {
			c.state, c.until = holding, s.tb+c.ttl
		}
	case sExtend:
		if reply := s.replies[0]; len(reply) == 1 && reply[0] > 0 {
			c.until = s.tb + c.ttl
			if c.fenced {
				if f := drew(c.token+"'s extend", reply[0]); f != nil {
					return f
				}
			}
		} else {
			c.state = idle // lost
			r.old = append(r.old, c.token)
		}
	case sRelease, sCrash:
		c.state = idle
		r.old = append(r.old, c.token)
	case sGiveUp:
		c.state = idle
	}

	// Those who count on their hold now: no exclusive holder beside
	// another holder; shares of one mode, at most n permits, in distinct
	// slots below n.
	var excl, shares []*sclient
	for _, x := range r.cs {
		// A key lives while the clock has not passed its expiry, a share
		// while its expiry is past the clock: a lease is valid before its
		// end, not at it.
		if x.state != holding || x.until < s.ts || (!x.exclusive() && x.until == s.ts) {
			continue
		}
		if x.exclusive() {
			excl = append(excl, x)
		} else {
			shares = append(shares, x)
		}
	}
	switch {
	case len(excl) > 1:
		return r.fail(checkOverlap, "%s and %s both hold the name exclusively (now %d)", excl[0].token, excl[1].token, s.ts)
	case len(excl) == 1 && len(shares) > 0:
		return r.fail(checkOverlap, "%s holds the name exclusively until %d while %s holds a share until %d (now %d)",
			excl[0].token, excl[0].until, shares[0].token, shares[0].until, s.ts)
	}
	slots := map[int]string{}
	for _, x := range shares {
		if x.n != shares[0].n {
			return r.fail(checkOverlap, "%s holds a share of n = %d beside %s of n = %d", x.token, x.n, shares[0].token, shares[0].n)
		}
		if x.n == 0 {
			continue
		}
		if x.slot < 0 || x.slot >= x.n {
			return r.fail(checkOverlap, "%s holds slot %d of %d permits", x.token, x.slot, x.n)
		}
		if y, ok := slots[x.slot]; ok {
			return r.fail(checkOverlap, "%s and %s both hold slot %d", x.token, y, x.slot)
		}
		slots[x.slot] = x.token
	}
	return nil
}

// log adds the step to the trace of the last steps.
func (r *srun) log(a saction, s ssnapshot) {
	what := skindNames[a.kind]
	switch {
	case a.c != nil:
		what += fmt.Sprintf(" %s %s", roleNames[a.c.role], a.c.token)
		if a.kind == sArrive {
			what += fmt.Sprintf(" (n %d, ttl %d, patience %d, fenced %v)", a.c.n, a.c.ttl, a.c.patience, a.c.fenced)
		}
	case a.token != "":
		what += " " + a.token
	case a.kind == sAdvance:
		what += " " + a.sleep.String()
	}
	name := "free"
	if s.value != "" {
		name = fmt.Sprintf("%s until +%d", s.value, s.expiry-r.t0)
	}
	var shares []string
	for token, score := range s.scores {
		shares = append(shares, fmt.Sprintf("%s(%s, +%d)", token, s.slots[token], score-r.t0))
	}
	slices.Sort(shares)
	writer := ""
	if s.writer != "" {
		writer = fmt.Sprintf(" | writer %s until +%d", s.writer, s.wExpiry-r.t0)
	}
	r.trace = append(r.trace, fmt.Sprintf("%4d +%5dms %-70s → %v %q | name %s | shares %v%s | fence %d | other %q",
		r.step, s.tb-r.t0, what, s.replies, s.messages, name, shares, writer, s.fence, s.other))
	if len(r.trace) > traceLen {
		r.trace = slices.Delete(r.trace, 0, len(r.trace)-traceLen)
	}
}
