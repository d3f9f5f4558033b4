package hotspot_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
)

// waitHot polls g.Hot(n) until ok accepts it, for at most 30 s.
func waitHot(t *testing.T, g *hotspot.Guard, n int, ok func([]hotspot.Hot) bool) []hotspot.Hot {
	t.Helper()
	var hot []hotspot.Hot
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if hot = g.Hot(n); ok(hot) {
			return hot
		}
	}
	t.Fatalf("Hot(%d) never became what the test waits for: %+v", n, hot)
	return nil
}

// TestHotSnapshot: Hot reports a pinned name's holder and its local
// waiters while they queue, the most waited-on first, then the name idle
// (still hot) once they are gone; a cold name held alone is not reported;
// n bounds the list.
func TestHotSnapshot(t *testing.T) {
	leakCheck(t)
	busy, quiet, cold := uniq(t), uniq(t), uniq(t)
	in := newInstance(t, []hotspot.Option{hotspot.WithKeys(busy, quiet)})
	g, l := in.guard, in.locker
	ctx := context.Background()
	if hot := g.Hot(0); hot != nil {
		t.Fatalf("Hot(0) = %+v, want nil", hot)
	}

	held, err := l.Acquire(ctx, busy)
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.Acquire(ctx, quiet)
	if err != nil {
		t.Fatal(err)
	}
	lone, err := l.Acquire(ctx, cold)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() {
			lease, err := l.Acquire(ctx, busy)
			if err == nil {
				err = lease.Release(ctx)
			}
			done <- err
		}()
	}
	busyKey, _ := l.Key(busy)
	quietKey, _ := l.Key(quiet)
	hot := waitHot(t, g, 10, func(h []hotspot.Hot) bool { return len(h) > 0 && h[0].Waiters == 2 })
	if len(hot) != 2 {
		t.Fatalf("Hot(10) = %+v, want the two pinned names only", hot)
	}
	if h := hot[0]; h.Key != busyKey || !h.Pinned || h.Holders != 1 || h.Waiters != 2 || h.HotUntil.IsZero() {
		t.Errorf("first = %+v, want %s pinned, 1 holder, 2 waiters, hot until a time", h, busyKey)
	}
	if h := hot[1]; h.Key != quietKey || !h.Pinned || h.Holders != 1 || h.Waiters != 0 || !h.HotUntil.IsZero() {
		t.Errorf("second = %+v, want %s pinned, 1 holder, no waiter, never contended", h, quietKey)
	}
	if one := g.Hot(1); len(one) != 1 || one[0].Key != busyKey {
		t.Errorf("Hot(1) = %+v, want %s alone", one, busyKey)
	}

	for _, lease := range []*core.Lease{held, other, lone} {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	hot = g.Hot(10)
	if len(hot) != 2 {
		t.Fatalf("idle: Hot(10) = %+v, want the two pinned names", hot)
	}
	for _, h := range hot {
		if h.Holders != 0 || h.Waiters != 0 || !h.Pinned {
			t.Errorf("idle: %+v, want pinned with no holder nor waiter", h)
		}
	}
	// Hot does not touch the LRU order: the most recently used comes first
	// before and after another call.
	if again := g.Hot(10); again[0].Key != hot[0].Key {
		t.Errorf("Hot changed the order: %+v, then %+v", hot, again)
	}
}
