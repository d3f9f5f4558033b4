package lockbench

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// SoloResult is one implementation's row of the uncontended scenario: one
// goroutine acquiring and releasing distinct names in turn.
type SoloResult struct {
	Impl       string
	Ops        int // acquire+release pairs
	Failed     int
	RoundTrips int64
	Mallocs    uint64 // heap allocations of the worker process during the run
	Bytes      uint64 // bytes allocated
	Mean       time.Duration
	P50        time.Duration
	P99        time.Duration
	Errors     []string
	// Store, Exchanges, Stall and RTT are set in the stores section: as
	// Result's.
	Store     string        `json:",omitempty"`
	Exchanges int64         `json:",omitempty"`
	Stall     time.Duration `json:",omitempty"`
	RTT       time.Duration `json:",omitempty"`
}

// Per returns n per acquire+release.
func (r SoloResult) Per(n float64) float64 {
	if r.Ops == 0 {
		return 0
	}
	return n / float64(r.Ops)
}

// BeyondRoundTrips is the p50 of an acquire+release less its round trips
// (the proxy's exchanges) at the median PING round trip of the run: what
// the store's server and client take beyond the network. Zero outside the
// stores section.
func (r SoloResult) BeyondRoundTrips() time.Duration {
	return r.P50 - time.Duration(r.Per(float64(r.Exchanges))*float64(r.RTT))
}

// solo acquires and releases p.SoloOps distinct names one after another,
// measuring the heap allocations of the whole process meanwhile (its client
// goroutines included: their work is the lock's).
func solo(ctx context.Context, lock Lock, p Params, proc int, rt *RoundTrips) *report {
	r := &report{Waits: make([]time.Duration, 0, p.SoloOps)}
	names := make([]string, p.SoloOps)
	for i := range names {
		names[i] = fmt.Sprintf("%s:solo:%d:%d", p.Name, proc, i)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rt.n.Store(0)
	for _, name := range names {
		start := time.Now()
		release, err := lock.Acquire(ctx, name)
		if err != nil {
			r.Failed++
			r.noteError(err)
			continue
		}
		if err := release(ctx); err != nil {
			r.ReleaseErrors++
			r.noteError(fmt.Errorf("release: %w", err))
		}
		r.Waits = append(r.Waits, time.Since(start))
		r.Succeeded++
	}
	runtime.ReadMemStats(&after)
	r.Mallocs = after.Mallocs - before.Mallocs
	r.Bytes = after.TotalAlloc - before.TotalAlloc
	return r
}

// mergeSolo turns the worker's report into a SoloResult.
func mergeSolo(name string, p Params, run workerRun) SoloResult {
	t := run.tally()
	res := SoloResult{
		Impl:       name,
		Ops:        p.SoloOps,
		Failed:     t.failed + t.releaseErrors,
		RoundTrips: t.roundTrips,
		Mean:       mean(t.waits),
		P50:        percentile(t.waits, 50),
		P99:        percentile(t.waits, 99),
		Errors:     t.errors,
		Exchanges:  run.exchanges,
		Stall:      run.stall,
		RTT:        run.rtt,
	}
	for _, r := range run.reports {
		res.Mallocs += r.Mallocs
		res.Bytes += r.Bytes
	}
	return res
}
