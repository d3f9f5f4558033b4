package history

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// figures are the counts of the analysis, for the whole run or for the
// time of one fault.
type figures struct {
	overlapsFrozen           int // explained: the earlier holder was frozen past its validity
	overlapsReset            int // explained: the store lost its locks between the acquires
	overlapsRanOut           int // explained: the earlier lease ran out and its holder let go
	overlapsUnexplained      int
	staleRefused             int // stale writes the fence refused
	staleAcceptedFrozen      int // accepted, of a frozen writer (expected without fencing)
	staleAcceptedReset       int // accepted, across a reset of the store
	staleAcceptedUnexplained int
	refusedLatest            int // writes of the latest holder refused: its fence went back
	writesAfterDone          int // Done open past the validity at the check, or closed and written anyway
}

func (f figures) overlapsExplained() int {
	return f.overlapsFrozen + f.overlapsReset + f.overlapsRanOut
}

func (f figures) staleAccepted() int {
	return f.staleAcceptedFrozen + f.staleAcceptedReset + f.staleAcceptedUnexplained
}

// Analysis is what the analyser found in a history.
type Analysis struct {
	figures // the whole run

	// byFault[0] counts what happened before the first fault, byFault[i]
	// what happened from the start of fault i-1 to the start of the next;
	// an overlap is counted when the later holder acquired, a write when
	// it was sent (a write after Done when Done was checked).
	byFault []figures
	faults  []Fault

	faultCount            map[string]int // faults by kind
	sections              int
	errors                map[string]int // failed acquires by kind
	writes                int            // sent
	skipped               int            // not sent: Done was closed at the check
	accepted, refused     int            // by the resource
	sentAfterDoneInWindow int            // Done closed between the check and the send: expected, the window is why fencing exists

	// unheld[i] is the longest time after fault i healed during which
	// nobody held the name while processes waited for it; baseline is the
	// longest such time before the first fault (hand-offs).
	unheld   []time.Duration
	baseline time.Duration
	// orphans are the times after each stall healed during which the
	// lock's key held a token no acquire returned, when the run sampled
	// the key (Target.Sample).
	orphans []orphan
	sampled bool

	notes []string // what was unexplained, for the log
}

// orphan is the time after a stall healed during which the name was locked
// by nobody: the lock's key held a token that no acquire returned.
type orphan struct {
	fault Fault
	d     time.Duration
}

// longestOrphan returns the longest orphan after a stall, and after which
// fault.
func (a *Analysis) longestOrphan() orphan {
	var o orphan
	for _, x := range a.orphans {
		if x.d > o.d {
			o = x
		}
	}
	return o
}

// longestUnheld returns the longest time the name was held by nobody after
// a fault healed, and the fault.
func (a *Analysis) longestUnheld() (time.Duration, Fault) {
	var d time.Duration
	var f Fault
	for i, u := range a.unheld {
		if u > d {
			d, f = u, a.faults[i]
		}
	}
	return d, f
}

func (a *Analysis) note(format string, args ...any) {
	if len(a.notes) < 20 {
		a.notes = append(a.notes, fmt.Sprintf(format, args...))
	}
}

// count applies f to the run's figures and to those of the fault at t.
func (a *Analysis) count(h *History, t int64, f func(*figures)) {
	f(&a.figures)
	f(&a.byFault[h.faultAt(t)])
}

// analyse classifies the history's overlaps, stale writes, writes after Done
// and orphans (see the package documentation).
func (h *History) analyse() *Analysis {
	a := &Analysis{faultCount: map[string]int{}, errors: h.errors, faults: h.faults, byFault: make([]figures, len(h.faults)+1)}
	for _, f := range h.faults {
		a.faultCount[f.Kind]++
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
				a.count(h, s2.acquired, func(f *figures) { f.overlapsReset++ })
			case s2.acquired >= s1.validEnd() && h.frozenDuring(s1.id.proc, s1.called, s2.acquired):
				a.count(h, s2.acquired, func(f *figures) { f.overlapsFrozen++ })
			case s2.acquired >= s1.valid && s1.released <= s1.valid+int64(letGo) && !s1.wroteAfter(s1.valid):
				// Done ended the section at its validity, and the later
				// holder came after it, before the earlier one recorded its
				// release (a goroutine woken late on a busy machine).
				a.count(h, s2.acquired, func(f *figures) { f.overlapsRanOut++ })
			default:
				a.count(h, s2.acquired, func(f *figures) { f.overlapsUnexplained++ })
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
				a.count(h, w.check, func(f *figures) { f.writesAfterDone++ })
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
			a.count(h, w.sent, func(f *figures) { f.staleRefused++ })
		case stale && h.resetBetween(s.acquired, latest.acquired):
			a.count(h, w.sent, func(f *figures) { f.staleAcceptedReset++ })
		case stale && h.frozenDuring(s.id.proc, s.called, w.sent):
			a.count(h, w.sent, func(f *figures) { f.staleAcceptedFrozen++ })
		case stale:
			a.count(h, w.sent, func(f *figures) { f.staleAcceptedUnexplained++ })
			a.note("unexplained stale write accepted: %v (acquired %s, fence %d) after %v (acquired %s, fence %d)",
				s.id, h.ms(s.acquired), s.fence, latest.id, h.ms(latest.acquired), latest.fence)
		case !accepted:
			a.count(h, w.sent, func(f *figures) { f.refusedLatest++ })
		}
		if accepted && (latest == nil || s.acquired > latest.acquired) {
			latest = s
		}
	}

	// Held by nobody: after each fault healed, the longest stretch in which
	// no section held the name while some Acquire was waiting.
	held := merge(heldIntervals(h, secs), 0)
	waiting := merge(h.waits, int64(waitGap))
	free := intersect(complement(held, h.start, h.end), waiting)
	for i, f := range h.faults {
		next := h.end
		if i+1 < len(h.faults) {
			next = h.faults[i+1].Start
		}
		a.unheld = append(a.unheld, longestWithin(free, f.End, next))
	}
	if len(secs) > 0 {
		first := h.end
		if len(h.faults) > 0 {
			first = h.faults[0].Start
		}
		a.baseline = longestWithin(free, secs[0].acquired, first)
	}

	// Orphans: after each stall healed, the time to the last sample of the
	// key that held a token no acquire returned (an attempt that failed,
	// and whose command the store ran anyway): the name was locked by nobody.
	if len(h.samples) > 0 {
		a.sampled = true
		tokens := map[string]bool{}
		for _, s := range secs {
			tokens[s.token] = true
		}
		for i, f := range h.faults {
			if !f.Stall {
				continue
			}
			// The samples after the stall healed, until the next fault
			// began (whose time is its own).
			until := f.End + int64(h.hold+time.Second)
			if i+1 < len(h.faults) {
				until = min(until, h.faults[i+1].Start)
			}
			o := orphan{fault: f}
			for _, x := range h.samples {
				if x.at >= f.End && x.at < until && x.token != "" && !tokens[x.token] {
					o.d = max(o.d, time.Duration(x.at-f.End))
				}
			}
			a.orphans = append(a.orphans, o)
		}
	}
	return a
}

// waitGap is the longest time between two Acquire calls of the run's
// goroutines that still counts as waiting: a goroutine whose attempt failed
// sleeps a few milliseconds before the next.
const waitGap = 50 * time.Millisecond

// heldIntervals returns when each section held the name: from the return
// of its Acquire to its call of Release (the end of the run when it never
// released).
func heldIntervals(h *History, secs []*section) [][2]int64 {
	out := make([][2]int64, 0, len(secs))
	for _, s := range secs {
		out = append(out, [2]int64{s.acquired, min(s.released, h.end)})
	}
	return out
}

// merge returns the union of the intervals, sorted, joining those less
// than gap apart.
func merge(ivs [][2]int64, gap int64) [][2]int64 {
	ivs = slices.Clone(ivs)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i][0] < ivs[j][0] })
	var out [][2]int64
	for _, iv := range ivs {
		if iv[1] < iv[0] {
			continue
		}
		if n := len(out); n > 0 && iv[0] <= out[n-1][1]+gap {
			out[n-1][1] = max(out[n-1][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	return out
}

// complement returns the parts of [from, to) that the sorted, disjoint
// intervals ivs leave out.
func complement(ivs [][2]int64, from, to int64) [][2]int64 {
	var out [][2]int64
	at := from
	for _, iv := range ivs {
		if iv[0] > at {
			out = append(out, [2]int64{at, min(iv[0], to)})
		}
		at = max(at, iv[1])
		if at >= to {
			break
		}
	}
	if at < to {
		out = append(out, [2]int64{at, to})
	}
	return out
}

// intersect returns the intersection of two sorted lists of disjoint
// intervals.
func intersect(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
		if lo < hi {
			out = append(out, [2]int64{lo, hi})
		}
		if a[i][1] < b[j][1] {
			i++
		} else {
			j++
		}
	}
	return out
}

// longestWithin returns the longest of the parts of the intervals within
// [from, to): after a fault healed (from) until the next fault began (to),
// the time of which belongs to that fault. The run lets the next fault
// begin only once the name was taken again after the previous one healed,
// so the stretch right after a fault is never cut short.
func longestWithin(ivs [][2]int64, from, to int64) time.Duration {
	var d time.Duration
	for _, iv := range ivs {
		if lo, hi := max(iv[0], from), min(iv[1], to); lo < hi {
			d = max(d, time.Duration(hi-lo))
		}
	}
	return d
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

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// table prints the figures of several analyses side by side.
func table(names []string, as []*Analysis) string {
	var b strings.Builder
	row := func(label string, f func(a *Analysis) string) {
		fmt.Fprintf(&b, "%-62s", label)
		for _, a := range as {
			fmt.Fprintf(&b, " %20s", f(a))
		}
		b.WriteString("\n")
	}
	n := func(f func(a *Analysis) int) func(a *Analysis) string {
		return func(a *Analysis) string { return strconv.Itoa(f(a)) }
	}
	row("", func(a *Analysis) string { return names[slices.Index(as, a)] })
	row("critical sections", n(func(a *Analysis) int { return a.sections }))
	row("failed acquires (busy / store down / other)", func(a *Analysis) string {
		return fmt.Sprintf("%d / %d / %d", a.errors["timeout"], a.errors["storage"], a.errors["other"])
	})
	row("writes sent (accepted / refused) + skipped at a closed Done", func(a *Analysis) string {
		return fmt.Sprintf("%d (%d/%d) + %d", a.writes, a.accepted, a.refused, a.skipped)
	})
	var kinds []string
	for _, a := range as {
		for _, f := range a.faults {
			if !slices.Contains(kinds, f.Kind) {
				kinds = append(kinds, f.Kind)
			}
		}
	}
	for _, k := range kinds {
		row("fault: "+k, n(func(a *Analysis) int { return a.faultCount[k] }))
	}
	row("overlaps explained: holder frozen past its TTL", n(func(a *Analysis) int { return a.overlapsFrozen }))
	row("overlaps explained: store lost its locks (restart, FLUSHALL)", n(func(a *Analysis) int { return a.overlapsReset }))
	row("overlaps explained: lease ran out, holder let go", n(func(a *Analysis) int { return a.overlapsRanOut }))
	row("UNEXPLAINED overlaps", n(func(a *Analysis) int { return a.overlapsUnexplained }))
	row("stale writes refused by the fence", n(func(a *Analysis) int { return a.staleRefused }))
	row("stale writes accepted, writer frozen (no fencing: expected)", n(func(a *Analysis) int { return a.staleAcceptedFrozen }))
	row("stale writes accepted across a restart / FLUSHALL", n(func(a *Analysis) int { return a.staleAcceptedReset }))
	row("UNEXPLAINED stale writes accepted", n(func(a *Analysis) int { return a.staleAcceptedUnexplained }))
	row("writes of the latest holder refused (fence went back)", n(func(a *Analysis) int { return a.refusedLatest }))
	row("writes after Done (Done open past the validity, or closed)", n(func(a *Analysis) int { return a.writesAfterDone }))
	row("writes whose Done closed between check and send", n(func(a *Analysis) int { return a.sentAfterDoneInWindow }))
	row("held by nobody, waiters waiting: before the faults", func(a *Analysis) string { return ms(a.baseline) })
	row("held by nobody, waiters waiting: longest after a fault", func(a *Analysis) string {
		d, _ := a.longestUnheld()
		return ms(d)
	})
	row("longest orphan lock after a stall (key sampled)", func(a *Analysis) string {
		if !a.sampled {
			return "-"
		}
		return ms(a.longestOrphan().d)
	})
	return b.String()
}

// Result is the analysis of one case's run.
type Result struct {
	Case     Case
	Analysis *Analysis
}

// Summary prints a Markdown table of the results, one row per case and
// fault: the overlaps (explained / unexplained), the stale writes (refused
// by the fence / accepted as expected: a frozen writer without fencing, or
// across a reset / unexplained), the writes after Done, the longest time
// the name was held by nobody, waiters waiting, after the fault healed,
// and the longest orphan lock where the key was sampled. The first row of
// each case is the time before the faults.
func Summary(results []Result) string {
	var b strings.Builder
	b.WriteString("| store | variant | fault | overlaps explained / UNEXPLAINED | stale writes refused / accepted (expected) / UNEXPLAINED | writes after Done | held by nobody after it | orphan lock (key sampled) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		a := r.Analysis
		if a == nil {
			fmt.Fprintf(&b, "| %s | %s | (the run failed) | | | | | |\n", r.Case.Store, r.Case.Variant.Name)
			continue
		}
		line := func(label string, f figures, unheld, orphan string) {
			fmt.Fprintf(&b, "| %s | %s | %s | %d / %d | %d / %d / %d | %d | %s | %s |\n",
				r.Case.Store, r.Case.Variant.Name, label,
				f.overlapsExplained(), f.overlapsUnexplained,
				f.staleRefused, f.staleAcceptedFrozen+f.staleAcceptedReset, f.staleAcceptedUnexplained,
				f.writesAfterDone, unheld, orphan)
		}
		line("(before the faults: hand-overs)", a.byFault[0], ms(a.baseline), "")
		for i, f := range a.faults {
			orphan := ""
			if a.sampled && f.Stall {
				for _, o := range a.orphans {
					if o.fault.Start == f.Start {
						orphan = ms(o.d)
					}
				}
			}
			line(f.Kind, a.byFault[i+1], ms(a.unheld[i]), orphan)
		}
	}
	return b.String()
}

// matrixColumn returns the column of a fault in Matrix: its kind, the two
// restarts sharing one.
func matrixColumn(f Fault) string {
	switch f.Kind {
	case KindRestart, KindRestartEmpty:
		return "store killed (SIGKILL), restarted"
	}
	return f.Kind
}

// Matrix prints a Markdown table of the results, one row per case and one
// column per fault: in each cell the overlaps explained / unexplained
// during and after the fault, and the longest time the name was held by
// nobody (waiters waiting) after it healed (the orphan lock too, where the
// key was sampled); then, for the whole run, the stale writes (refused by
// the fence / accepted as expected / unexplained) and the writes after
// Done.
func Matrix(results []Result) string {
	var cols []string
	for _, r := range results {
		if r.Analysis == nil {
			continue
		}
		for _, f := range r.Analysis.faults {
			if c := matrixColumn(f); !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| store | variant | before the faults |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString(" stale writes: refused / accepted (expected) / UNEXPLAINED | writes after Done |\n|---|---|---|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	for _, r := range results {
		a := r.Analysis
		fmt.Fprintf(&b, "| %s | %s |", r.Case.Store, r.Case.Variant.Name)
		if a == nil {
			b.WriteString(" (the run failed) |")
			for range cols {
				b.WriteString(" |")
			}
			b.WriteString(" | |\n")
			continue
		}
		cell := func(f figures, unheld time.Duration) string {
			return fmt.Sprintf("%d / %d · %s", f.overlapsExplained(), f.overlapsUnexplained, ms(unheld))
		}
		fmt.Fprintf(&b, " %s |", cell(a.byFault[0], a.baseline))
		for _, c := range cols {
			var cells []string
			for i, f := range a.faults {
				if matrixColumn(f) != c {
					continue
				}
				s := cell(a.byFault[i+1], a.unheld[i])
				if f.Kind == KindRestartEmpty {
					s += " (empty)"
				}
				for _, o := range a.orphans {
					if o.fault.Start == f.Start {
						s += fmt.Sprintf(" (orphan %s)", ms(o.d))
					}
				}
				cells = append(cells, s)
			}
			if len(cells) == 0 {
				cells = []string{"–"}
			}
			b.WriteString(" " + strings.Join(cells, "; ") + " |")
		}
		fmt.Fprintf(&b, " %d / %d / %d | %d |\n", a.staleRefused, a.staleAcceptedFrozen+a.staleAcceptedReset, a.staleAcceptedUnexplained, a.writesAfterDone)
	}
	return b.String()
}
