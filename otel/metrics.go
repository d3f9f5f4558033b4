package lockotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/reqlock/reqlock/hotspot"
)

// Names of the instruments. Durations are in seconds.
const (
	MetricAcquireDuration = "reqlock.acquire.duration"  // histogram, s: route, mode, permits, outcome, error.type
	MetricHoldDuration    = "reqlock.hold.duration"     // histogram, s: route, mode, permits, outcome, error.type (of the release)
	MetricAttempts        = "reqlock.acquire.attempts"  // counter, {attempt}: route, mode, permits, outcome, error.type
	MetricAcquires        = "reqlock.acquires"          // counter, {acquire}: route, mode, permits, outcome, error.type
	MetricLeasesHeld      = "reqlock.leases.held"       // up-down counter, {lease}: route, mode, permits
	MetricAcquirePending  = "reqlock.acquire.pending"   // up-down counter, {request}: route, mode
	MetricHotspotHits     = "reqlock.hotspot.hits"      // observable counter, {acquire} (WithGuard)
	MetricHotspotBypasses = "reqlock.hotspot.bypasses"  // observable counter, {acquire} (WithGuard)
	MetricHotspotEvicts   = "reqlock.hotspot.evictions" // observable counter, {entry} (WithGuard)
	MetricHotspotHandoffs = "reqlock.hotspot.handoffs"  // observable counter, {handoff} (WithGuard)
	MetricHotspotSize     = "reqlock.hotspot.size"      // observable up-down counter, {entry} (WithGuard)
)

// acquireBuckets are the histogram bounds of reqlock.acquire.duration, in
// seconds: from half a millisecond (an uncontended acquire on a nearby Redis)
// to 10 s (beyond any sensible wait budget), about three per decade. They are
// advice to the SDK; a View overrides them.
var acquireBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// holdBuckets are the histogram bounds of reqlock.hold.duration, in seconds:
// critical sections run from a millisecond to the TTL, which defaults to 10 s
// and may be longer.
var holdBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// instruments are the synchronous instruments of a Handler.
type instruments struct {
	acquireDuration metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	attempts        metric.Int64Counter
	acquires        metric.Int64Counter
	held            metric.Int64UpDownCounter
	pending         metric.Int64UpDownCounter
}

// newInstruments creates the instruments on meter. An instrument the meter
// refuses is reported to otel.Handle and replaced by a no-op one, as the
// contrib instrumentations do: telemetry never breaks locking.
func newInstruments(meter metric.Meter) instruments {
	var ins instruments
	var err error
	nop := noop.Meter{}
	if ins.acquireDuration, err = meter.Float64Histogram(MetricAcquireDuration,
		metric.WithUnit("s"),
		metric.WithDescription("Time taken by lock acquires, from the call to the lock or the failure, local wait included."),
		metric.WithExplicitBucketBoundaries(acquireBuckets...)); err != nil {
		otel.Handle(err)
		ins.acquireDuration, _ = nop.Float64Histogram(MetricAcquireDuration)
	}
	if ins.holdDuration, err = meter.Float64Histogram(MetricHoldDuration,
		metric.WithUnit("s"),
		metric.WithDescription("Time leases were held, from the acquire to the end of the release."),
		metric.WithExplicitBucketBoundaries(holdBuckets...)); err != nil {
		otel.Handle(err)
		ins.holdDuration, _ = nop.Float64Histogram(MetricHoldDuration)
	}
	if ins.attempts, err = meter.Int64Counter(MetricAttempts,
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Redis attempts made by lock acquires.")); err != nil {
		otel.Handle(err)
		ins.attempts, _ = nop.Int64Counter(MetricAttempts)
	}
	if ins.acquires, err = meter.Int64Counter(MetricAcquires,
		metric.WithUnit("{acquire}"),
		metric.WithDescription("Lock acquires, by outcome.")); err != nil {
		otel.Handle(err)
		ins.acquires, _ = nop.Int64Counter(MetricAcquires)
	}
	if ins.held, err = meter.Int64UpDownCounter(MetricLeasesHeld,
		metric.WithUnit("{lease}"),
		metric.WithDescription("Leases acquired and not released yet.")); err != nil {
		otel.Handle(err)
		ins.held, _ = nop.Int64UpDownCounter(MetricLeasesHeld)
	}
	// As db.client.connection.pending_requests counts the requests waiting
	// for a connection of a pool, this counts the requests waiting for a
	// lock: Acquires begun and not ended, in the local queue, in the
	// store's queue (WithFair) or spinning.
	if ins.pending, err = meter.Int64UpDownCounter(MetricAcquirePending,
		metric.WithUnit("{request}"),
		metric.WithDescription("Lock acquires in progress: requests waiting for a lock.")); err != nil {
		otel.Handle(err)
		ins.pending, _ = nop.Int64UpDownCounter(MetricAcquirePending)
	}
	return ins
}

// guardCounters are the cumulative counters of hotspot.Stats and their
// instruments; Size is apart, as it is not cumulative.
var guardCounters = []struct {
	name, unit, desc string
	value            func(hotspot.Stats) int64
}{
	{MetricHotspotHits, "{acquire}", "Acquires of hot names that went through a local lock of the hotspot guard.",
		func(s hotspot.Stats) int64 { return s.Hits }},
	{MetricHotspotBypasses, "{acquire}", "Acquires of hot names that went straight to Redis because every local lock of the hotspot guard was in use.",
		func(s hotspot.Stats) int64 { return s.Bypasses }},
	{MetricHotspotEvicts, "{entry}", "Idle local locks evicted from the hotspot guard.",
		func(s hotspot.Stats) int64 { return s.Evictions }},
	{MetricHotspotHandoffs, "{handoff}", "Locks handed from a holder to a local waiter without a Redis round trip.",
		func(s hotspot.Stats) int64 { return s.Handoffs }},
}

// observeGuard registers observable instruments reporting g's Stats, with
// one callback calling Stats once per collection.
func observeGuard(meter metric.Meter, g Guard) (metric.Registration, error) {
	counters := make([]metric.Int64ObservableCounter, len(guardCounters))
	observables := make([]metric.Observable, 0, len(guardCounters)+1)
	for i, c := range guardCounters {
		ctr, err := meter.Int64ObservableCounter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
		if err != nil {
			return nil, err
		}
		counters[i] = ctr
		observables = append(observables, ctr)
	}
	size, err := meter.Int64ObservableUpDownCounter(MetricHotspotSize,
		metric.WithUnit("{entry}"),
		metric.WithDescription("Local locks the hotspot guard keeps now."))
	if err != nil {
		return nil, err
	}
	observables = append(observables, size)
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := g.Stats()
		for i, c := range guardCounters {
			o.ObserveInt64(counters[i], c.value(s))
		}
		o.ObserveInt64(size, int64(s.Size))
		return nil
	}, observables...)
}
