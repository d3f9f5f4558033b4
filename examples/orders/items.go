package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// The flash sale: a hot item's stock is split in itemSegments segments (the
// "segmented lock"), and its buy route is locked with
// ginlock.WithPermits(itemSegments): up to that many buyers sell at once,
// each from the segment of its own permit slot (Lease.Slot), so that no
// segment is ever sold from twice at once and no sale waits for a sale of
// another segment. It is Curator's InterProcessSemaphoreV2, with numbered
// permits.
const (
	itemSegments    = 5
	flashSKU        = "10001" // stocked at start-up
	flashPerSegment = 20      // units per segment of flashSKU: 100 in all
)

// The flash sale's errors.
var (
	errNoItem       = errors.New("item not found")
	errSoldOut      = errors.New("sold out: no segment of the item has stock left")
	errSegmentEmpty = errors.New("this buyer's stock segment is empty and the segments that still have stock are being sold from by other buyers: retry")
)

// itemLockName is the item's lock name, the one the buy route's key
// derives ("item:{param.sku}").
func itemLockName(sku string) string { return "item:" + keyfunc.Escape(sku) }

// item is one item of the flash sale, kept in store.items.
type item struct {
	initial  int64
	segments []int64 // units left, per segment
	fences   []int64 // the highest fence accepted, per segment
	sold     int64
}

// Item is an item's stock as GET /items/:sku shows it.
type Item struct {
	SKU      string  `json:"sku"`
	Segments []int64 `json:"segments"` // units left in each segment
	Left     int64   `json:"left"`
	Sold     int64   `json:"sold"`
}

// Sale is one unit sold.
type Sale struct {
	SKU          string `json:"sku"`
	Segment      int    `json:"segment"`       // the segment it was sold from
	SegmentLeft  int64  `json:"segment_left"`  // units left in that segment
	OtherSegment bool   `json:"other_segment"` // sold from another free permit's segment, the request's own being empty
	Fence        int64  `json:"fence"`         // the fencing token the segment's write carried
}

// stock creates item sku, or restocks it, with perSegment units in each of
// its itemSegments segments.
func (s *store) stock(sku string, perSegment int64) {
	it := &item{initial: perSegment * itemSegments, segments: make([]int64, itemSegments), fences: make([]int64, itemSegments)}
	for i := range it.segments {
		it.segments[i] = perSegment
	}
	s.mu.Lock()
	s.items[sku] = it
	s.mu.Unlock()
}

// item returns item sku's stock.
func (s *store) item(sku string) (Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[sku]
	if !ok {
		return Item{}, false
	}
	v := Item{SKU: sku, Segments: append([]int64(nil), it.segments...), Sold: it.sold}
	for _, n := range it.segments {
		v.Left += n
	}
	return v, true
}

// buy sells one unit of item sku from the segment of lease's slot: lease is
// the request's permit of the item (ginlock.Lease under WithPermits). When
// that segment is empty, it takes the item's other free permits at once,
// one at a time and without waiting, and sells from the first of their
// segments that has stock: a permit gives its holder its segment alone, so
// this is as safe as the first sale, and a lone buyer is never sent back to
// an empty segment 0 (permits go to the lowest free slot). It answers
// errSegmentEmpty (retry) when every segment with stock is held by another
// buyer, errSoldOut when none has stock.
func (s *store) buy(ctx context.Context, sku string, lease *core.Lease) (Sale, error) {
	if lease == nil || lease.Mode() != core.ModePermits {
		held := "no lease"
		if lease != nil {
			held = "a lease in " + lease.Mode().String() + " mode"
		}
		return Sale{}, fmt.Errorf("orders: a buy needs a permit of %q (ginlock.WithPermits), not %s", itemLockName(sku), held)
	}
	defer s.enterSeller(sku)()
	sale, err := s.sellFrom(ctx, sku, lease)
	if !errors.Is(err, errSegmentEmpty) {
		return sale, err
	}
	// A context without the request's lease (an Acquire with it would be
	// reentrant: the same slot), cancelled with the request.
	free, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	for range lease.Permits() - 1 {
		other, err := s.locker.Acquire(free, lease.Names()[0], core.Permits(lease.Permits()), core.Wait(0))
		if errors.Is(err, core.ErrTimeout) {
			break // every other permit is held: those segments are being sold from
		}
		if err != nil {
			return Sale{}, err
		}
		defer other.Release(context.WithoutCancel(free)) // released also when the request has ended
		sale, err = s.sellFrom(ctx, sku, other)
		sale.OtherSegment = true
		if !errors.Is(err, errSegmentEmpty) {
			return sale, err
		}
	}
	if v, _ := s.item(sku); v.Left == 0 {
		return Sale{}, errSoldOut
	}
	return Sale{}, errSegmentEmpty
}

// sellFrom sells one unit from the segment of lease's slot: it reads the
// segment, does the slow work, checks the lease and writes the segment
// back with the lease's fence. The write is the value read minus one: two
// sales of one segment at once would sell two units and take one off, which
// the sale's figures (sold + left > initial) and the segment detector show.
func (s *store) sellFrom(ctx context.Context, sku string, lease *core.Lease) (Sale, error) {
	seg := lease.Slot()
	s.mu.Lock()
	it, ok := s.items[sku]
	var left, total int64
	if ok && seg < len(it.segments) {
		left = it.segments[seg]
		for _, n := range it.segments {
			total += n
		}
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return Sale{}, fmt.Errorf("%w: %s", errNoItem, sku)
	case seg >= len(it.segments):
		return Sale{}, fmt.Errorf("orders: permit slot %d of %q, but the item has %d segments", seg, sku, len(it.segments))
	case total == 0:
		return Sale{}, errSoldOut
	case left == 0:
		return Sale{}, errSegmentEmpty
	}
	defer s.enterSegment(sku, seg)()
	if s.onSell != nil {
		s.onSell(sku, seg)
	}
	if err := s.slow(ctx); err != nil {
		return Sale{}, err
	}
	select {
	case <-lease.Done():
		return Sale{}, errLost
	case <-ctx.Done():
		return Sale{}, context.Cause(ctx)
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := lease.Fence(); f < it.fences[seg] {
		return Sale{}, fmt.Errorf("%w (fence %d, segment %d's is %d)", errStale, f, seg, it.fences[seg])
	}
	it.fences[seg] = lease.Fence()
	it.segments[seg] = left - 1
	it.sold++
	return Sale{SKU: sku, Segment: seg, SegmentLeft: left - 1, Fence: lease.Fence()}, nil
}

// slow is a handler's slow part (a payment provider's call, say): it takes
// s.work, or stops when ctx ends.
func (s *store) slow(ctx context.Context) error {
	if s.work <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(s.work)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// enterSeller marks the start of a buy of item sku and returns its end; it
// records the most buys of one item inside at once (maxSellers), which
// WithPermits(itemSegments) keeps at itemSegments or fewer.
func (s *store) enterSeller(sku string) func() {
	s.mu.Lock()
	s.sellersPerItem[sku]++
	raise(&s.maxSellers, int64(s.sellersPerItem[sku]))
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.sellersPerItem[sku]--
		if s.sellersPerItem[sku] == 0 {
			delete(s.sellersPerItem, sku)
		}
		s.mu.Unlock()
	}
}

// enterSegment marks the start of a sale from one segment and returns its
// end; a sale that finds another one inside the same segment is an overlap
// (segOverlaps).
func (s *store) enterSegment(sku string, seg int) func() {
	k := fmt.Sprintf("%s#%d", sku, seg)
	s.mu.Lock()
	if s.segInside[k] > 0 {
		s.segOverlaps.Add(1)
	}
	s.segInside[k]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.segInside[k]--
		if s.segInside[k] == 0 {
			delete(s.segInside, k)
		}
		s.mu.Unlock()
	}
}

// Transfer is the result of a transfer: both orders as written.
type Transfer struct {
	From        Order `json:"from"`
	To          Order `json:"to"`
	AmountCents int64 `json:"amount_cents"`
}

// transfer moves amount cents from order from's amount to order to's, both
// created (not yet paid or cancelled), from keeping at least one cent. It
// holds both orders' locks at once (AcquireAll: reentrant under the
// route's key of two names, which took them all or none in one canonical
// order, so that crossing transfers never deadlock), and its write carries
// each order's own fence (Lease.FenceOf), checked per order.
func (s *store) transfer(ctx context.Context, from, to string, amount int64) (Transfer, error) {
	if from == to {
		return Transfer{}, fmt.Errorf("%w: an order cannot be transferred to itself (%q)", errInvalid, from)
	}
	if amount <= 0 {
		return Transfer{}, fmt.Errorf("%w: amount_cents must be positive, not %d", errInvalid, amount)
	}
	lease, err := s.locker.AcquireAll(ctx, []string{lockName(from), lockName(to)})
	if err != nil {
		return Transfer{}, err
	}
	defer lease.Release(ctx)

	s.mu.Lock()
	a, okA := s.orders[from]
	b, okB := s.orders[to]
	s.mu.Unlock()
	switch {
	case !okA:
		return Transfer{}, fmt.Errorf("%w: %s", errNotFound, from)
	case !okB:
		return Transfer{}, fmt.Errorf("%w: %s", errNotFound, to)
	case a.State != stateCreated:
		return Transfer{}, fmt.Errorf("%w: order %s is %s", errState, from, a.State)
	case b.State != stateCreated:
		return Transfer{}, fmt.Errorf("%w: order %s is %s", errState, to, b.State)
	case amount >= a.AmountCents:
		return Transfer{}, fmt.Errorf("%w: order %s has %d cents and must keep at least 1; transfer at most %d",
			errInvalid, from, a.AmountCents, a.AmountCents-1)
	}
	if err := s.slow(ctx); err != nil {
		return Transfer{}, err
	}
	select {
	case <-lease.Done():
		return Transfer{}, errLost
	case <-ctx.Done():
		return Transfer{}, context.Cause(ctx)
	default:
	}
	if s.beforeWrite != nil {
		s.beforeWrite(from)
	}
	a.AmountCents -= amount
	b.AmountCents += amount
	fa, fb := lease.FenceOf(lockName(from)), lease.FenceOf(lockName(to))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range []struct {
		id    string
		fence int64
	}{{from, fa}, {to, fb}} {
		if c.fence < s.fences[c.id] {
			return Transfer{}, fmt.Errorf("%w (order %s: fence %d, the order's is %d)", errStale, c.id, c.fence, s.fences[c.id])
		}
	}
	s.fences[from], s.fences[to] = fa, fb
	s.orders[from], s.orders[to] = a, b
	return Transfer{From: a, To: b, AmountCents: amount}, nil
}

// read returns order id after the read's slow part (a slow backend), for a
// GET under the order's shared hold.
func (s *store) read(ctx context.Context, id string) (Order, error) {
	if s.onRead != nil {
		s.onRead(id)
	}
	if err := s.slow(ctx); err != nil {
		return Order{}, err
	}
	if o, ok := s.get(id); ok {
		return o, nil
	}
	return Order{}, errNotFound
}
