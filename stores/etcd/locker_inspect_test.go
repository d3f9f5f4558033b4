package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// TestLockerListAndInspect: a Locker on the store lists its held names
// under a prefix and tells who holds one (the holder identity its token
// carries), exclusively or by shares.
func TestLockerListAndInspect(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	locker := core.NewWithStore(s, core.WithPrefix(fmt.Sprintf("test-%d-%d:", time.Now().UnixNano(), seq.Add(1))), core.WithTTL(10*time.Second), core.WithFencing())
	t.Cleanup(func() { _ = locker.Close() })
	ctx := core.ContextWithRequestID(context.Background(), "req-42")
	x, err := locker.Acquire(ctx, "order:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Release(context.Background()) })
	for _, tok := range []string{"a", "b"} {
		r, err := locker.Acquire(ctx, "order:2", core.Shared())
		if err != nil {
			t.Fatalf("share %s: %v", tok, err)
		}
		t.Cleanup(func() { _ = r.Release(context.Background()) })
	}
	names, next, err := locker.List(ctx, "order:", "", 10)
	if err != nil || next != "" || !slices.Equal(names, []string{"order:1", "order:2"}) {
		t.Fatalf("List: %q, %q, %v", names, next, err)
	}
	st, err := locker.Inspect(ctx, "order:1")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	host, _ := os.Hostname()
	h := st.Holders[0]
	if !h.Identified || h.Holder.RequestID != "req-42" || h.Holder.PID != os.Getpid() || h.Holder.Host != host || !h.Exclusive || h.TTL <= 0 || h.Fence != x.Fence() {
		t.Errorf("Inspect: holder %+v; want this process, request req-42, fence %d", h, x.Fence())
	}
	st, err = locker.Inspect(ctx, "order:2")
	if err != nil || len(st.Holders) != 2 || !st.Holders[0].Identified || !st.Holders[1].Identified {
		t.Errorf("Inspect of shares: %+v, %v", st, err)
	}
}
