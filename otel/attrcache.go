package lockotel

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/reqlock/reqlock/core"
)

// maxCachedAttrs bounds the attrCache. Routes are templates, so a service has
// tens of them, each with a mode or two and a dozen outcomes; a label with higher cardinality
// (which the adapters never set) is served uncached beyond the bound.
const maxCachedAttrs = 4096

// attrKey identifies the attributes of a measurement: a route, the lock's
// mode and its n of Permits (0 when not known or not permits), and an
// outcome with its error type, or "" for the route and mode alone.
type attrKey struct {
	route            string
	mode             core.Mode
	permits          int
	outcome, errType string
}

// attrs are the options built once per attrKey, so that a lock costs no
// attribute-set construction (a sort and several allocations) per call.
// The option slices are passed with "record..." and "add...", which spares
// the allocation of a variadic slice per call.
type attrs struct {
	record []metric.RecordOption // the attribute set of the key
	add    []metric.AddOption    // the same
	span   trace.SpanStartEventOption
}

// attrCache maps attrKeys to their attrs. A Handler has its own; there is no
// package-level state.
type attrCache struct {
	mu sync.RWMutex
	m  map[attrKey]*attrs
}

// get returns the attrs of route and mode (with permits, the n of
// core.Permits, when mode is core.ModePermits and n is known) and of outcome
// and errType ("" and "" for the route and mode alone).
func (c *attrCache) get(route string, mode core.Mode, permits int, outcome, errType string) *attrs {
	if mode != core.ModePermits {
		permits = 0
	}
	k := attrKey{route, mode, permits, outcome, errType}
	c.mu.RLock()
	a := c.m[k]
	c.mu.RUnlock()
	if a != nil {
		return a
	}
	kv := make([]attribute.KeyValue, 0, 5)
	if route != "" {
		kv = append(kv, RouteKey.String(route))
	}
	kv = append(kv, ModeKey.String(mode.String()))
	if permits > 0 {
		kv = append(kv, PermitsKey.Int(permits))
	}
	if outcome != "" {
		kv = append(kv, OutcomeKey.String(outcome))
	}
	if errType != "" {
		kv = append(kv, ErrorTypeKey.String(errType))
	}
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	a = &attrs{
		record: []metric.RecordOption{set},
		add:    []metric.AddOption{set},
		span:   trace.WithAttributes(kv...),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[attrKey]*attrs)
	}
	if cached := c.m[k]; cached != nil {
		return cached
	}
	if len(c.m) < maxCachedAttrs {
		c.m[k] = a
	}
	return a
}
