package lockdebug

import (
	"time"

	"github.com/reqlock/reqlock/core"
)

// The histogram of lock waits: fixed buckets (upper bounds, the last one
// open), counted per acquire outcome over a sliding window.
var bucketBounds = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

const nBuckets = len(bucketBounds) + 1

// acquireOutcomes are the histogram's columns, in order.
var acquireOutcomes = [...]core.Outcome{
	core.OutcomeAcquired, core.OutcomeBusy, core.OutcomeCanceled, core.OutcomeDeadline,
	core.OutcomeUnavailable, core.OutcomeInvalid, core.OutcomeBadRequest, core.OutcomeError,
}

// releaseOutcomes are the ends of leases counted in the window, in order.
var releaseOutcomes = [...]core.Outcome{
	core.OutcomeReleased, core.OutcomeHandedOff, core.OutcomeExpired, core.OutcomeNotHeld,
	core.OutcomeGaveUp, core.OutcomeUnavailable, core.OutcomeError,
}

const (
	nAcquire = len(acquireOutcomes)
	nRelease = len(releaseOutcomes)
	// nSlots is how many steps the window slides in.
	nSlots = 60
)

// slot counts what ended during one step of the window.
type slot struct {
	step       int64 // which step (time / width) it counts; its counts are stale if older than the window
	waits      [nBuckets][nAcquire]uint32
	handedOver uint32
	releases   [nRelease]uint32
}

// window is a ring of nSlots slots, each width long: a sliding window of
// counts whose memory is fixed, whatever the rate of events.
type window struct {
	width time.Duration
	slots [nSlots]slot
}

func newWindow(d time.Duration) *window {
	w := &window{width: d / nSlots}
	for i := range w.slots {
		w.slots[i].step = -1 << 62 // never current
	}
	return w
}

func (w *window) stepOf(t time.Time) int64 {
	return t.UnixNano() / int64(w.width)
}

// at returns the slot of the step of t, cleared if it held an older step,
// or nil when t is older than the step that slot holds now.
func (w *window) at(t time.Time) *slot {
	step := w.stepOf(t)
	s := &w.slots[int(uint64(step)%nSlots)]
	switch {
	case s.step == step:
	case s.step < step:
		*s = slot{step: step}
	default:
		return nil
	}
	return s
}

func bucketOf(wait time.Duration) int {
	for i, b := range bucketBounds {
		if wait <= b {
			return i
		}
	}
	return nBuckets - 1
}

func indexOf(list []core.Outcome, o core.Outcome) int {
	for i, x := range list {
		if x == o {
			return i
		}
	}
	return len(list) - 1 // the last one: error
}

// acquired counts an acquire that ended at end after waiting wait.
func (w *window) acquired(end time.Time, wait time.Duration, o core.Outcome, handedOver bool) {
	s := w.at(end)
	if s == nil {
		return
	}
	s.waits[bucketOf(wait)][indexOf(acquireOutcomes[:], o)]++
	if handedOver {
		s.handedOver++
	}
}

// released counts a lease that ended at end.
func (w *window) released(end time.Time, o core.Outcome) {
	if s := w.at(end); s != nil {
		s.releases[indexOf(releaseOutcomes[:], o)]++
	}
}

// sum adds up the slots of the window that ends at now.
func (w *window) sum(now time.Time) (waits [nBuckets][nAcquire]int64, handedOver int64, releases [nRelease]int64) {
	current := w.stepOf(now)
	for i := range w.slots {
		s := &w.slots[i]
		if s.step > current-nSlots && s.step <= current {
			for b := range s.waits {
				for o := range s.waits[b] {
					waits[b][o] += int64(s.waits[b][o])
				}
			}
			handedOver += int64(s.handedOver)
			for o := range s.releases {
				releases[o] += int64(s.releases[o])
			}
		}
	}
	return waits, handedOver, releases
}
