package lockotel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/reqlock/reqlock/hotspot"
)

// Option configures a Handler.
type Option func(*config)

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	guard Guard
}

// WithTracerProvider sets the TracerProvider the spans come from. Without it
// (or with nil), New uses the global provider (otel.GetTracerProvider), which
// forwards to a provider installed later with otel.SetTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the MeterProvider the instruments come from. Without
// it (or with nil), New uses the global provider (otel.GetMeterProvider),
// which forwards to a provider installed later with otel.SetMeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// Guard is what the Handler reports of a local queue with WithGuard: the
// typed counters of the hotspot package's Guard, which implements it. Stats
// is called once per metric collection, from the collecting goroutine, so it
// must be safe for concurrent use.
type Guard interface {
	Stats() hotspot.Stats
}

// WithGuard reports g's Stats as the observable instruments
// reqlock.hotspot.hits, .bypasses, .evictions, .handoffs (counters) and
// reqlock.hotspot.size (an up-down counter). Call Handler.Close to stop
// observing it. With several WithGuard options, the last one wins; a nil g
// reports nothing.
func WithGuard(g Guard) Option {
	return func(c *config) { c.guard = g }
}
