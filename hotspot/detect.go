package hotspot

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/reqlock/reqlock/core"
)

// Sizes of the in-flight sketch: a power of two from minBuckets to
// maxBuckets, bucketsPerEntry per entry of the Guard's capacity.
//
// The sketch suspects contention for an acquire whose bucket is shared with
// another one in flight; with F acquires of distinct names in flight over B
// buckets, about F²/2B of them are suspected wrongly and take a tentative
// entry, of which the table allows capacity. With B = 32 × capacity, that is
// reached at about 8 × capacity acquires in flight at once; beyond it, the
// names that collide go straight to Redis, automatic detection of new hot
// names pauses, and nothing else changes. Each bucket takes 4 bytes: 128 KiB
// for the default capacity.
const (
	minBuckets      = 4096
	maxBuckets      = 1 << 20
	bucketsPerEntry = 32
)

// inflight is the automatic hot-name detector. It counts the acquires in
// flight (from the Guard's Enter to the lease's release, or to a failed
// acquire) per hash bucket of their Redis key, in a fixed array: a name that
// is never contended costs a hash and two atomic adds, and takes no memory
// of its own (its turn is its bucket, see slot). An acquire that finds its bucket already counted may have a
// second goroutine of this process on its name (or, more likely when many
// names are in flight, another name in the same bucket) and goes through the
// local lock table with a tentative entry, where contention is then seen for
// sure.
type inflight struct {
	seed   maphash.Seed
	mask   uint64
	counts []slot
}

// slot counts the acquires in flight in one bucket. It is also the turn
// (core.LocalTurn) of an acquire that takes no local lock, so that the Locker
// uncounts it when the lease is released: such a turn has nothing to pass,
// and its Leave is the count going down. Being an element of the array, it
// costs no allocation.
type slot struct{ n atomic.Int32 }

var _ core.LocalTurn = (*slot)(nil)

// Passed returns nil: no lease is handed off without a local lock.
func (s *slot) Passed() *core.Lease { return nil }

// Pass reports false: no lease is handed off without a local lock.
func (s *slot) Pass(*core.Lease) bool { return false }

// Leave uncounts the acquire.
func (s *slot) Leave() { s.n.Add(-1) }

// newInflight returns a sketch sized for a Guard of the given capacity.
func newInflight(capacity int) *inflight {
	n := minBuckets
	for n < maxBuckets && n/bucketsPerEntry < capacity {
		n <<= 1
	}
	return &inflight{seed: maphash.MakeSeed(), mask: uint64(n - 1), counts: make([]slot, n)}
}

// enter counts an acquire of key and returns its bucket, and whether another
// acquire was in flight in that bucket.
func (f *inflight) enter(key string) (bucket uint32, shared bool) {
	bucket = uint32(maphash.String(f.seed, key) & f.mask)
	return bucket, f.counts[bucket].n.Add(1) > 1
}

// exit uncounts an acquire that enter counted.
func (f *inflight) exit(bucket uint32) {
	f.counts[bucket].n.Add(-1)
}

// turn returns the turn of an acquire counted in bucket that takes no local
// lock: Leave uncounts it.
func (f *inflight) turn(bucket uint32) core.LocalTurn {
	return &f.counts[bucket]
}

// total returns the acquires in flight.
func (f *inflight) total() int {
	n := 0
	for i := range f.counts {
		n += int(f.counts[i].n.Load())
	}
	return n
}
