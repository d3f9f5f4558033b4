package redisscript_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reqlock/reqlock/internal/redisscript"
)

// This file is a reference model of shares (share.lua and the scripts
// that use it: acquire_share.lua, release_share.lua, extend_share.lua,
// acquire_waiting.lua), of the exclusive scripts beside them (acquire.lua,
// acquire_fenced.lua, release.lua) and of acquire_all.lua, on one name and
// a second name that only acquire_all takes with it: what each call must
// do, written from the contract of lockstore.Sharer and
// lockstore.MultiAcquirer rather than from the scripts' code.
// model_shares_run_test.go drives the real scripts and compares. Times are
// spans, and open questions go to a chooser, as in model_test.go.

// sshare is a share as the store keeps it: live until its expiry, kept
// until a call prunes it or the name's keys expire with the latest share.
type sshare struct {
	token  string
	expiry span
	slot   int
	fence  int64 // the fence it drew (0 without); drawnNow until adopted
}

// drawnNow stands, in a predicted reply or share, for the value of the
// name's fence counter after the call; otherNow for the second name's.
const (
	drawnNow = -1 << 62
	otherNow = -1<<62 + 1
)

// smodel is the state of the name and of the second name.
type smodel struct {
	holder string // the exclusive holder of the name, "" when none
	expiry span
	shares []sshare // the shares the store keeps, in no order
	n      int      // their permits (0: shared holds), while there are shares
	writer string   // the exclusive waiter's record, "" when none
	wexp   span
	fence  int64 // the name's fence counter

	other  string // the holder of the second name
	oexp   span
	ofence int64
}

func (m smodel) clone() smodel {
	m.shares = slices.Clone(m.shares)
	return m
}

// last returns the expiry of the latest share: the marker's and the share
// keys' expiry.
func (m *smodel) last() span {
	l := m.shares[0].expiry
	for _, s := range m.shares[1:] {
		l = later(l, s.expiry)
	}
	return l
}

func (m *smodel) find(token string) int {
	return slices.IndexFunc(m.shares, func(s sshare) bool { return s.token == token })
}

// settle applies the expiries of the keys at a moment of w.
func (m *smodel) settle(c *chooser, w span) {
	if m.holder != "" && c.gone(m.expiry, w) {
		m.holder = ""
	}
	if len(m.shares) > 0 && c.gone(m.last(), w) {
		m.shares = nil
	}
	if m.writer != "" && c.gone(m.wexp, w) {
		m.writer = ""
	}
	if m.other != "" && c.gone(m.oexp, w) {
		m.other = ""
	}
}

// prune drops the shares dead at a moment of w: a share lives while its
// expiry is past the clock.
func (m *smodel) prune(c *chooser, w span) {
	m.shares = slices.DeleteFunc(m.shares, func(s sshare) bool { return c.dead(s.expiry, w) })
}

// soutcome is what a step's calls answer, in order, and do to the fence
// counters and the channel.
type soutcome struct {
	replies [][]int64
	drew    bool // the name's counter went up
	odrew   bool // the second name's
	notices int  // release notices published
}

func (o *soutcome) reply(r ...int64) { o.replies = append(o.replies, r) }

// acquireShare takes a share for token, unless the name is held
// exclusively, a writer waits, or n permits are live; a re-sent attempt
// keeps its share; another mode is a mismatch.
func (m *smodel) acquireShare(c *chooser, w span, o *soutcome, token string, ttl int64, n int, fenced bool) {
	m.settle(c, w)
	if m.holder != "" {
		o.reply(0, 0, 0)
		return
	}
	if len(m.shares) > 0 {
		m.prune(c, w)
	}
	if len(m.shares) > 0 && m.n != n {
		o.reply(-1, int64(m.n), 0)
		return
	}
	if i := m.find(token); i >= 0 {
		s := &m.shares[i]
		s.expiry = w.plus(ttl)
		m.n = n
		switch {
		case !fenced:
			o.reply(1, int64(s.slot), 0)
		case s.fence == 0:
			s.fence, o.drew = drawnNow, true
			o.reply(1, int64(s.slot), drawnNow)
		default:
			o.reply(1, int64(s.slot), s.fence)
		}
		return
	}
	if m.writer != "" || (n > 0 && len(m.shares) >= n) {
		o.reply(0, 0, 0)
		return
	}
	slot := 0
	if n > 0 {
		for slices.ContainsFunc(m.shares, func(s sshare) bool { return s.slot == slot }) {
			slot++
		}
	}
	s := sshare{token: token, expiry: w.plus(ttl), slot: slot}
	if fenced {
		s.fence, o.drew = drawnNow, true
	}
	m.shares, m.n = append(m.shares, s), n
	o.reply(1, int64(slot), s.fence)
}

// releaseShare removes token's live share; the last one out frees the
// name, and publishes a notice when asked to.
func (m *smodel) releaseShare(c *chooser, w span, o *soutcome, token string, announce bool) {
	m.settle(c, w)
	if len(m.shares) == 0 {
		o.reply(0)
		return
	}
	m.prune(c, w)
	i := m.find(token)
	if i < 0 {
		o.reply(0)
		return
	}
	m.shares = slices.Delete(m.shares, i, i+1)
	if len(m.shares) == 0 && announce {
		o.notices++
	}
	o.reply(1)
}

// extendShare renews token's live share, with a new fence when fenced.
func (m *smodel) extendShare(c *chooser, w span, o *soutcome, token string, ttl int64, fenced bool) {
	m.settle(c, w)
	if len(m.shares) == 0 {
		o.reply(0)
		return
	}
	m.prune(c, w)
	i := m.find(token)
	if i < 0 {
		o.reply(0)
		return
	}
	m.shares[i].expiry = w.plus(ttl)
	if !fenced {
		o.reply(1)
		return
	}
	m.shares[i].fence, o.drew = drawnNow, true
	o.reply(drawnNow)
}

// acquire is the exclusive set-if-absent (acquire.lua, acquire_fenced.lua):
// it takes a free name (no holder, no share; a writer's record does not
// stop it), and a re-sent attempt keeps it.
func (m *smodel) acquire(c *chooser, w span, o *soutcome, token string, ttl int64, fenced bool) bool {
	m.settle(c, w)
	switch {
	case m.holder == "" && len(m.shares) == 0:
		m.holder, m.expiry = token, w.plus(ttl)
		o.drew = o.drew || fenced
	case m.holder == token:
		m.expiry = w.plus(ttl)
		o.drew = o.drew || (fenced && m.fence == 0)
	default:
		o.reply(0)
		return false
	}
	if fenced {
		o.reply(drawnNow)
	} else {
		o.reply(1)
	}
	return true
}

// acquireWaiting is acquire for a writer: it clears the record when it
// takes the name, and records the writer for its patience when shares
// hold the name.
func (m *smodel) acquireWaiting(c *chooser, w span, o *soutcome, token string, ttl, patience int64, fenced bool) {
	if m.acquire(c, w, o, token, ttl, fenced) {
		m.writer = ""
		return
	}
	if len(m.shares) > 0 {
		m.writer, m.wexp = token, w.plus(patience)
	}
}

// release is the compare-and-delete of the name (release.lua; second:
// of the second name).
func (m *smodel) release(c *chooser, w span, o *soutcome, token string, announce, second bool) {
	m.settle(c, w)
	holder := &m.holder
	if second {
		holder = &m.other
	}
	if *holder != token {
		o.reply(0)
		return
	}
	*holder = ""
	if announce {
		o.notices++
	}
	o.reply(1)
}

// acquireAll takes both names if each is free or the token's, with a fence
// each when fenced; else nothing.
func (m *smodel) acquireAll(c *chooser, w span, o *soutcome, token string, ttl int64, fenced bool) {
	m.settle(c, w)
	if (m.holder != "" && m.holder != token) || len(m.shares) > 0 || (m.other != "" && m.other != token) {
		o.reply(0)
		return
	}
	f, of := int64(0), int64(0)
	if fenced {
		f, of = drawnNow, otherNow
		o.drew = o.drew || m.holder != token || m.fence == 0
		o.odrew = o.odrew || m.other != token || m.ofence == 0
	}
	m.holder, m.expiry = token, w.plus(ttl)
	m.other, m.oexp = token, w.plus(ttl)
	o.reply(1, f, of)
}

// ssnapshot is the state of the two names as the snapshot script read it
// at one instant (the server's clock ts), and what the step's calls
// answered and published.
type ssnapshot struct {
	tb, ts   int64
	replies  [][]int64
	value    string // the name's value: a token, a marker or ""
	expiry   int64  // PEXPIRETIME of the name
	scores   map[string]int64
	slots    map[string]string
	sExpiry  int64 // PEXPIRETIME of the shares and of their slots
	hExpiry  int64
	writer   string
	wExpiry  int64
	fence    int64
	other    string
	oExpiry  int64
	ofence   int64
	messages []string
}

// resolve substitutes the fence counters for drawnNow and otherNow.
func (s *ssnapshot) resolve(v int64) int64 {
	switch v {
	case drawnNow:
		return s.fence
	case otherNow:
		return s.ofence
	}
	return v
}

// sagree reports how the state Redis shows differs from the model's
// prediction m and out, or nil. fence and ofence are the counters before
// the step.
func sagree(m smodel, out soutcome, fence, ofence int64, s ssnapshot) error {
	if len(s.replies) != len(out.replies) {
		return fmt.Errorf("the calls answered %v, want %d replies", s.replies, len(out.replies))
	}
	for i, want := range out.replies {
		got := s.replies[i]
		ok := len(got) == len(want)
		for j := 0; ok && j < len(want); j++ {
			ok = got[j] == s.resolve(want[j])
		}
		if !ok {
			w := make([]int64, len(want))
			for j, v := range want {
				w[j] = s.resolve(v)
			}
			return fmt.Errorf("call %d answered %v, want %v", i+1, got, w)
		}
	}
	for _, c := range []struct {
		name          string
		drew          bool
		before, after int64
	}{{"the name's", out.drew, fence, s.fence}, {"the second name's", out.odrew, ofence, s.ofence}} {
		switch {
		case c.drew && c.after <= c.before:
			return fmt.Errorf("a fence was drawn, but %s counter went from %d to %d", c.name, c.before, c.after)
		case !c.drew && c.after != c.before:
			return fmt.Errorf("no fence was drawn, but %s counter went from %d to %d", c.name, c.before, c.after)
		}
	}
	switch {
	case m.holder != "":
		if s.value != m.holder || !m.expiry.has(s.expiry) {
			return fmt.Errorf("the name holds %q until %d, want %q until %v", s.value, s.expiry, m.holder, m.expiry)
		}
	case len(m.shares) > 0:
		if want := redisscript.MarkerPrefix + strconv.Itoa(m.n); s.value != want {
			return fmt.Errorf("the name holds %q, want the marker %q", s.value, want)
		}
	case s.value != "":
		return fmt.Errorf("the name holds %q (until %d), want it free", s.value, s.expiry)
	}
	if len(s.scores) != len(m.shares) || len(s.slots) != len(m.shares) {
		return fmt.Errorf("the shares are %v with slots %v, want those of %v", s.scores, s.slots, m.tokens())
	}
	if len(m.shares) == 0 {
		if s.sExpiry != -2 || s.hExpiry != -2 {
			return fmt.Errorf("no share is left, but their keys are (PEXPIRETIME %d, %d)", s.sExpiry, s.hExpiry)
		}
	} else {
		latest := int64(0)
		for _, sh := range m.shares {
			score, ok := s.scores[sh.token]
			if !ok || !sh.expiry.has(score) {
				return fmt.Errorf("the share of %s expires at %d (kept: %v), want %v", sh.token, score, ok, sh.expiry)
			}
			latest = max(latest, score)
			if want := fmt.Sprintf("%d %d", sh.slot, s.resolve(sh.fence)); s.slots[sh.token] != want {
				return fmt.Errorf("the share of %s has slot and fence %q, want %q", sh.token, s.slots[sh.token], want)
			}
		}
		if s.expiry != latest || s.sExpiry != latest || s.hExpiry != latest {
			return fmt.Errorf("the marker and the shares' keys expire at %d, %d, %d; want all at the latest share's expiry %d",
				s.expiry, s.sExpiry, s.hExpiry, latest)
		}
	}
	if s.writer != m.writer || (m.writer != "" && !m.wexp.has(s.wExpiry)) {
		return fmt.Errorf("the writer's record is %q until %d, want %q until %v", s.writer, s.wExpiry, m.writer, m.wexp)
	}
	if s.other != m.other || (m.other != "" && !m.oexp.has(s.oExpiry)) {
		return fmt.Errorf("the second name holds %q until %d, want %q until %v", s.other, s.oExpiry, m.other, m.oexp)
	}
	notices := 0
	for _, p := range s.messages {
		if p != "" {
			return fmt.Errorf("published %q, want release notices (empty) only", p)
		}
		notices++
	}
	if notices != out.notices {
		return fmt.Errorf("published %d release notices, want %d", notices, out.notices)
	}
	return nil
}

func (m *smodel) tokens() []string {
	t := make([]string, len(m.shares))
	for i, s := range m.shares {
		t[i] = s.token
	}
	return t
}

// adopt replaces the model's spans and pending fences by what Redis shows,
// once they agree.
func (m *smodel) adopt(s ssnapshot) {
	if m.holder != "" {
		m.expiry = at(s.expiry)
	}
	for i := range m.shares {
		sh := &m.shares[i]
		sh.expiry = at(s.scores[sh.token])
		sh.fence = s.resolve(sh.fence)
	}
	if m.writer != "" {
		m.wexp = at(s.wExpiry)
	}
	if m.other != "" {
		m.oexp = at(s.oExpiry)
	}
	m.fence, m.ofence = s.fence, s.ofence
}

// parseSlots reads HGETALL of the slots into a map.
func parseSlots(h []any) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(h); i += 2 {
		m[fmt.Sprint(h[i])] = fmt.Sprint(h[i+1])
	}
	return m
}

// parseScores reads ZRANGE ... WITHSCORES into a map.
func parseScores(z []any) (map[string]int64, error) {
	m := map[string]int64{}
	for i := 0; i+1 < len(z); i += 2 {
		v, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(z[i+1])), 64)
		if err != nil {
			return nil, fmt.Errorf("score %v: %w", z[i+1], err)
		}
		m[fmt.Sprint(z[i])] = int64(v)
	}
	return m, nil
}
