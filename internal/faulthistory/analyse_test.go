package faulthistory

import (
	"strings"
	"testing"
	"time"
)

// at is a time in the synthetic histories below: n milliseconds.
func at(n int64) int64 { return n * int64(time.Millisecond) }

// synthetic builds a history from records and faults, with a resource log.
func synthetic(t *testing.T, records []record, faults []fault, log ...string) *history {
	t.Helper()
	h := newHistory()
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
func held(proc, g, seq int, acq, rel, valid, sent int64, accepted bool) []record {
	rs := []record{{Kind: "acq", Proc: proc, G: g, Seq: seq, Called: acq - at(1), At: acq, Valid: valid}}
	if sent != 0 {
		rs = append(rs, record{Kind: "write", Proc: proc, G: g, Seq: seq, Check: sent - at(1), ValidAtCheck: valid, Sent: sent, Accepted: accepted})
	}
	return append(rs, record{Kind: "rel", Proc: proc, G: g, Seq: seq, At: rel, Valid: valid})
}

func join(rs ...[]record) []record {
	var out []record
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
	frozen := []fault{{kind: holderFreeze, proc: 0, start: at(150), end: at(2900)}}
	if a := synthetic(t, late, frozen).analyse(); a.overlapsFrozen != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("a frozen holder: %d explained, %d unexplained; want 1 and 0", a.overlapsFrozen, a.overlapsUnexplained)
	}
	otherFrozen := []fault{{kind: holderFreeze, proc: 2, start: at(150), end: at(2900)}}
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
	reset := []fault{{kind: flushall, proc: -1, start: at(500), end: at(500)}}
	if a := synthetic(t, both, reset).analyse(); a.overlapsReset != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("after FLUSHALL: %d explained, %d unexplained; want 1 and 0", a.overlapsReset, a.overlapsUnexplained)
	}

	// A reset that ran after the first acquire's command was sent (known
	// from its first ValidUntil) and before that Acquire returned forgot
	// the first lock: explained. One before the command was sent did not.
	// Sent at 999 ms: a validity of 2977 ms is the 2 s TTL less 22 ms.
	raced := join(held(0, 0, 0, at(1000), at(1100), at(2977), 0, false), held(1, 0, 0, at(1001), at(1050), at(3000), 0, false))
	if a := synthetic(t, raced, []fault{{kind: flushall, proc: -1, start: at(999), end: at(999)}}).analyse(); a.overlapsReset != 1 || a.overlapsUnexplained != 0 {
		t.Errorf("FLUSHALL between the first acquire's send and its return: %d explained, %d unexplained; want 1 and 0", a.overlapsReset, a.overlapsUnexplained)
	}
	if a := synthetic(t, raced, []fault{{kind: flushall, proc: -1, start: at(990), end: at(990)}}).analyse(); a.overlapsUnexplained != 1 {
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
	frozen := []fault{{kind: holderFreeze, proc: 0, start: at(150), end: at(2450)}}
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
	recs := []record{
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
	stall := fault{kind: redisFreeze, proc: -1, start: at(1000), end: at(3000)}
	recs := held(1, 0, 0, at(3400), at(3500), at(5400), 0, false)
	recs[0].Token = "known"
	h := synthetic(t, recs, []fault{stall})
	h.ttl = 2 * time.Second
	// An unknown token (a late SET) until 3300, then free, then the holder's.
	h.samples = []sample{{at(3010), "late"}, {at(3300), "late"}, {at(3310), ""}, {at(3410), "known"}, {at(9000), "late"}}
	a := h.analyse()
	if o := a.longestOrphan(); o.d != 300*time.Millisecond || o.fault.kind != redisFreeze {
		t.Errorf("orphan %v after %q, want 300ms after %q (a sample long after the stall does not count)", o.d, o.fault.kind, redisFreeze)
	}
	// Known tokens only: no orphan.
	h.samples = []sample{{at(3010), ""}, {at(3410), "known"}}
	if o := h.analyse().longestOrphan(); o.d != 0 {
		t.Errorf("orphan %v with the holders' tokens only", o.d)
	}
	// Faults that are not stalls leave no orphan figure.
	h.faults = []fault{{kind: restart, proc: -1, start: at(1000), end: at(1300)}}
	if a := h.analyse(); len(a.orphans) != 0 {
		t.Errorf("orphans after a restart: %v", a.orphans)
	}
}

func TestTable(t *testing.T) {
	a := synthetic(t, held(0, 0, 0, at(100), at(200), at(2100), at(150), true), nil, "0.0.0:0:0:1").analyse()
	out := table([]string{"x"}, []*analysis{a})
	for _, want := range []string{"UNEXPLAINED overlaps", "longest orphan after a stall", "writes after Done", "1 (1/0) + 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
