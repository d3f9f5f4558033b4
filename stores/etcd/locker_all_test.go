package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// TestLockerAcquireAll: AcquireAll takes several names in one transaction;
// a name held by a share keeps it waiting.
func TestLockerAcquireAll(t *testing.T) {
	leakCheck(t)
	s := newStore(t, newClient(t, ""))
	locker := core.NewWithStore(s, core.WithTTL(10*time.Second), core.WithWait(20*time.Second), core.WithFencing())
	t.Cleanup(func() { _ = locker.Close() })
	ctx := context.Background()
	a, b := "all:"+uniq(t), "all:"+uniq(t)
	r, err := locker.Acquire(ctx, b, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.AcquireAll(ctx, []string{b, a}, core.Wait(time.Second)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("AcquireAll of a shared name: %v, want ErrTimeout", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := locker.AcquireAll(ctx, []string{b, a})
	if err != nil {
		t.Fatal(err)
	}
	if all.FenceOf(a) == 0 || all.FenceOf(b) == 0 {
		t.Fatalf("fences %d, %d", all.FenceOf(a), all.FenceOf(b))
	}
	if err := all.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
