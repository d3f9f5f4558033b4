package history

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Record is one line a worker writes on its history pipe. Times are Unix
// nanoseconds of the machine's clock, which every process shares.
type Record struct {
	Kind string `json:"k"` // "ready", "acq", "fail", "write", "rel" or "end"
	Proc int    `json:"p"`
	G    int    `json:"g"`
	Seq  int    `json:"s"`
	W    int    `json:"w,omitempty"` // write: its index in the section

	Called int64  `json:"called,omitempty"` // acq, fail: when Acquire was called
	At     int64  `json:"at,omitempty"`     // acq, fail: when Acquire returned; rel: when Release was called
	Fence  int64  `json:"fence,omitempty"`  // acq: Lease.Fence
	Token  string `json:"token,omitempty"`  // acq: Lease.Token
	Valid  int64  `json:"valid,omitempty"`  // acq, rel: Lease.ValidUntil
	TTL    int64  `json:"ttl,omitempty"`    // acq: Lease.TTL, in nanoseconds
	Fail   string `json:"fail,omitempty"`   // fail: the kind of the failed acquire ("timeout", "storage", "other")

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

// Fault is one injected fault, from its start to when it healed.
type Fault struct {
	Kind       string
	Proc       int // the worker process it hit; -1 for the store's faults
	Start, End int64
	// Reset: the store lost its locks (a restart without its data, a
	// FLUSHALL). Overlaps and stale writes across it are explained.
	Reset bool
	// Frozen: Proc's process was stopped (SIGSTOP), so that its lease
	// looked valid past its TTL. Overlaps with its successors are explained;
	// fencing must refuse its stale writes.
	Frozen bool
	// Stall: a process, the store or a link stalled and resumed, so that
	// the store may run commands late (the orphan lock of a failed attempt).
	Stall bool
}

// sample is the lock's key as the parent read it at one time: the token
// it held, or "" when it was absent.
type sample struct {
	at    int64
	token string
}

// History is what a run recorded: the workers' records, the faults, the
// resource's log and the samples of the lock's key.
type History struct {
	samples     []sample // the lock's key, read every 10 ms for a while after each stall healed
	sections    map[id]*section
	waits       [][2]int64 // every Acquire call: when it was called and returned
	order       []string   // the resource's log: writes in the order it ran them
	faults      []Fault
	errors      map[string]int // failed acquires by kind
	otherErrors []string       // what the failed acquires of kind "other" said
	start       int64
	end         int64
	hold        time.Duration // the longest a store holds a lock of the run's TTL
	raw         []byte        // the workers' records as they came, for a dump (see dumpEnv)
}

// newHistory returns an empty history of a run that started at start, on a
// store that holds a lock for hold at most.
func newHistory(start time.Time, hold time.Duration) *History {
	return &History{sections: map[id]*section{}, errors: map[string]int{}, start: start.UnixNano(), hold: hold}
}

// add takes one record into the history.
func (h *History) add(r Record) error {
	i := id{r.Proc, r.G, r.Seq}
	s := h.sections[i]
	switch r.Kind {
	case "ready":
		return nil
	case "acq":
		// The lease's first ValidUntil is its TTL from when its acquiring
		// command was sent, less 1% and 2 ms (core.Lease.ValidUntil): so
		// the command was sent then, between the call and the return.
		ttl := time.Duration(r.TTL)
		sent := min(max(r.Called, r.Valid-int64(ttl-ttl/100-2*time.Millisecond)), r.At)
		h.sections[i] = &section{id: i, called: r.Called, sent: sent, acquired: r.At, released: math.MaxInt64, valid: r.Valid, fence: r.Fence, token: r.Token}
		h.waits = append(h.waits, [2]int64{r.Called, r.At})
		return nil
	case "fail":
		h.waits = append(h.waits, [2]int64{r.Called, r.At})
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
func (h *History) addLine(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("bad history line %q: %w", line, err)
	}
	h.raw = append(append(h.raw, line...), '\n')
	return r, h.add(r)
}

// frozenDuring reports whether process proc was frozen at some time in
// [from, to].
func (h *History) frozenDuring(proc int, from, to int64) bool {
	for _, f := range h.faults {
		if f.Frozen && f.Proc == proc && f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

// resetBetween reports whether the store lost its data at some time in
// [from, to].
func (h *History) resetBetween(from, to int64) bool {
	for _, f := range h.faults {
		if f.Reset && f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

// faultAt returns the index in Analysis.byFault of the fault an event at t
// is counted under: 0 before the first fault, i+1 from the start of fault
// i until the start of the next.
func (h *History) faultAt(t int64) int {
	n := 0
	for i, f := range h.faults {
		if f.Start <= t {
			n = i + 1
		}
	}
	return n
}

// ms prints a Unix-nanosecond time relative to the run's start.
func (h *History) ms(t int64) string {
	if t == math.MaxInt64 {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(t-h.start)/1e9)
}
