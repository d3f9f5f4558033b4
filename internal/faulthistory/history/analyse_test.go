package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// at is a time in the synthetic histories below: n milliseconds.
func at(n int64) int64 { return n * int64(time.Millisecond) }

// synthetic builds a history from records and faults, with a resource log.
func synthetic(t *testing.T, records []Record, faults []Fault, log ...string) *History {
	t.Helper()
	h := newHistory(time.Unix(0, 0), 2*time.Second)
	h.end = at(10000)
	for _, r := range records {
		if err := h.add(r); err != nil {
			t.Fatal(err)
		}
	}
	h.faults, h.order = faults, log
	return h
}

// held returns the records of a section of proc.g.seq held from acq to rel,
// valid until valid, with one write sent at sent (0: none).
func held(proc, g, seq int, acq, rel, valid, sent int64, accepted bool) []Record {
	rs := []Record{{Kind: "acq", Proc: proc, G: g, Seq: seq, Called: acq - at(1), At: acq, Valid: valid, TTL: int64(2 * time.Second)}}
	if sent != 0 {
		rs = append(rs, Record{Kind: "write", Proc: proc, G: g, Seq: seq, Check: sent - at(1), ValidAtCheck: valid, Sent: sent, Accepted: accepted})
	}
	return append(rs, Record{Kind: "rel", Proc: proc, G: g, Seq: seq, At: rel, Valid: valid})
}

func join(rs ...[]Record) []Record {
	var out []Record
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

func TestAnalyseOverlaps(t *testing.T) {
	// 0.0.0 holds 100–3500 ms but is valid only to 2100; 1.0.0 acquires at 2200.
	late := join(held(0, 0, 0, at(100), at(3500), at(2100), 0, false), held(1, 0, 0, at(2200), at(2300), at(4200), 0, false))
	if a := synthetic(t, late, nil).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("a holder past its validity, not frozen: %d unexplained, want 1", a.overlapsUnexplained)
	}
	frozen := []Fault{{Kind: KindHolderFreeze, Frozen: true, Stall: true, Proc: 0, Start: at(150), End: at(2900)}}
	if a := synthetic(t, late, frozen).analyse(); a.overlapsFrozen != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("a frozen holder: %d explained, %d unexplained; want 1 and 0", a.overlapsFrozen, a.overlapsUnexplained)
	}
	otherFrozen := []Fault{{Kind: KindHolderFreeze, Frozen: true, Stall: true, Proc: 2, Start: at(150), End: at(2900)}}
	if a := synthetic(t, late, otherFrozen).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("another process frozen: %d unexplained, want 1", a.overlapsUnexplained)
	}

	// 0.0.0's lease ran out at 2100 and it let go at 2400, having written
	// before: explained. A write sent after its validity, or a release more
	// than letGo after it, is not.
	ranOut := join(held(0, 0, 0, at(100), at(2400), at(2100), at(500), true), held(1, 0, 0, at(2200), at(2300), at(4200), 0, false))
	if a := synthetic(t, ranOut, nil).analyse(); a.overlapsRanOut != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("a lease that ran out, let go in time: %d explained, %d unexplained; want 1 and 0", a.overlapsRanOut, a.overlapsUnexplained)
	}
	wroteLate := join(held(0, 0, 0, at(100), at(2400), at(2100), at(2150), true), held(1, 0, 0, at(2200), at(2300), at(4200), 0, false))
	if a := synthetic(t, wroteLate, nil).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("a write after the validity: %d unexplained, want 1", a.overlapsUnexplained)
	}
	acquiredEarly := join(held(0, 0, 0, at(100), at(2400), at(2100), 0, false), held(1, 0, 0, at(2000), at(2300), at(4000), 0, false))
	if a := synthetic(t, acquiredEarly, nil).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("an acquire before the validity ran out: %d unexplained, want 1", a.overlapsUnexplained)
	}

	// Both valid at once: unexplained even if the first was frozen, unless
	// the store was reset between the acquires.
	both := join(held(0, 0, 0, at(100), at(3000), at(2100), 0, false), held(1, 0, 0, at(1000), at(1100), at(3000), 0, false))
	if a := synthetic(t, both, frozen).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("two valid leases at once: %d unexplained, want 1", a.overlapsUnexplained)
	}
	reset := []Fault{{Kind: KindFlushAll, Reset: true, Proc: -1, Start: at(500), End: at(500)}}
	if a := synthetic(t, both, reset).analyse(); a.overlapsReset != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("after FLUSHALL: %d explained, %d unexplained; want 1 and 0", a.overlapsReset, a.overlapsUnexplained)
	}

	// A reset that ran after the first acquire's command was sent (known
	// from its first ValidUntil) and before that Acquire returned forgot
	// the first lock: explained. One before the command was sent did not.
	// Sent at 999 ms: a validity of 2977 ms is the 2 s TTL less 22 ms.
	raced := join(held(0, 0, 0, at(1000), at(1100), at(2977), 0, false), held(1, 0, 0, at(1001), at(1050), at(3000), 0, false))
	if a := synthetic(t, raced, []Fault{{Kind: KindFlushAll, Reset: true, Proc: -1, Start: at(999), End: at(999)}}).analyse(); a.overlapsReset != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("FLUSHALL between the first acquire's send and its return: %d explained, %d unexplained; want 1 and 0", a.overlapsReset, a.overlapsUnexplained)
	}
	if a := synthetic(t, raced, []Fault{{Kind: KindFlushAll, Reset: true, Proc: -1, Start: at(990), End: at(990)}}).analyse(); a.overlapsUnexplained != 1 {
		t.Errorf("FLUSHALL before the first acquire's command was sent: %d unexplained, want 1", a.overlapsUnexplained)
	}

	// One after the other, or two sections of one goroutine: no overlap.
	seq := join(held(0, 0, 0, at(100), at(200), at(2100), 0, false), held(0, 0, 1, at(210), at(300), at(2200), 0, false))
	if a := synthetic(t, seq, nil).analyse(); a.overlapsUnexplained+a.overlapsFrozen+a.overlapsReset+a.overlapsRanOut != 0 {
		t.Errorf("sequential sections counted as overlaps: %+v", a)
	}
}

func TestAnalyseStaleWrites(t *testing.T) {
	// 0.0.0 (fence 1) frozen writes at 2500, after 1.0.0 (fence 2) wrote.
	recs := join(held(0, 0, 0, at(100), at(2600), at(2100), at(2500), false), held(1, 0, 0, at(2200), at(2300), at(4200), at(2250), true))
	frozen := []Fault{{Kind: KindHolderFreeze, Frozen: true, Stall: true, Proc: 0, Start: at(150), End: at(2450)}}
	a := synthetic(t, recs, frozen, "1.0.0:0:2:1", "0.0.0:0:1:0").analyse()
	if a.staleRefused != 1 || a.accepted != 1 || a.refused != 1 {
		t.Errorf("a refused stale write: %+v", a)
	}
	a = synthetic(t, recs, frozen, "1.0.0:0:0:1", "0.0.0:0:0:1").analyse()
	if a.staleAcceptedFrozen != 1 || a.staleAcceptedUnexplained != 0 {
		t.Errorf("an accepted stale write of a frozen writer: %+v", a)
	}
	a = synthetic(t, recs, nil, "1.0.0:0:0:1", "0.0.0:0:0:1").analyse()
	if a.staleAcceptedUnexplained != 1 || !strings.Contains(strings.Join(a.notes, "\n"), "unexplained stale write") {
		t.Errorf("an accepted stale write of a writer not frozen: %+v", a)
	}
	// In order, the earlier holder first: not stale.
	a = synthetic(t, recs, nil, "0.0.0:0:1:1", "1.0.0:0:2:1").analyse()
	if a.staleAcceptedUnexplained+a.staleAcceptedFrozen+a.staleRefused != 0 {
		t.Errorf("writes in order counted as stale: %+v", a)
	}
	// The latest holder refused: its fence went back.
	a = synthetic(t, recs, nil, "0.0.0:0:5:1", "1.0.0:0:2:0").analyse()
	if a.refusedLatest != 1 {
		t.Errorf("the latest holder refused: %+v", a)
	}
}

func TestAnalyseWritesAfterDone(t *testing.T) {
	recs := []Record{
		{Kind: "acq", Proc: 0, At: at(100), Valid: at(2000)},
		{Kind: "write", Proc: 0, W: 0, Check: at(150), ValidAtCheck: at(2000), Sent: at(165)},                           // fine
		{Kind: "write", Proc: 0, W: 1, Check: at(2050), ValidAtCheck: at(2000), Sent: at(2065)},                         // Done open past the validity
		{Kind: "write", Proc: 0, G: 0, W: 2, Check: at(1990), ValidAtCheck: at(2000), Sent: at(2005), DoneAtSend: true}, // closed in the window
		{Kind: "write", Proc: 0, W: 3, Check: at(2070), DoneAtCheck: true, ValidAtCheck: at(2000)},                      // skipped
		{Kind: "rel", Proc: 0, At: at(2100), Valid: at(2000)},
	}
	a := synthetic(t, recs, nil).analyse()
	if a.writes != 3 || a.skipped != 1 || a.writesAfterDone != 1 || a.sentAfterDoneInWindow != 1 {
		t.Errorf("writes %d, skipped %d, after Done %d, in the window %d; want 3, 1, 1, 1",
			a.writes, a.skipped, a.writesAfterDone, a.sentAfterDoneInWindow)
	}
}

func TestAnalyseOrphans(t *testing.T) {
	stall := Fault{Kind: KindStoreFreeze, Stall: true, Proc: -1, Start: at(1000), End: at(3000)}
	recs := held(1, 0, 0, at(3400), at(3500), at(5400), 0, false)
	recs[0].Token = "known"
	h := synthetic(t, recs, []Fault{stall})
	// An unknown token (a late SET) until 3300, then free, then the holder's.
	h.samples = []sample{{at(3010), "late"}, {at(3300), "late"}, {at(3310), ""}, {at(3410), "known"}, {at(9000), "late"}}
	a := h.analyse()
	if o := a.longestOrphan(); o.d != 300*time.Millisecond || o.fault.Kind != KindStoreFreeze {
		t.Errorf("orphan %v after %q, want 300ms after %q (a sample long after the stall does not count)", o.d, o.fault.Kind, KindStoreFreeze)
	}
	// An unknown token seen after the next fault began is that fault's.
	h.faults = []Fault{stall, {Kind: KindRestartEmpty, Reset: true, Proc: -1, Start: at(3200), End: at(3250)}}
	if o := h.analyse().longestOrphan(); o.d != 10*time.Millisecond {
		t.Errorf("orphan %v with the next fault at 3200 ms, want 10ms (the sample at 3010 only)", o.d)
	}
	h.faults = []Fault{stall}
	// Known tokens only: no orphan.
	h.samples = []sample{{at(3010), ""}, {at(3410), "known"}}
	if o := h.analyse().longestOrphan(); o.d != 0 {
		t.Errorf("orphan %v with the holders' tokens only", o.d)
	}
	// Faults that are not stalls leave no orphan figure.
	h.faults = []Fault{{Kind: KindRestartEmpty, Reset: true, Proc: -1, Start: at(1000), End: at(1300)}}
	if a := h.analyse(); len(a.orphans) != 0 {
		t.Errorf("orphans after a restart: %v", a.orphans)
	}
}

func TestTable(t *testing.T) {
	a := synthetic(t, held(0, 0, 0, at(100), at(200), at(2100), at(150), true), nil, "0.0.0:0:0:1").analyse()
	out := table([]string{"x"}, []*Analysis{a})
	for _, want := range []string{"UNEXPLAINED overlaps", "longest orphan lock after a stall", "held by nobody", "writes after Done", "1 (1/0) + 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// waiting returns the records of failed acquires of goroutine 2.0 that
// wait, one after the other, from from to to.
func waiting(from, to int64) []Record {
	var rs []Record
	for seq, t := 1000, from; t < to; seq, t = seq+1, t+at(250) {
		rs = append(rs, Record{Kind: "fail", Proc: 2, Seq: seq, Called: t, At: min(t+at(250), to), Fail: "storage"})
	}
	return rs
}

func TestAnalyseUnheld(t *testing.T) {
	// 0.0.0 holds 100–500; the store is frozen 600–3000; 1.0.0 takes the
	// name at 3400 and 1.0.1 at 3420, after hand-offs; processes wait
	// from 450 on.
	freeze := []Fault{{Kind: KindStoreFreeze, Stall: true, Proc: -1, Start: at(600), End: at(3000)}}
	recs := join(held(0, 0, 0, at(100), at(500), at(2100), 0, false), waiting(at(450), at(3400)),
		held(1, 0, 0, at(3400), at(3410), at(5400), 0, false), held(1, 0, 1, at(3420), at(9000), at(5420), 0, false))
	a := synthetic(t, recs, freeze).analyse()
	if a.unheld[0] != 400*time.Millisecond {
		t.Errorf("held by nobody for %v after the freeze, want 400ms (from the thaw to the next acquire)", a.unheld[0])
	}
	if a.baseline != 100*time.Millisecond {
		t.Errorf("held by nobody for %v before the fault, want 100ms (500–600)", a.baseline)
	}
	// Nobody waiting 3100–3300: the time without a holder is only the
	// time with waiters.
	gappy := join(held(0, 0, 0, at(100), at(500), at(2100), 0, false), waiting(at(450), at(3100)), waiting(at(3300), at(3400)),
		held(1, 0, 0, at(3400), at(9000), at(5400), 0, false))
	if a := synthetic(t, gappy, freeze).analyse(); a.unheld[0] != 100*time.Millisecond {
		t.Errorf("held by nobody for %v after the freeze, with nobody waiting 3100–3300: want 100ms", a.unheld[0])
	}
	// The time after the next fault began counts for that fault.
	two := append(slices.Clone(freeze), Fault{Kind: KindFlushAll, Reset: true, Proc: -1, Start: at(3150), End: at(3150)})
	if a := synthetic(t, recs, two).analyse(); a.unheld[0] != 150*time.Millisecond || a.unheld[1] != 250*time.Millisecond {
		t.Errorf("held by nobody for %v and %v after two faults; want 150ms and 250ms", a.unheld[0], a.unheld[1])
	}
}

func TestAnalyseByFault(t *testing.T) {
	// An unexplained overlap at 1000 ms (before the fault at 1500) and a
	// reset-explained one at 2200 (after it).
	recs := join(held(0, 0, 0, at(100), at(1100), at(2100), 0, false), held(1, 0, 0, at(1000), at(1050), at(3000), 0, false),
		held(0, 1, 0, at(2000), at(2300), at(4000), 0, false), held(1, 1, 0, at(2200), at(2250), at(4200), 0, false))
	a := synthetic(t, recs, []Fault{{Kind: KindFlushAll, Reset: true, Proc: -1, Start: at(1500), End: at(2100)}}).analyse()
	if a.byFault[0].overlapsUnexplained != 1 || a.byFault[1].overlapsReset != 1 || a.overlapsUnexplained != 1 || a.overlapsReset != 1 {
		t.Errorf("by fault: %+v; in all: %+v", a.byFault, a.figures)
	}
	out := Summary([]Result{{Case: Case{Store: "redis", Variant: Plain}, Analysis: a}, {Case: Case{Store: "broken", Variant: Plain}}})
	for _, want := range []string{"| redis | plain | (before the faults: hand-overs) | 0 / 1 |", "| redis | plain | FLUSHALL | 1 / 0 |", "| broken | plain | (the run failed) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	out = Matrix([]Result{{Case: Case{Store: "redis", Variant: Plain}, Analysis: a}, {Case: Case{Store: "broken", Variant: Plain}}})
	for _, want := range []string{"| store | variant | before the faults | FLUSHALL | stale writes", "| redis | plain | 0 / 1 · 0s | 1 / 0 · 0s | 0 / 0 / 0 | 0 |", "| broken | plain | (the run failed) | | | |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the matrix lacks %q:\n%s", want, out)
		}
	}
}
