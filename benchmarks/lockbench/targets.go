package lockbench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Fair is the row of the fair queue alone.
const Fair = "reqlock+fair"

// Target is one of the goals the fair queue was built for, checked against
// a run: Value is measured, Limit is what the goal allows, lower being
// better for both.
type Target struct {
	ID    string // a short key the README's text refers to
	Goal  string // what is asked, in words
	Value float64
	Limit float64
	// Measured says what was measured, with the numbers it comes from.
	Measured string
	// Missing is true when a row the target needs did not run.
	Missing bool
	// Bound is the limit as a time, for the targets relative to a peer's
	// time (0 otherwise), and BoundText that time formatted.
	Bound     time.Duration
	BoundText string
}

// Met reports whether the run reached the target.
func (t Target) Met() bool { return !t.Missing && t.Value <= t.Limit }

// Verdict says "met" or how far off the target the run was.
func (t Target) Verdict() string {
	switch {
	case t.Missing:
		return "not measured"
	case t.Met():
		return "met"
	}
	return fmt.Sprintf("missed by %.0f%% (%.2f× the limit)", (t.Value/t.Limit-1)*100, t.Value/t.Limit)
}

// Targets checks the run against the goals of the fair queue: in the
// contention experiment, the best setting's wait p99 at most 0.35× and its
// wall time at most 0.6× the best peer's, at most 1 round trip per success
// for it and 2.2 for the fair queue alone; in the scaling scenario, a wait
// p99 that grows no faster than about linearly with the contenders (each
// step multiplies it by at most 1.5× the step's factor) and round trips per
// success that stay flat (no level above 1.25× the smallest level's), for
// both.
func (rep *Report) Targets() []Target {
	var out []Target
	best, okBest := rep.result(Best)
	fair, okFair := rep.result(Fair)
	peerP99, p99Name := rep.bestPeer(func(r Result) float64 { return msf(r.WaitP99) })
	peerWall, wallName := rep.bestPeer(func(r Result) float64 { return r.Wall.Seconds() })
	if len(rep.Results) > 0 {
		t := Target{ID: "p99", Goal: fmt.Sprintf("contention: %s wait p99 ≤ 0.35× the best peer's", Best), Limit: 0.35, Missing: !okBest || p99Name == ""}
		if !t.Missing {
			t.Value = msf(best.WaitP99) / peerP99
			t.Measured = fmt.Sprintf("%s / %.1f ms (%s) = %.2f×", ms(best.WaitP99), peerP99, p99Name, t.Value)
			t.Bound = time.Duration(t.Limit * peerP99 * float64(time.Millisecond))
			t.BoundText = ms(t.Bound)
		}
		out = append(out, t)
		t = Target{ID: "wall", Goal: fmt.Sprintf("contention: %s wall time ≤ 0.6× the best peer's", Best), Limit: 0.6, Missing: !okBest || wallName == ""}
		if !t.Missing {
			t.Value = best.Wall.Seconds() / peerWall
			t.Measured = fmt.Sprintf("%s / %.2f s (%s) = %.2f×", seconds(best.Wall), peerWall, wallName, t.Value)
			t.Bound = time.Duration(t.Limit * peerWall * float64(time.Second))
			t.BoundText = seconds(t.Bound)
		}
		out = append(out, t)
		t = Target{ID: "rt", Goal: fmt.Sprintf("contention: %s round trips / success ≤ 1.0", Best), Limit: 1.0, Missing: !okBest}
		if okBest {
			t.Value = per(best.RoundTrips, best.Succeeded)
			t.Measured = fmt.Sprintf("%d / %d = %.2f", best.RoundTrips, best.Succeeded, t.Value)
		}
		out = append(out, t)
		t = Target{ID: "fairrt", Goal: fmt.Sprintf("contention: %s round trips / success ≤ 2.2", Fair), Limit: 2.2, Missing: !okFair}
		if okFair {
			t.Value = per(fair.RoundTrips, fair.Succeeded)
			t.Measured = fmt.Sprintf("%d / %d = %.2f", fair.RoundTrips, fair.Succeeded, t.Value)
		}
		out = append(out, t)
	}
	if len(rep.Scale) > 0 {
		for _, name := range []string{Fair, Best} {
			out = append(out, rep.linearTarget(name), rep.flatTarget(name))
		}
	}
	return out
}

// Target returns the target with id, and whether the run checked it.
func (rep *Report) Target(id string) (Target, bool) {
	for _, t := range rep.Targets() {
		if t.ID == id {
			return t, !t.Missing
		}
	}
	return Target{}, false
}

// Missed reports whether the run checked the target id and missed it.
func (rep *Report) Missed(id string) bool {
	t, ok := rep.Target(id)
	return ok && !t.Met()
}

// linearTarget checks that name's wait p99 grows no faster than about
// linearly with the contenders: Value is the largest step's growth over the
// growth of the contenders (1 for linear), Limit 1.5.
func (rep *Report) linearTarget(name string) Target {
	row := rep.scaleRow(name)
	t := Target{ID: "linear:" + name, Goal: fmt.Sprintf("scaling: %s wait p99 grows about linearly with contenders (no step above 1.5× linear)", name), Limit: 1.5, Missing: len(row) < 2}
	if t.Missing {
		return t
	}
	var steps []string
	for i := 1; i < len(row); i++ {
		a, b := row[i-1], row[i]
		if a.WaitP99 <= 0 || b.Succeeded == 0 {
			t.Missing = true
			return t
		}
		growth := float64(b.WaitP99) / float64(a.WaitP99)
		linear := float64(b.Contenders) / float64(a.Contenders)
		t.Value = max(t.Value, growth/linear)
		steps = append(steps, fmt.Sprintf("%d→%d: %.1f×", a.Contenders, b.Contenders, growth))
	}
	t.Measured = fmt.Sprintf("p99 %s; steps %s (linear: %.0f× each); worst step %.2f× linear",
		joinLevels(row, func(r ScaleResult) string { return msShort(r.WaitP99) }), strings.Join(steps, ", "),
		float64(row[1].Contenders)/float64(row[0].Contenders), t.Value)
	return t
}

// flatTarget checks that name's round trips per success stay flat: Value
// is the largest level's over the smallest level's, Limit 1.25.
func (rep *Report) flatTarget(name string) Target {
	row := rep.scaleRow(name)
	t := Target{ID: "flat:" + name, Goal: fmt.Sprintf("scaling: %s round trips / success stay flat (no level above 1.25× the %d-contender level's)", name, rep.Params.ScaleProcs*rep.Params.ScaleGoroutines[0]), Limit: 1.25, Missing: len(row) < 2}
	if t.Missing {
		return t
	}
	first := row[0].RoundTripsPerSuccess()
	if first <= 0 {
		t.Missing = true
		return t
	}
	for _, r := range row[1:] {
		t.Value = max(t.Value, r.RoundTripsPerSuccess()/first)
	}
	t.Measured = fmt.Sprintf("%s; highest %.2f× the first", joinLevels(row, func(r ScaleResult) string { return fmt.Sprintf("%.2f", r.RoundTripsPerSuccess()) }), t.Value)
	return t
}

func joinLevels(row []ScaleResult, f func(ScaleResult) string) string {
	parts := make([]string, len(row))
	for i, r := range row {
		parts[i] = f(r)
	}
	return strings.Join(parts, ", ")
}

// scaleRow returns name's results of the scaling scenario, by level.
func (rep *Report) scaleRow(name string) []ScaleResult {
	for _, row := range rep.ScaleRows() {
		if row[0].Impl == name {
			return row
		}
	}
	return nil
}

// result returns name's row of the contention experiment.
func (rep *Report) result(name string) (Result, bool) {
	i := slices.IndexFunc(rep.Results, func(r Result) bool { return r.Impl == name })
	if i < 0 {
		return Result{}, false
	}
	return rep.Results[i], true
}

// bestPeer returns the lowest value of metric among the peers' rows of the
// contention experiment and the peer that has it; "" when no peer ran.
func (rep *Report) bestPeer(metric func(Result) float64) (float64, string) {
	var v float64
	var name string
	for _, r := range rep.Results {
		impl, ok := find(r.Impl)
		if !ok || !impl.Peer || r.Succeeded == 0 {
			continue
		}
		if m := metric(r); name == "" || m < v {
			v, name = m, r.Impl
		}
	}
	return v, name
}

// RoundFloor is the fewest round trips that the last of a round of the
// contention experiment waits with the best setting, if nothing else held
// it up: the critical sections of the other processes' rounds and of the
// ones before it in its own round (two round trips each), a hand-off
// between processes per other process (about one round trip: the release
// script, then the grant message). A granted lock is passed on locally as
// it is, and extended in the background.
func (rep *Report) RoundFloor() int {
	return 2*rep.RoundSections() + (rep.Params.Procs - 1)
}

// RoundSections is the critical sections the last of a round of the
// contention experiment waits for with the best setting: the rounds of the
// other processes and the ones before it in its own round.
func (rep *Report) RoundSections() int {
	p := rep.Params
	return (p.Procs-1)*p.Goroutines + p.Goroutines - 1
}

// Rounds is the rounds of the contention experiment, over all processes.
func (rep *Report) Rounds() int {
	p := rep.Params
	return p.Procs * ((p.Attempts + p.Goroutines - 1) / p.Goroutines)
}

// ResultOf returns name's row of the contention experiment, zero when it
// did not run.
func (rep *Report) ResultOf(name string) Result {
	r, _ := rep.result(name)
	return r
}

// WallFloor is the fewest round trips in sequence the whole contention
// experiment takes with the best setting: every critical section (two
// each), and per round of a process a hand-off between processes.
func (rep *Report) WallFloor() int {
	return 2*rep.Params.Procs*rep.Params.Attempts + rep.Rounds()
}

// BestRTT is the round trip measured during the best setting's run of the
// contention experiment (the median PING through the proxy), or the run's
// when there is none: the machine's load drifts between rows.
func (rep *Report) BestRTT() time.Duration {
	if r, ok := rep.result(Best); ok && r.RTT > 0 {
		return r.RTT
	}
	return rep.MeasuredRTT
}

// AtRTT is n round trips at BestRTT.
func (rep *Report) AtRTT(n int) time.Duration { return time.Duration(n) * rep.BestRTT() }

// MsOf formats d in milliseconds, for the README.
func MsOf(d time.Duration) string { return ms(d) }

// SecondsOf formats d in seconds, for the README.
func SecondsOf(d time.Duration) string { return seconds(d) }
