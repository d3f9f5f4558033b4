package redisscript_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file is a reference model of the fair queue (queue.lua, enqueue.lua,
// poll.lua, release.lua, dequeue.lua): what each call must do to the lock,
// its queue and its fence counter, written from the scripts' contract
// rather than from their code. model_run_test.go drives the real scripts and compares.
//
// Times are the server's clock in ms. The model never reads a clock: a call
// is known to run at some moment of a window (the server's TIME before it,
// and the TIME read in the snapshot after it), so every deadline and expiry
// it predicts is a span, and a question that the window cannot answer (did
// the lock expire before the call?) is asked of a chooser, which explores
// both answers. The driver keeps the branch that matches what Redis did and
// replaces the model's spans by the values it read.

// slack is how far, in ms, a time read from the server may sit outside the
// span the model predicts (rounding of the server's clock to ms).
const slack = 1

// span is a closed range of server times (or durations) in ms.
type span struct{ lo, hi int64 }

func at(v int64) span { return span{v, v} }

func (s span) plus(d int64) span { return span{s.lo + d, s.hi + d} }

func (s span) has(v int64) bool { return s.lo-slack <= v && v <= s.hi+slack }

func (s span) String() string {
	if s.lo == s.hi {
		return strconv.FormatInt(s.lo, 10)
	}
	return fmt.Sprintf("[%d, %d]", s.lo, s.hi)
}

func later(a, b span) span { return span{max(a.lo, b.lo), max(a.hi, b.hi)} }

// chooser answers the questions the model cannot settle from the time
// window alone, in the order they are asked, and enumerates the answers:
// each run of the model takes the next path (depth first), until next
// reports that every path was taken.
type chooser struct {
	path []bool
	pos  int
}

func (c *chooser) choose() bool {
	if c.pos == len(c.path) {
		c.path = append(c.path, false)
	}
	b := c.path[c.pos]
	c.pos++
	return b
}

// next moves to the next path, and reports false when there is none.
func (c *chooser) next() bool {
	c.path = c.path[:c.pos]
	for len(c.path) > 0 && c.path[len(c.path)-1] {
		c.path = c.path[:len(c.path)-1]
	}
	if len(c.path) == 0 {
		return false
	}
	c.path[len(c.path)-1] = true
	c.pos = 0
	return true
}

// gone reports whether a key that expires at e is gone at a moment of w:
// Redis expires a key once its clock is past the expiry.
func (c *chooser) gone(e, w span) bool {
	switch {
	case e.hi+slack < w.lo:
		return true
	case e.lo-slack >= w.hi:
		return false
	}
	return c.choose()
}

// dead reports whether an entry with deadline d is dead at a moment of w:
// queue.lua keeps an entry while its deadline is past the clock.
func (c *chooser) dead(d, w span) bool {
	switch {
	case d.hi+slack <= w.lo:
		return true
	case d.lo-slack > w.hi:
		return false
	}
	return c.choose()
}

// aliveAt reports whether an entry with deadline d is alive at every moment
// of w, without a doubt.
func aliveAt(d, w span) bool { return d.lo-slack > w.hi }

// entry is a waiter's place in the queue, with what it asked for.
type entry struct {
	token         string
	deadline      span // the entry is dead from this moment on
	ttl, patience int64
	fenced        bool
}

// model is the state of one lock name.
type model struct {
	holder string // "" when the lock is free
	expiry span   // the lock's expiry, while held
	fence  int64  // the fence counter (0 before the first draw)
	queue  []entry
	keys   span // the expiry of the queue's keys, while the queue has entries
}

func (m model) clone() model {
	m.queue = slices.Clone(m.queue)
	return m
}

func (m *model) index(token string) int {
	return slices.IndexFunc(m.queue, func(e entry) bool { return e.token == token })
}

func (m *model) remove(token string) {
	if i := m.index(token); i >= 0 {
		m.queue = slices.Delete(m.queue, i, i+1)
	}
}

func (m *model) tokens() []string {
	t := make([]string, len(m.queue))
	for i, e := range m.queue {
		t[i] = e.token
	}
	return t
}

// message is a message the model expects on the name's channel: a release
// notice (WithNotify), or a grant "token fence ttl".
type message struct {
	notice bool
	token  string
	fenced bool  // the fence is the counter after the call; 0 otherwise
	ttl    int64 // ms
}

func (g message) String() string {
	if g.notice {
		return "notice"
	}
	f := "0"
	if g.fenced {
		f = "fence"
	}
	return fmt.Sprintf("grant %s %s %d", g.token, f, g.ttl)
}

// outcome is what a call answers and publishes.
type outcome struct {
	ok     bool // holds (enqueue, poll), or released (release, dequeue)
	index  int  // poll: the holder's place among the call's waiters, from 1
	fenced bool // enqueue, poll: the answer carries the counter as its fence
	ttl    span // enqueue, poll: the TTL answered, when ok
	drew   bool // a fence was drawn: the counter went up
	msgs   []message
}

// settle applies the expiries of the lock and of the queue's keys at a
// moment of w.
func (m *model) settle(c *chooser, w span) {
	if m.holder != "" && c.gone(m.expiry, w) {
		m.holder = ""
	}
	if len(m.queue) > 0 && c.gone(m.keys, w) {
		m.queue = nil
	}
}

// head drops the dead entries at the head of the queue and returns the
// first live one, if any.
func (m *model) head(c *chooser, w span) (entry, bool) {
	for len(m.queue) > 0 {
		e := m.queue[0]
		if !c.dead(e.deadline, w) {
			return e, true
		}
		m.queue = m.queue[1:]
	}
	return entry{}, false
}

// grant gives the free lock to e: for the smaller of its TTL and its
// patience, with a fence if it asked for one, and tells it.
func (m *model) grant(e entry, w span, out *outcome) {
	ttl := min(e.ttl, e.patience)
	m.holder, m.expiry = e.token, w.plus(ttl)
	out.drew = out.drew || e.fenced
	m.remove(e.token)
	out.msgs = append(out.msgs, message{token: e.token, fenced: e.fenced, ttl: ttl})
}

// enqueue is a waiter's call (its first, or a poll): it gets the lock it was
// granted; it takes a free lock when no live waiter is ahead of it; else it
// waits in its place (at the tail if it has none), renewed for its patience,
// and a free lock goes to the first live waiter.
func (m *model) enqueue(c *chooser, w span, e entry) outcome {
	var out outcome
	m.settle(c, w)
	if m.holder == e.token {
		m.remove(e.token)
		out.ok, out.fenced = true, e.fenced
		out.drew = e.fenced && m.fence == 0
		out.ttl = span{max(m.expiry.lo-w.hi, 0), m.expiry.hi - w.lo}
		return out
	}
	if m.holder == "" {
		first, ok := m.head(c, w)
		if !ok || first.token == e.token {
			m.holder, m.expiry = e.token, w.plus(e.ttl)
			m.remove(e.token)
			out.ok, out.fenced, out.drew, out.ttl = true, e.fenced, e.fenced, at(e.ttl)
			return out
		}
		m.grant(first, w, &out)
	}
	e.deadline = w.plus(e.patience)
	keep := w.plus(2 * e.patience)
	if len(m.queue) == 0 {
		m.keys = keep
	} else {
		m.keys = later(m.keys, keep)
	}
	if i := m.index(e.token); i >= 0 {
		m.queue[i] = e
	} else {
		m.queue = append(m.queue, e)
	}
	return out
}

// poll is one process's poll for its waiters es, in the call's order, who
// share patience and fenced: each but the holder renews its place (at the
// tail if it has none), a free lock goes to the first live waiter, and the
// answer is the place in es of the one that holds the lock, if any.
func (m *model) poll(c *chooser, w span, patience int64, fenced bool, es []entry) outcome {
	var out outcome
	m.settle(c, w)
	holder := m.holder
	empty := len(m.queue) == 0
	for _, e := range es {
		if e.token == holder {
			continue
		}
		e.patience, e.fenced, e.deadline = patience, fenced, w.plus(patience)
		if i := m.index(e.token); i >= 0 {
			m.queue[i] = e
		} else {
			m.queue = append(m.queue, e)
		}
	}
	if holder == "" {
		if first, ok := m.head(c, w); ok {
			m.grant(first, w, &out)
			holder = first.token
		}
	}
	if len(m.queue) > 0 {
		keep := w.plus(2 * patience)
		if empty {
			m.keys = keep
		} else {
			m.keys = later(m.keys, keep)
		}
	}
	for i, e := range es {
		if e.token == holder {
			m.remove(holder)
			out.ok, out.index, out.fenced = true, i+1, fenced
			out.drew = out.drew || (fenced && m.fence == 0)
			out.ttl = span{max(m.expiry.lo-w.hi, 0), m.expiry.hi - w.lo}
			break
		}
	}
	return out
}

// release frees the lock if token holds it, and grants it to the first live
// waiter, or publishes a notice when asked to. A token that does not hold
// the lock loses its place in the queue (the undo of a waiter that left).
func (m *model) release(c *chooser, w span, token string, announce bool) outcome {
	var out outcome
	m.settle(c, w)
	if m.holder != token {
		m.remove(token)
		return out
	}
	m.holder, out.ok = "", true
	if first, ok := m.head(c, w); ok {
		m.grant(first, w, &out)
		return out
	}
	if announce {
		out.msgs = append(out.msgs, message{notice: true})
	}
	return out
}

// dequeue takes token out of the queue; a lock granted to it is freed and
// granted on.
func (m *model) dequeue(c *chooser, w span, token string) outcome {
	var out outcome
	m.settle(c, w)
	m.remove(token)
	if m.holder != token {
		return out
	}
	m.holder, out.ok = "", true
	if first, ok := m.head(c, w); ok {
		m.grant(first, w, &out)
	}
	return out
}

// snapshot is the state of a name as the snapshot script read it, at one
// instant (the server's clock ts), and what the call before it answered and
// published.
type snapshot struct {
	tb, ts  int64   // server ms before the call, and at the snapshot after it
	reply   []int64 // the call's answer
	holder  string
	expiry  int64 // PEXPIRETIME of the lock (-2: no key)
	queue   []string
	entries map[string]string
	qExpiry int64 // PEXPIRETIME of the queue and of the entries
	wExpiry int64
	fence   int64
	msgs    []string // payloads published on the channel by the call
}

// parsedEntry reads an entry of the hash: "deadline ttl fenced patience".
func parsedEntry(v string) (e entry, err error) {
	f := strings.Fields(v)
	if len(f) != 4 || (f[2] != "0" && f[2] != "1") {
		return e, fmt.Errorf("entry %q is not \"deadline ttl fenced patience\"", v)
	}
	var n [3]int64
	for i, s := range []string{f[0], f[1], f[3]} {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return e, fmt.Errorf("entry %q is not \"deadline ttl fenced patience\"", v)
		}
	}
	return entry{deadline: at(n[0]), ttl: n[1], fenced: f[2] == "1", patience: n[2]}, nil
}

// parsedGrant reads a grant message "token fence ttl".
func parsedGrant(p string) (token string, fence, ttl int64, err error) {
	f := strings.Fields(p)
	if len(f) == 3 {
		fence, err1 := strconv.ParseInt(f[1], 10, 64)
		ttl, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil {
			return f[0], fence, ttl, nil
		}
	}
	return "", 0, 0, fmt.Errorf("grant message %q is not \"token fence ttl\" (integers)", p)
}

// agree reports how the state Redis shows differs from the model's
// prediction m and out of the call (op: "enqueue", "poll", "release",
// "dequeue" or "" for none), or nil if it does not. fence is the counter
// before the call.
func agree(op string, m model, out outcome, fence int64, s snapshot) error {
	switch op {
	case "enqueue", "poll":
		want := []int64{0, 0, 0}
		if out.ok {
			want[0] = 1
			if op == "poll" {
				want[0] = int64(out.index)
			}
			if out.fenced {
				want[1] = s.fence
			}
		}
		if len(s.reply) != 3 || s.reply[0] != want[0] || s.reply[1] != want[1] ||
			(out.ok && !out.ttl.has(s.reply[2])) || (!out.ok && s.reply[2] != 0) {
			return fmt.Errorf("%s answered %v, want [%d %d %v]", op, s.reply, want[0], want[1], out.ttl)
		}
	case "release", "dequeue":
		want := int64(0)
		if out.ok {
			want = 1
		}
		if len(s.reply) != 1 || s.reply[0] != want {
			return fmt.Errorf("%s answered %v, want %d", op, s.reply, want)
		}
	}
	switch {
	case out.drew && s.fence <= fence:
		return fmt.Errorf("a fence was drawn, but the counter went from %d to %d", fence, s.fence)
	case !out.drew && s.fence != fence:
		return fmt.Errorf("no fence was drawn, but the counter went from %d to %d", fence, s.fence)
	}
	if s.holder != m.holder {
		return fmt.Errorf("the lock holds %q, want %q", s.holder, m.holder)
	}
	if m.holder != "" && !m.expiry.has(s.expiry) {
		return fmt.Errorf("the lock expires at %d, want %v", s.expiry, m.expiry)
	}
	if !slices.Equal(s.queue, m.tokens()) {
		return fmt.Errorf("the queue is %v, want %v", s.queue, m.tokens())
	}
	if len(s.entries) != len(m.queue) {
		return fmt.Errorf("the entries are %v, want those of %v", s.entries, m.tokens())
	}
	for _, e := range m.queue {
		got, err := parsedEntry(s.entries[e.token])
		if err != nil {
			return fmt.Errorf("%s: %v", e.token, err)
		}
		if got.ttl != e.ttl || got.patience != e.patience || got.fenced != e.fenced || !e.deadline.has(got.deadline.lo) {
			return fmt.Errorf("the entry of %s is %q, want deadline %v, ttl %d, fenced %v, patience %d",
				e.token, s.entries[e.token], e.deadline, e.ttl, e.fenced, e.patience)
		}
	}
	if len(m.queue) == 0 {
		if s.qExpiry != -2 || s.wExpiry != -2 {
			return fmt.Errorf("the queue is empty, but its keys are left (PEXPIRETIME %d, %d)", s.qExpiry, s.wExpiry)
		}
	} else if !m.keys.has(s.qExpiry) || !m.keys.has(s.wExpiry) {
		return fmt.Errorf("the queue's keys expire at %d and %d, want %v", s.qExpiry, s.wExpiry, m.keys)
	}
	if len(s.msgs) != len(out.msgs) {
		return fmt.Errorf("published %q, want %v", s.msgs, out.msgs)
	}
	for i, g := range out.msgs {
		p := s.msgs[i]
		if g.notice {
			if p != "" {
				return fmt.Errorf("published %q, want a release notice (empty)", p)
			}
			continue
		}
		token, f, ttl, err := parsedGrant(p)
		if err != nil {
			return err
		}
		want := int64(0)
		if g.fenced {
			want = s.fence
		}
		if token != g.token || f != want || ttl != g.ttl {
			return fmt.Errorf("published %q, want \"%s %d %d\"", p, g.token, want, g.ttl)
		}
	}
	return nil
}

// adopt replaces the model's spans by the values Redis shows, once they
// agree.
func (m *model) adopt(s snapshot) {
	if m.holder != "" {
		m.expiry = at(s.expiry)
	}
	m.fence = s.fence
	for i, e := range m.queue {
		got, _ := parsedEntry(s.entries[e.token])
		m.queue[i].deadline = got.deadline
	}
	if len(m.queue) > 0 {
		m.keys = span{min(s.qExpiry, s.wExpiry), max(s.qExpiry, s.wExpiry)}
	}
}
