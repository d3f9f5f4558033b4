package core_test

import (
	"context"
	"testing"

	"github.com/reqlock/reqlock/core"
)

// maxUncontendedAllocs bounds the heap allocations of one uncontended
// acquire+release (two round trips), the whole process's, go-redis's
// included. It is what bsm/redislock v0.9.4 allocates for the same on the
// same go-redis (v9.22.0) in BenchmarkUncontended of the benchmarks module
// (cd benchmarks && go test ./lockbench -run '^$' -bench Uncontended
// -benchmem): 35, where reqlock allocates 25, and 26 with WithFair (one
// less here, without the benchmark's adapter). Counts of allocations do not
// vary between runs as times do; a new go-redis may move them by a few.
const maxUncontendedAllocs = 35

// TestUncontendedAllocations holds reqlock's uncontended path, fair or not,
// to at most the allocations of bsm/redislock (see maxUncontendedAllocs).
func TestUncontendedAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []core.Option
	}{
		{"default", nil},
		{"fair", []core.Option{core.WithFair()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, tc.opts...)
			name := uniq(t)
			ctx := context.Background()
			cycle := func() {
				lease, err := e.locker.Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // loads the scripts into the server
			e.rt.N.Store(0)
			allocs := testing.AllocsPerRun(100, cycle)
			if n := e.rt.N.Load(); n != 2*101 { // AllocsPerRun runs cycle once more, to warm up
				t.Fatalf("%d round trips for 101 acquire+release cycles, want 2 each", n)
			}
			t.Logf("%v allocations per uncontended acquire+release", allocs)
			if allocs > maxUncontendedAllocs {
				t.Errorf("an uncontended acquire+release allocates %v times, more than bsm/redislock's %d", allocs, maxUncontendedAllocs)
			}
		})
	}
}
