package hotspot

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Guard is a core.Handler that serialises the goroutines of one process on a
// local lock per hot name, so that only one of them at a time contends for
// the name in Redis. Add it to a Locker with core.WithHandlers; one Guard may
// serve several Lockers (see the package documentation). It is safe for
// concurrent use.
type Guard struct {
	cfg      config
	err      error
	table    *table
	inflight *inflight

	hits     atomic.Int64
	bypasses atomic.Int64
	handoffs atomic.Int64
}

var _ core.Handler = (*Guard)(nil)

// New returns a Guard configured by opts.
//
// New never panics. Invalid options are reported by Err and by every Acquire
// through the Guard, as errors wrapping core.ErrInvalidOption; such a Guard
// lets no acquire through, so check Err once at start-up.
func New(opts ...Option) *Guard {
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, nilOption(i))
			continue
		}
		opt(&cfg)
	}
	g := &Guard{cfg: cfg, err: cfg.validate()}
	capacity := cfg.capacity
	if g.err != nil {
		capacity = 1 // unused: every Acquire fails
	}
	g.inflight = newInflight(capacity)
	g.table = newTable(capacity, cfg.hotFor, cfg.handoff > 0)
	return g
}

// Err reports the configuration error of the Guard, nil if it is usable.
func (g *Guard) Err() error {
	return g.err
}

// holdKey is the Lease value under which a Guard keeps its hold; it names
// the Guard, so that two Guards in one chain keep their holds apart.
type holdKey struct{ g *Guard }

// hold is what one acquire through the Guard took, kept on its lease so that
// the release finds it without a lookup by name.
type hold struct {
	bucket uint32 // in the in-flight sketch
	e      *entry // nil when the acquire went straight to Redis
	locked bool   // e's local lock is held
}

// Acquire takes the local lock of req's name when the name is hot (contended
// in this process lately, or given to WithKeys) or suspected of contention
// (another acquire is in flight in its bucket of the in-flight sketch), then
// the lock in Redis through next, or takes over a lease handed off by the
// previous local holder. It waits for the local lock until req.Deadline or
// the end of ctx, and records the time waited in req.LocalWait. A name that
// is neither, or that finds no room for its local lock in the Guard, goes
// straight to next.
func (g *Guard) Acquire(ctx context.Context, req *core.Request, next core.AcquireFunc) (lease *core.Lease, err error) {
	if g.err != nil {
		return nil, g.err
	}
	h := &hold{}
	var shared bool
	h.bucket, shared = g.inflight.enter(req.Key)
	defer func() {
		if lease == nil { // failed, or next panicked: leave nothing held
			g.done(h)
		}
	}()
	_, pinned := g.cfg.keys[req.Name]
	e, hits, bypassed := g.table.join(req.Key, pinned, shared && g.cfg.hotFor > 0)
	if bypassed {
		g.bypasses.Add(1)
	}
	if hits > 0 {
		g.hits.Add(int64(hits))
	}
	h.e = e
	if e == nil {
		lease, err = next(ctx, req)
	} else {
		lease, err = g.acquireLocal(ctx, req, next, h)
	}
	if err != nil {
		return nil, err
	}
	lease.SetValue(holdKey{g}, h)
	return lease, nil
}

// acquireLocal waits for h.e's local lock, then takes the lock in Redis, or
// takes over the lease handed off with the local lock.
func (g *Guard) acquireLocal(ctx context.Context, req *core.Request, next core.AcquireFunc, h *hold) (*core.Lease, error) {
	prev, err := g.wait(ctx, req, h.e)
	if err != nil {
		return nil, err
	}
	h.locked = true
	if prev != nil {
		if lease, ok, err := g.takeOver(ctx, req, prev); ok || err != nil {
			return lease, err
		}
	}
	h.e.streak = 0
	return next(ctx, req)
}

// wait takes e's local lock, or a lease handed off with it (see handoff.go),
// before req.Deadline and the end of ctx, and sets req.LocalWait.
func (g *Guard) wait(ctx context.Context, req *core.Request, e *entry) (*core.Lease, error) {
	select {
	case <-e.lock:
		return nil, nil // free: no wait, and no clock read
	default:
	}
	start := time.Now()
	defer func() { req.LocalWait = time.Since(start) }()
	left := req.Deadline.Sub(start)
	if left <= 0 {
		return nil, req.TimeoutErr(ctx)
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case <-e.lock:
		return nil, nil
	case prev := <-g.passFor(req, e):
		return prev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, req.TimeoutErr(ctx)
	}
}

// Release releases the lock in Redis through next, then the local lock, or
// hands the lease off to a local waiter without calling next (WithHandoff).
// It finds the local lock through the lease, never by name.
func (g *Guard) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	h, _ := lease.Value(holdKey{g}).(*hold)
	if h == nil { // not acquired through this Guard
		return next(ctx, lease)
	}
	if h.e != nil && g.handOff(lease, h.e) {
		h.locked = false // it went to the waiter with the lease
		g.done(h)
		return nil
	}
	defer g.done(h) // Redis first, then the local lock; also if next panics
	return next(ctx, lease)
}

// done releases what h holds locally: the local lock, the entry's pin and
// the in-flight count.
func (g *Guard) done(h *hold) {
	if h.e != nil {
		if h.locked {
			h.locked = false
			h.e.lock <- struct{}{} // never blocks: the token was ours
		}
		g.table.leave(h.e)
		h.e = nil // a lease kept after its release keeps no entry alive
	}
	g.inflight.exit(h.bucket)
}
