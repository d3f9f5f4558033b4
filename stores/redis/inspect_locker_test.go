package redisstore_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// lockerSees holds names through l (one exclusive, two shared holds
// unless exclusiveOnly) and checks that l.List lists them by name and
// l.Inspect tells their holders, identified by the records in their
// tokens.
func lockerSees(t *testing.T, l *core.Locker, exclusiveOnly bool) {
	t.Helper()
	ctx := context.Background()
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	prefix := uniq(t) + ":"
	ex, err := l.Acquire(core.ContextWithRequestID(ctx, "req-42"), prefix+"ex")
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Release(ctx)
	want := []string{prefix + "ex"}
	if !exclusiveOnly {
		for range 2 {
			r, err := l.Acquire(ctx, prefix+"read", core.Shared())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release(ctx)
		}
		want = append(want, prefix+"read")
	}
	var got []string
	for cursor := ""; ; {
		names, next, err := l.List(ctx, prefix, cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, names...)
		if cursor = next; cursor == "" {
			break
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
	st, err := l.Inspect(ctx, prefix+"ex")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	h := st.Holders[0]
	host, _ := os.Hostname()
	if h.Token != ex.Token() || !h.Exclusive || !h.Identified || h.Holder.PID != os.Getpid() || h.Holder.Host != host || h.Holder.RequestID != "req-42" {
		t.Fatalf("holder = %+v; want the lease's token, identified (host %s, pid %d, request req-42)", h, host, os.Getpid())
	}
	if h.TTL <= 0 || h.TTL > time.Minute {
		t.Fatalf("holder TTL = %v", h.TTL)
	}
	if exclusiveOnly {
		return
	}
	st, err = l.Inspect(ctx, prefix+"read")
	if err != nil || len(st.Holders) != 2 || !st.Holders[0].Identified || st.Holders[0].Exclusive {
		t.Fatalf("Inspect(read) = %+v, %v", st, err)
	}
}

// A core.Locker on the store lists its names and tells who holds them.
func TestLockerListsAndInspects(t *testing.T) {
	leakCheck(t)
	l := core.New(shared.Client(t), core.WithTTL(time.Minute), core.WithFencing())
	defer l.Close()
	lockerSees(t, l, false)
}

// A core.Locker on Redlock lists its names and tells who holds them.
func TestRedlockLockerListsAndInspects(t *testing.T) {
	leakCheck(t)
	nodes := redistest.StartNodes(t, 3)
	l := core.NewRedlock(nodes.Clients(t), core.WithTTL(time.Minute), core.WithFencing())
	defer l.Close()
	lockerSees(t, l, true)
}
