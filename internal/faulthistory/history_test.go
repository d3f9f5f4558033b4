package faulthistory

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// record is one line a worker writes on its history pipe. Times are Unix
// nanoseconds of the machine's clock, which every process shares.
type record struct {
	Kind string `json:"k"` // "acq", "write", "rel" or "end"
	Proc int    `json:"p"`
	G    int    `json:"g"`
	Seq  int    `json:"s"`
	W    int    `json:"w,omitempty"` // write: its index in the section

	Called int64  `json:"called,omitempty"` // acq: when Acquire was called
	At     int64  `json:"at,omitempty"`     // acq: when Acquire returned; rel: when Release was called
	Fence  int64  `json:"fence,omitempty"`  // acq: Lease.Fence
	Token  string `json:"token,omitempty"`  // acq: Lease.Token
	Valid  int64  `json:"valid,omitempty"`  // acq, rel: Lease.ValidUntil

	Check        int64  `json:"check,omitempty"` // write: when Done was checked
	DoneAtCheck  bool   `json:"dc,omitempty"`    // write: Done was closed at the check
	ValidAtCheck int64  `json:"vc,omitempty"`    // write: Lease.ValidUntil at the check
	Sent         int64  `json:"sent,omitempty"`  // write: when the write was sent
	DoneAtSend   bool   `json:"ds,omitempty"`    // write: Done was closed when it was sent
	Accepted     bool   `json:"ok,omitempty"`    // write: the resource accepted it
	Err          string `json:"err,omitempty"`   // write: the resource's error; rel: Release's; end: acquire errors of kind "other"

	Lost   bool           `json:"lost,omitempty"`   // rel: Lease.Lost before Release
	Errors map[string]int `json:"errors,omitempty"` // end: failed acquires by kind
}

// id names a critical section: process, goroutine, sequence number.
type id struct{ proc, g, seq int }

func (i id) String() string { return fmt.Sprintf("%d.%d.%d", i.proc, i.g, i.seq) }

// parseID reads an id written by String.
func parseID(s string) (id, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return id{}, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return id{}, false
		}
		n[i] = v
	}
	return id{n[0], n[1], n[2]}, true
}

// section is one critical section, built from its records.
type section struct {
	id       id
	called   int64 // Acquire called
	sent     int64 // the acquiring command sent (see add)
	acquired int64 // Acquire returned
	released int64 // Release called; math.MaxInt64 when never
	valid    int64 // ValidUntil, as last seen
	fence    int64
	token    string
	writes   []*write
}

// letGo bounds how long after its validity ran out a holder that was not
// frozen records its release: Done closes at the validity, and the section
// skips its writes and releases. A goroutine woken late on a busy machine
// takes a few hundred milliseconds at worst; a holder later than this did
// not see its lease end.
const letGo = time.Second

// wroteAfter reports whether the section sent a write at or after t.
func (s *section) wroteAfter(t int64) bool {
	for _, w := range s.writes {
		if w.sent != 0 && w.sent >= t {
			return true
		}
	}
	return false
}

// validEnd is when the section stopped being entitled to the lock: its
// release or its validity, whichever came first.
func (s *section) validEnd() int64 { return min(s.released, s.valid) }

// write is one write to the resource, or one skipped because Done was closed
// at its check (sent == 0).
type write struct {
	sec          *section
	check        int64
	doneAtCheck  bool
	validAtCheck int64
	sent         int64
	doneAtSend   bool
	accepted     bool
	err          string
}

// Fault kinds.
const (
	holderFreeze = "holder frozen (SIGSTOP) past the TTL"
	redisFreeze  = "Redis frozen (SIGSTOP) past the TTL"
	blackhole    = "a holder's link black-holed past the TTL"
	restart      = "Redis killed (SIGKILL), restarted empty"
	flushall     = "FLUSHALL"
)

// faultKinds lists the kinds in the order of the table.
var faultKinds = []string{holderFreeze, redisFreeze, blackhole, restart, flushall}

// fault is one injected fault, from its start to when it healed.
type fault struct {
	kind       string
	proc       int // the worker process it hit; -1 for the store's faults
	start, end int64
}

// stall reports whether the fault stalls something that later resumes (a
// process, the store, a link), after which an orphan lock may be left.
func (f fault) stall() bool {
	return f.kind == holderFreeze || f.kind == redisFreeze || f.kind == blackhole
}

// reset reports whether the fault makes the store forget its locks.
func (f fault) reset() bool { return f.kind == restart || f.kind == flushall }

// sample is the lock's key as the parent read it at one time: the token
// it held, or "" when it was absent.
type sample struct {
	at    int64
	token string
}

// history is what a run recorded.
type history struct {
	samples     []sample // the lock's key, read every 10 ms for a while after each stall healed
	sections    map[id]*section
	order       []string // the resource's log: writes in the order it ran them
	faults      []fault
	errors      map[string]int // failed acquires by kind
	otherErrors []string       // what the failed acquires of kind "other" said
	start       int64
	end         int64
	ttl         time.Duration
}

func newHistory() *history {
	return &history{sections: map[id]*section{}, errors: map[string]int{}}
}

// add takes one record into the history.
func (h *history) add(r record) error {
	i := id{r.Proc, r.G, r.Seq}
	s := h.sections[i]
	switch r.Kind {
	case "acq":
		// The lease's first ValidUntil is the TTL from when its acquiring
		// command was sent, less 1% and 2 ms (core.Lease.ValidUntil): so
		// the command was sent then, between the call and the return.
		sent := min(max(r.Called, r.Valid-int64(ttl-ttl/100-2*time.Millisecond)), r.At)
		h.sections[i] = &section{id: i, called: r.Called, sent: sent, acquired: r.At, released: math.MaxInt64, valid: r.Valid, fence: r.Fence, token: r.Token}
		return nil
	case "end":
		for k, n := range r.Errors {
			h.errors[k] += n
		}
		if r.Err != "" {
			h.otherErrors = append(h.otherErrors, fmt.Sprintf("worker %d: %s", r.Proc, r.Err))
		}
		return nil
	}
	if s == nil {
		return fmt.Errorf("%s record of section %v before its acquire", r.Kind, i)
	}
	switch r.Kind {
	case "write":
		s.writes = append(s.writes, &write{sec: s, check: r.Check, doneAtCheck: r.DoneAtCheck, validAtCheck: r.ValidAtCheck,
			sent: r.Sent, doneAtSend: r.DoneAtSend, accepted: r.Accepted, err: r.Err})
		if r.ValidAtCheck > 0 {
			s.valid = r.ValidAtCheck
		}
	case "rel":
		s.released = r.At
		if r.Valid > 0 {
			s.valid = r.Valid
		}
	default:
		return fmt.Errorf("unknown record kind %q", r.Kind)
	}
	return nil
}

// addLine takes one JSON line into the history.
func (h *history) addLine(line []byte) (record, error) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("bad history line %q: %w", line, err)
	}
	return r, h.add(r)
}

// frozenDuring reports whether process proc was frozen at some time in
// [from, to].
func (h *history) frozenDuring(proc int, from, to int64) bool {
	for _, f := range h.faults {
		if f.kind == holderFreeze && f.proc == proc && f.start <= to && f.end >= from {
			return true
		}
	}
	return false
}

// resetBetween reports whether the store lost its data at some time in
// [from, to].
func (h *history) resetBetween(from, to int64) bool {
	for _, f := range h.faults {
		if f.reset() && f.start <= to && f.end >= from {
			return true
		}
	}
	return false
}

// orphan is the time after a stall healed during which the name was locked
// by nobody.
type orphan struct {
	fault fault
	d     time.Duration
}

// analysis is what the analyser found in a history.
type analysis struct {
	sections, writes, accepted, refused, skipped int
	faults                                       map[string]int
	errors                                       map[string]int

	overlapsFrozen, overlapsReset, overlapsUnexplained int
	overlapsRanOut                                     int // the earlier lease ran out, and its holder let go in time
	staleAcceptedFrozen, staleAcceptedReset            int
	staleAcceptedUnexplained, staleRefused             int
	refusedLatest                                      int // refused writes of the latest holder (the fence went back)
	writesAfterDone                                    int
	sentAfterDoneInWindow                              int
	orphans                                            []orphan

	notes []string // what was unexplained, for the log
}

// longestOrphan returns the longest orphan after a stall, and after which
// fault.
func (a *analysis) longestOrphan() orphan {
	var o orphan
	for _, x := range a.orphans {
		if x.d > o.d {
			o = x
		}
	}
	return o
}

func (a *analysis) note(format string, args ...any) {
	if len(a.notes) < 20 {
		a.notes = append(a.notes, fmt.Sprintf(format, args...))
	}
}

// ms prints a Unix-nanosecond time relative to the run's start.
func (h *history) ms(t int64) string {
	if t == math.MaxInt64 {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(t-h.start)/1e9)
}

// analyse classifies the history's overlaps, stale writes, writes after Done
// and orphans (see the package documentation).
func (h *history) analyse() *analysis {
	a := &analysis{faults: map[string]int{}, errors: h.errors}
	for _, f := range h.faults {
		a.faults[f.kind]++
	}
	secs := make([]*section, 0, len(h.sections))
	for _, s := range h.sections {
		secs = append(secs, s)
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i].acquired < secs[j].acquired })
	a.sections = len(secs)

	// Overlaps: a later acquire before an earlier release.
	for i, s1 := range secs {
		for _, s2 := range secs[i+1:] {
			if s2.acquired >= s1.released {
				break
			}
			switch {
			case h.resetBetween(s1.sent, s2.acquired):
				// The store forgot s1's lock: a reset after its command
				// was sent (it may have run before the reset, its reply
				// read after it).
				a.overlapsReset++
			case s2.acquired >= s1.validEnd() && h.frozenDuring(s1.id.proc, s1.called, s2.acquired):
				a.overlapsFrozen++
			case s2.acquired >= s1.valid && s1.released <= s1.valid+int64(letGo) && !s1.wroteAfter(s1.valid):
				// Done ended the section at its validity, and the later
				// holder came after it, before the earlier one recorded its
				// release (a goroutine woken late on a busy machine).
				a.overlapsRanOut++
			default:
				a.overlapsUnexplained++
				a.note("unexplained overlap: %v held %s–%s (valid to %s), %v acquired at %s",
					s1.id, h.ms(s1.acquired), h.ms(s1.released), h.ms(s1.valid), s2.id, h.ms(s2.acquired))
			}
		}
	}

	// Writes: after Done, and skipped.
	for _, s := range secs {
		for _, w := range s.writes {
			if w.sent == 0 {
				a.skipped++
				continue
			}
			a.writes++
			if w.doneAtCheck || w.check >= w.validAtCheck {
				a.writesAfterDone++
				a.note("write after Done: %v checked at %s (Done closed: %v, valid to %s), sent at %s",
					s.id, h.ms(w.check), w.doneAtCheck, h.ms(w.validAtCheck), h.ms(w.sent))
			} else if w.doneAtSend {
				a.sentAfterDoneInWindow++
			}
		}
	}

	// Stale writes, in the order the resource ran them: a write is stale
	// when a write of a later holder was accepted before it.
	var latest *section // the latest holder whose write was accepted
	for _, wid := range h.order {
		i, k, accepted, ok := parseEntry(wid)
		s := h.sections[i]
		if !ok || s == nil || k >= len(s.writes) || s.writes[k].sent == 0 {
			a.note("resource log entry %q matches no write", wid)
			continue
		}
		w := s.writes[k]
		if accepted {
			a.accepted++
		} else {
			a.refused++
		}
		if accepted != w.accepted {
			a.note("write %v/%d: the resource logged accepted=%v, the worker saw %v (%s)", i, k, accepted, w.accepted, w.err)
		}
		stale := latest != nil && latest.acquired > s.acquired
		switch {
		case stale && !accepted:
			a.staleRefused++
		case stale && h.resetBetween(s.acquired, latest.acquired):
			a.staleAcceptedReset++
		case stale && h.frozenDuring(s.id.proc, s.called, w.sent):
			a.staleAcceptedFrozen++
		case stale:
			a.staleAcceptedUnexplained++
			a.note("unexplained stale write accepted: %v (acquired %s, fence %d) after %v (acquired %s, fence %d)",
				s.id, h.ms(s.acquired), s.fence, latest.id, h.ms(latest.acquired), latest.fence)
		case !accepted:
			a.refusedLatest++
		}
		if accepted && (latest == nil || s.acquired > latest.acquired) {
			latest = s
		}
	}

	// Orphans: after each stall healed, the time to the last sample of the
	// key that held a token no acquire returned (an attempt that failed,
	// and whose SET the store ran anyway): the name was locked by nobody.
	tokens := map[string]bool{}
	for _, s := range secs {
		tokens[s.token] = true
	}
	for _, f := range h.faults {
		if !f.stall() {
			continue
		}
		o := orphan{fault: f}
		for _, x := range h.samples {
			if x.at >= f.end && x.at <= f.end+int64(h.ttl+time.Second) && x.token != "" && !tokens[x.token] {
				o.d = max(o.d, time.Duration(x.at-f.end))
			}
		}
		a.orphans = append(a.orphans, o)
	}
	return a
}

// parseEntry reads a resource log entry, "proc.g.seq:write:fence:1"
// (accepted) or ":0" (refused).
func parseEntry(e string) (i id, write int, accepted, ok bool) {
	parts := strings.Split(e, ":")
	if len(parts) != 4 {
		return id{}, 0, false, false
	}
	i, ok = parseID(parts[0])
	write, err := strconv.Atoi(parts[1])
	return i, write, parts[3] == "1", ok && err == nil
}

// table prints the figures of several analyses side by side.
func table(names []string, as []*analysis) string {
	var b strings.Builder
	row := func(label string, f func(a *analysis) string) {
		fmt.Fprintf(&b, "%-62s", label)
		for _, a := range as {
			fmt.Fprintf(&b, " %18s", f(a))
		}
		b.WriteString("\n")
	}
	n := func(f func(a *analysis) int) func(a *analysis) string {
		return func(a *analysis) string { return strconv.Itoa(f(a)) }
	}
	row("", func(a *analysis) string { return names[slices.Index(as, a)] })
	row("critical sections", n(func(a *analysis) int { return a.sections }))
	row("failed acquires (busy / store down / other)", func(a *analysis) string {
		return fmt.Sprintf("%d / %d / %d", a.errors["timeout"], a.errors["storage"], a.errors["other"])
	})
	row("writes sent (accepted / refused) + skipped at a closed Done", func(a *analysis) string {
		return fmt.Sprintf("%d (%d/%d) + %d", a.writes, a.accepted, a.refused, a.skipped)
	})
	for _, k := range faultKinds {
		row("fault: "+k, n(func(a *analysis) int { return a.faults[k] }))
	}
	row("overlaps explained: holder frozen past its TTL", n(func(a *analysis) int { return a.overlapsFrozen }))
	row("overlaps explained: Redis restarted empty / FLUSHALL", n(func(a *analysis) int { return a.overlapsReset }))
	row("overlaps explained: lease ran out, holder let go", n(func(a *analysis) int { return a.overlapsRanOut }))
	row("UNEXPLAINED overlaps", n(func(a *analysis) int { return a.overlapsUnexplained }))
	row("stale writes refused by the fence", n(func(a *analysis) int { return a.staleRefused }))
	row("stale writes accepted, writer frozen (no fencing: expected)", n(func(a *analysis) int { return a.staleAcceptedFrozen }))
	row("stale writes accepted across a restart / FLUSHALL", n(func(a *analysis) int { return a.staleAcceptedReset }))
	row("UNEXPLAINED stale writes accepted", n(func(a *analysis) int { return a.staleAcceptedUnexplained }))
	row("writes of the latest holder refused (fence went back)", n(func(a *analysis) int { return a.refusedLatest }))
	row("writes after Done (Done open past the validity, or closed)", n(func(a *analysis) int { return a.writesAfterDone }))
	row("writes whose Done closed between check and send", n(func(a *analysis) int { return a.sentAfterDoneInWindow }))
	row("longest orphan after a stall", func(a *analysis) string {
		return a.longestOrphan().d.Round(time.Millisecond).String()
	})
	return b.String()
}
