package hotspot

import (
	"hash/maphash"
	"sync/atomic"
)

// inflightBuckets is the number of counters of the in-flight sketch; a power
// of two.
const inflightBuckets = 4096

// inflight is the automatic hot-name detector. It counts the acquires in
// flight (from the Guard's Acquire to the lease's release, or to a failed
// acquire) per hash bucket of their Redis key, in a fixed array: a name that
// is never contended costs a hash and two atomic adds, and takes no memory
// of its own. An acquire that finds its bucket already counted has a second
// goroutine of this process on its name (or, rarely, on a name of the same
// bucket) and goes through the local lock table, where contention is then
// seen for sure.
type inflight struct {
	seed   maphash.Seed
	counts [inflightBuckets]atomic.Int32
}

func newInflight() *inflight {
	return &inflight{seed: maphash.MakeSeed()}
}

// enter counts an acquire of key and returns its bucket, and whether another
// acquire was in flight in that bucket.
func (f *inflight) enter(key string) (bucket uint32, shared bool) {
	bucket = uint32(maphash.String(f.seed, key) & (inflightBuckets - 1))
	return bucket, f.counts[bucket].Add(1) > 1
}

// exit uncounts an acquire that enter counted.
func (f *inflight) exit(bucket uint32) {
	f.counts[bucket].Add(-1)
}

// total returns the acquires in flight.
func (f *inflight) total() int {
	n := 0
	for i := range f.counts {
		n += int(f.counts[i].Load())
	}
	return n
}
