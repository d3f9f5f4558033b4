package lockotel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// modeCases are the lock modes, with what telemetry must say of each.
var modeCases = []struct {
	name    string
	opts    []core.CallOption
	mode    string
	permits int // PermitsKey, 0 for absent
	holders int // leases taken at once
}{
	{"exclusive", nil, "exclusive", 0, 1},
	{"shared", []core.CallOption{core.Shared()}, "shared", 0, 3},
	{"permits", []core.CallOption{core.Permits(3)}, "permits", 3, 3},
}

// TestModeAttributes: spans and metrics carry the lock's mode, the n of
// Permits where set, and on spans the slot of each permit.
func TestModeAttributes(t *testing.T) {
	for _, c := range modeCases {
		t.Run(c.name, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			e := newEnv(t, nil, nil)
			name := uniq(t)
			ctx, req := e.request(context.Background())
			var leases []*core.Lease
			for range c.holders { // shares and permits hold the name together
				lease, err := e.locker.Acquire(ctx, name, append(c.opts, core.Wait(0))...)
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, lease)
			}
			modeAttrs := []attribute.KeyValue{lockotel.RouteKey.String(route), lockotel.ModeKey.String(c.mode)}
			if c.permits > 0 {
				modeAttrs = append(modeAttrs, lockotel.PermitsKey.Int(c.permits))
			}
			rm := e.collect(t)
			if n := sum(t, rm, lockotel.MetricLeasesHeld, modeAttrs...); n != int64(c.holders) {
				t.Errorf("leases held in mode %s = %d, want %d", c.mode, n, c.holders)
			}
			for _, lease := range leases {
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			req.End()

			acquires, releases := e.ended(lockotel.SpanAcquire), e.ended(lockotel.SpanRelease)
			if len(acquires) != c.holders || len(releases) != c.holders {
				t.Fatalf("%d acquire and %d release spans, want %d of each", len(acquires), len(releases), c.holders)
			}
			slots := map[string][]int64{}
			for _, s := range append(acquires, releases...) {
				checkMode(t, s, c.mode, c.permits)
				if c.permits > 0 {
					v, _ := attr(s, lockotel.SlotKey)
					slots[s.Name()] = append(slots[s.Name()], v.AsInt64())
				}
			}
			for span, got := range slots {
				if slices.Sort(got); !slices.Equal(got, []int64{0, 1, 2}) {
					t.Errorf("slots on the %s spans = %v, want 0, 1 and 2", span, got)
				}
			}

			rm = e.collect(t)
			acquired := append(slices.Clone(modeAttrs), lockotel.OutcomeKey.String(lockotel.OutcomeAcquired))
			for _, m := range []string{lockotel.MetricAcquires, lockotel.MetricAttempts} {
				if n := sum(t, rm, m, acquired...); n != int64(c.holders) {
					t.Errorf("%s in mode %s = %d, want %d", m, c.mode, n, c.holders)
				}
			}
			if n := histCount(t, rm, lockotel.MetricAcquireDuration, acquired...); n != int64(c.holders) {
				t.Errorf("acquire durations in mode %s = %d, want %d", c.mode, n, c.holders)
			}
			released := append(slices.Clone(modeAttrs), lockotel.OutcomeKey.String(lockotel.OutcomeReleased))
			if n := histCount(t, rm, lockotel.MetricHoldDuration, released...); n != int64(c.holders) {
				t.Errorf("hold durations in mode %s = %d, want %d", c.mode, n, c.holders)
			}
			if n := sum(t, rm, lockotel.MetricLeasesHeld, modeAttrs...); n != 0 {
				t.Errorf("leases held in mode %s = %d after the releases, want 0", c.mode, n)
			}
			if m, ok := find(rm, lockotel.MetricAcquirePending); !ok {
				t.Error("no pending metric")
			} else {
				for _, p := range points(t, m) {
					if v, _ := p.attrs.Value(lockotel.ModeKey); v.AsString() != c.mode {
						t.Errorf("pending has mode %q, want %q", v.AsString(), c.mode)
					}
					if p.n != 0 {
						t.Errorf("pending = %d after the acquires, want 0 (%v)", p.n, p.attrs.ToSlice())
					}
				}
			}
			e.noName(t, name)
		})
	}
}

// checkMode checks the mode attributes of a span: the mode always, the n of
// Permits and the slot with mode permits only.
func checkMode(t *testing.T, s sdktrace.ReadOnlySpan, mode string, permits int) {
	t.Helper()
	if v, _ := attr(s, lockotel.ModeKey); v.AsString() != mode {
		t.Errorf("%s: mode = %q, want %q", s.Name(), v.AsString(), mode)
	}
	v, ok := attr(s, lockotel.PermitsKey)
	if permits == 0 && ok || permits > 0 && v.AsInt64() != int64(permits) {
		t.Errorf("%s: permits = %v (set %v), want %d (0 for absent)", s.Name(), v.AsInt64(), ok, permits)
	}
	if _, ok := attr(s, lockotel.SlotKey); ok != (permits > 0) {
		t.Errorf("%s: slot set %v, want it with mode permits only", s.Name(), ok)
	}
}

// TestAcquireAllEachName: each name of an AcquireAll is an acquire of its
// own, and a release of its own when the lease ends, in every mode.
func TestAcquireAllEachName(t *testing.T) {
	for _, c := range modeCases {
		t.Run(c.name, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			e := newEnv(t, nil, nil)
			names := []string{uniq(t), uniq(t), uniq(t)}
			ctx, req := e.request(context.Background())
			lease, err := e.locker.AcquireAll(ctx, names, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			modeAttrs := []attribute.KeyValue{lockotel.RouteKey.String(route), lockotel.ModeKey.String(c.mode)}
			if n := sum(t, e.collect(t), lockotel.MetricLeasesHeld, modeAttrs...); n != int64(len(names)) {
				t.Errorf("leases held = %d, want one per name, %d", n, len(names))
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			req.End()
			for _, span := range []string{lockotel.SpanAcquire, lockotel.SpanRelease} {
				spans := e.ended(span)
				if len(spans) != len(names) {
					t.Errorf("%d %s spans, want one per name, %d", len(spans), span, len(names))
				}
				for _, s := range spans {
					checkMode(t, s, c.mode, c.permits)
				}
			}
			for _, s := range e.ended(lockotel.SpanAcquire) {
				checkAcquireSpan(t, s, req, lockotel.OutcomeAcquired, "")
			}
			rm := e.collect(t)
			acquired := append(modeAttrs, lockotel.OutcomeKey.String(lockotel.OutcomeAcquired))
			if n := sum(t, rm, lockotel.MetricAcquires, acquired...); n != int64(len(names)) {
				t.Errorf("acquires = %d, want one per name, %d", n, len(names))
			}
			if n := sum(t, rm, lockotel.MetricLeasesHeld); n != 0 {
				t.Errorf("leases held = %d after the release, want 0", n)
			}
			if n := sum(t, rm, lockotel.MetricAcquirePending); n != 0 {
				t.Errorf("pending = %d after the acquire, want 0", n)
			}
			e.noName(t, names...)
		})
	}
}

// TestLogModes: the log lines name the mode of shared and permit locks,
// with the n of Permits and the slot, and leave it out of exclusive ones;
// an AcquireAll is logged name by name, each with its own fence.
func TestLogModes(t *testing.T) {
	adaptertest.LeakCheck(t)
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithName()}, core.WithFencing())
	ctx := core.ContextWithRoute(context.Background(), route)
	shared, permit, names := uniq(t), uniq(t), []string{uniq(t), uniq(t)}
	var leases []*core.Lease
	take := func(lease *core.Lease, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	for range 2 { // names[0] gets a fence of its own
		take(l.Acquire(ctx, names[0]))
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		leases = leases[:0]
	}
	skip := len(buf.lines(t))
	take(l.Acquire(ctx, shared, core.Shared()))
	take(l.Acquire(ctx, permit, core.Permits(2)))
	take(l.Acquire(ctx, permit, core.Permits(2)))
	take(l.AcquireAll(ctx, names))
	for _, lease := range leases {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	byLock := map[string][]map[string]any{}
	for _, line := range buf.lines(t)[skip:] {
		lock, _ := line["lock"].(string)
		byLock[lock] = append(byLock[lock], line)
	}
	for _, msg := range []string{"lock acquire", "lock release"} {
		for _, line := range byMsg(byLock[shared], msg) {
			want(t, line, map[string]any{"mode": "shared", "outcome": nil})
			noKeys(t, line, "permits", "slot")
		}
		var slots []float64
		for _, line := range byMsg(byLock[permit], msg) {
			want(t, line, map[string]any{"mode": "permits", "permits": 2.0, "slot": nil})
			s, _ := line["slot"].(float64)
			slots = append(slots, s)
		}
		if slices.Sort(slots); !slices.Equal(slots, []float64{0, 1}) {
			t.Errorf("%s lines of the permits: slots %v, want 0 and 1", msg, slots)
		}
		for _, name := range names {
			lines := byMsg(byLock[name], msg)
			if len(lines) != 1 {
				t.Errorf("%d %s lines of %s, want 1", len(lines), msg, name)
				continue
			}
			noKeys(t, lines[0], "mode", "permits", "slot")
			if f, _ := lines[0]["fence"].(float64); f == 0 || int64(f) != leases[3].FenceOf(name) {
				t.Errorf("%s line of %s: fence %v, want the name's own %d", msg, name, lines[0]["fence"], leases[3].FenceOf(name))
			}
		}
	}
	if t.Failed() {
		t.Log(buf)
	}
}

// byMsg returns the lines with message msg.
func byMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range lines {
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		out = append(out, map[string]any{"msg": fmt.Sprintf("no %q line", msg)})
	}
	return out
}

// noKeys fails the test if line has one of keys.
func noKeys(t *testing.T, line map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := line[k]; ok {
			t.Errorf("line %v: %s = %v, want none", line, k, v)
		}
	}
}
