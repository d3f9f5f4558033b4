package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

// Order states.
const (
	stateCreated   = "created"
	statePaid      = "paid"
	stateCancelled = "cancelled"
)

// Business errors, mapped to HTTP and gRPC answers by the transports.
var (
	errNotFound = errors.New("order not found")
	errInvalid  = errors.New("the order is invalid")
	errExists   = errors.New("order already exists")
	errState    = errors.New("order is not in a state that allows this")
	errStale    = errors.New("stale write refused: a later holder of the order's lock has written")
	errLost     = errors.New("the order's lock was lost before the write")
)

// retryable reports whether err means that nothing was written and the
// request may be sent again: the lock was lost, a later holder wrote first,
// or the request's budget ran out.
func retryable(err error) bool {
	return errors.Is(err, errStale) || errors.Is(err, errLost) || errors.Is(err, core.ErrNotHeld) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Order is one order.
type Order struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	AmountCents int64  `json:"amount_cents"`
}

// store keeps orders in memory. Its operations read an order, do slow work
// (a payment provider's call, say) and write the order back: two of them at
// once for one order would be a lost update, which the lock prevents.
//
// It is a fenced store: it keeps, per order, the highest fencing token
// (Lease.Fence) it has accepted, and refuses a write with a lower one
// (errStale). A holder that lost its lock while frozen after its last check
// (a GC pause, a stopped VM) is refused instead of overwriting the work of
// the holder after it. A store of your own does the same in its write, e.g.
// UPDATE ... SET fence = $f WHERE id = $id AND fence <= $f.
//
// The overlap detector (enter, enterRead) is called by the transports'
// handlers, behind the middleware and interceptor and before the store's
// own Acquire: it checks that the middleware serialises requests, which the
// store's nested lock would otherwise do by itself. It is a read-write
// detector: a writer (create, pay, cancel, transfer) beside anyone, or a
// reader (GET, under a shared hold) beside a writer, of one order is an
// overlap; readers beside readers are what shared holds are for, and it
// records the most readers of one order inside at once.
//
// It also keeps the flash sale's items (see items.go).
type store struct {
	locker *core.Locker
	work   time.Duration

	mu      sync.Mutex
	orders  map[string]Order
	fences  map[string]int64 // the highest fence accepted per order
	inside  map[string]int   // writers inside, per order
	readers map[string]int   // readers inside, per order
	items   map[string]*item // the flash sale's items, by sku

	// beforeWrite, if set (by tests), runs between the last check of the
	// lease and the write, where a real process may be frozen.
	beforeWrite func(id string)
	// onRead, if set (by tests), runs inside a GET's shared hold, after the
	// reader is counted.
	onRead func(id string)
	// onSell, if set (by tests), runs inside a buy, once its seller and its
	// segment are counted.
	onSell func(sku string, segment int)

	entered    atomic.Int64 // handlers run for an order
	overlaps   atomic.Int64 // handlers that found another one running for the same order, against the rules above
	maxReaders atomic.Int64 // the most readers of one order inside at once

	sellers        atomic.Int64 // buy handlers inside now, any item
	maxSellers     atomic.Int64 // the most buy handlers of one item inside at once
	segOverlaps    atomic.Int64 // sales that found another sale running on the same segment
	sellersPerItem map[string]int
	segInside      map[string]int // sales inside, per "sku#segment"
}

func newStore(locker *core.Locker, work time.Duration) *store {
	return &store{locker: locker, work: work, orders: map[string]Order{}, fences: map[string]int64{}, inside: map[string]int{},
		readers: map[string]int{}, items: map[string]*item{}, sellersPerItem: map[string]int{}, segInside: map[string]int{}}
}

// lockName is the order's lock name, the one the transports' keys derive
// ("order:{param.id}", "order:{field.order_id}").
func lockName(id string) string { return "order:" + keyfunc.Escape(id) }

// update runs change on order id under its lock. Called through the
// middleware or interceptor, the Acquire is reentrant (the request's context
// already holds the order) and costs nothing; called from elsewhere, it
// takes the lock in Redis.
//
// The slow part stops when ctx ends: the adapters cancel the request's
// context when the lease is lost, and the budget middleware when the
// request's time is up. Before writing it checks the lease once more, and
// the write carries the lease's fence, which the store checks.
func (s *store) update(ctx context.Context, id string, change func(o Order, found bool) (Order, error)) (Order, error) {
	lease, err := s.locker.Acquire(ctx, lockName(id))
	if err != nil {
		return Order{}, err
	}
	defer lease.Release(ctx)

	s.mu.Lock()
	o, found := s.orders[id]
	s.mu.Unlock()
	next, err := change(o, found)
	if err != nil {
		return o, err
	}
	select { // the slow part
	case <-time.After(s.work):
	case <-ctx.Done():
		return o, context.Cause(ctx)
	}
	select {
	case <-lease.Done():
		return o, errLost
	case <-ctx.Done():
		return o, context.Cause(ctx)
	default:
	}
	if s.beforeWrite != nil {
		s.beforeWrite(id)
	}
	if err := s.put(id, next, lease.Fence()); err != nil {
		return o, err
	}
	return next, nil
}

// put writes order o for id if fence is not below the highest fence the
// store has accepted for id, and returns errStale otherwise.
func (s *store) put(id string, o Order, fence int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.fences[id] {
		return fmt.Errorf("%w (fence %d, the order's is %d)", errStale, fence, s.fences[id])
	}
	s.fences[id] = fence
	s.orders[id] = o
	return nil
}

// enter marks the start of a writing handler for order id and returns its
// end; a writer that finds another writer, or a reader, of id inside is an
// overlap.
func (s *store) enter(id string) func() {
	s.entered.Add(1)
	s.mu.Lock()
	if s.inside[id] > 0 || s.readers[id] > 0 {
		s.overlaps.Add(1)
	}
	s.inside[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.inside[id]--
		if s.inside[id] == 0 {
			delete(s.inside, id)
		}
		s.mu.Unlock()
	}
}

// enterRead marks the start of a reading handler for order id and returns
// its end; a reader that finds a writer of id inside is an overlap, one
// that finds other readers is not (it counts towards maxReaders).
func (s *store) enterRead(id string) func() {
	s.entered.Add(1)
	s.mu.Lock()
	if s.inside[id] > 0 {
		s.overlaps.Add(1)
	}
	s.readers[id]++
	raise(&s.maxReaders, int64(s.readers[id]))
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.readers[id]--
		if s.readers[id] == 0 {
			delete(s.readers, id)
		}
		s.mu.Unlock()
	}
}

// raise sets m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

func (s *store) create(ctx context.Context, id string, amount int64) (Order, error) {
	return s.update(ctx, id, func(o Order, found bool) (Order, error) {
		if found {
			return o, errExists
		}
		if amount <= 0 {
			return Order{}, fmt.Errorf("%w: amount_cents must be positive, not %d", errInvalid, amount)
		}
		return Order{ID: id, State: stateCreated, AmountCents: amount}, nil
	})
}

func (s *store) transition(ctx context.Context, id, to string) (Order, error) {
	return s.update(ctx, id, func(o Order, found bool) (Order, error) {
		if !found {
			return o, errNotFound
		}
		if o.State != stateCreated {
			return o, fmt.Errorf("%w: the order is %s", errState, o.State)
		}
		o.State = to
		return o, nil
	})
}

func (s *store) pay(ctx context.Context, id string) (Order, error) {
	return s.transition(ctx, id, statePaid)
}

func (s *store) cancel(ctx context.Context, id string) (Order, error) {
	return s.transition(ctx, id, stateCancelled)
}

func (s *store) get(id string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	return o, ok
}
