package hotspot

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Guard is a core.LocalQueue that serialises the goroutines of one process on
// a local lock per hot name, so that only one of them at a time contends for
// the name in Redis. Give it to a Locker with core.WithHandlers or
// core.WithLocalQueue; one Guard may serve several Lockers (see the package
// documentation). It is safe for concurrent use.
type Guard struct {
	cfg      config
	err      error
	table    *table
	inflight *inflight

	hits     atomic.Int64
	bypasses atomic.Int64
	handoffs atomic.Int64
	refused  atomic.Int64 // leases passed on but not taken over (tests)
}

var (
	_ core.LocalQueue = (*Guard)(nil)
	_ core.Handler    = (*Guard)(nil)
)

// New returns a Guard configured by opts.
//
// New never panics. Invalid options are reported by Err and by every Acquire
// of a Locker that uses the Guard, as errors wrapping core.ErrInvalidOption;
// such a Guard lets no acquire through, so check Err once at start-up.
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
		capacity = 1 // unused: every Enter fails
	}
	g.inflight = newInflight(capacity)
	g.table = newTable(capacity, cfg.hotFor, cfg.handoff > 0)
	return g
}

// Err reports the configuration error of the Guard, nil if it is usable.
func (g *Guard) Err() error {
	return g.err
}

// Enter takes the local lock of key when its name is hot (contended in this
// process lately, or given to WithKeys) or suspected of contention (another
// acquire is in flight in its bucket of the in-flight sketch), waiting for it
// until deadline or the end of ctx. The turn it returns holds the local lock,
// and with it, when the previous holder handed its Redis lock over
// (WithHandoff), that holder's lease (LocalTurn.Passed).
//
// A name that is neither, or that finds no room for its local lock in the
// Guard, gets a turn that only counts the acquire in the in-flight sketch
// until its release, or no turn at all (nil) when automatic detection is off
// (WithHotPeriod(0)): the acquire goes straight to Redis.
//
// Enter fails with core.ErrTimeout when deadline passes first, with ctx's
// error when ctx ends first, and with the configuration error of an invalid
// Guard (see Err); the Locker reports each as its own wait would.
func (g *Guard) Enter(ctx context.Context, name, key string, deadline time.Time) (core.LocalTurn, error) {
	if g.err != nil {
		return nil, g.err
	}
	detect := g.cfg.hotFor > 0
	var bucket uint32
	var shared bool
	if detect {
		bucket, shared = g.inflight.enter(key)
	}
	_, pinned := g.cfg.keys[name]
	e, hits, bypassed := g.table.join(key, pinned, shared)
	if bypassed {
		g.bypasses.Add(1)
	}
	if hits > 0 {
		g.hits.Add(int64(hits))
	}
	if e == nil {
		if !detect {
			return nil, nil
		}
		return g.inflight.turn(bucket), nil
	}
	prev, err := g.wait(ctx, e, deadline)
	if err != nil {
		g.table.leave(e)
		if detect {
			g.inflight.exit(bucket)
		}
		return nil, err
	}
	if prev == nil {
		e.streak = 0 // the lock is to be taken in Redis
	}
	return &turn{g: g, e: e, bucket: bucket, counted: detect, passed: prev}, nil
}

// wait takes e's local lock, or a lease handed off with it (see
// handoff.go), before deadline and the end of ctx.
func (g *Guard) wait(ctx context.Context, e *entry, deadline time.Time) (*core.Lease, error) {
	select {
	case <-e.lock:
		return nil, nil // free: no wait, and no clock read
	default:
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, core.ErrTimeout
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case <-e.lock:
		return nil, nil
	case prev := <-e.pass: // nil, never ready, when hand-off is off
		return prev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, core.ErrTimeout
	}
}

// turn is the turn of one acquire on a local lock: it holds the lock of e
// from Enter until Leave, or until Pass hands it on.
type turn struct {
	g       *Guard
	e       *entry
	bucket  uint32 // in the in-flight sketch, if counted
	counted bool   // the acquire is counted in the in-flight sketch
	// passed is the lease the previous holder handed off with the local
	// lock, or nil.
	passed  *core.Lease
	settled bool // the hand-off of passed was counted or found refused
	ended   bool // Pass or Leave gave the local lock up
}

// Passed returns the lease the previous holder handed off with the local
// lock, or nil.
func (t *turn) Passed() *core.Lease { return t.passed }

// Leave releases the local lock, called by the Locker after the lock left
// Redis, or after a failed acquire; then it drops the turn's pin on the entry
// and its count in the in-flight sketch.
func (t *turn) Leave() {
	if t.ended {
		return
	}
	t.settle(nil)
	t.e.lock <- struct{}{} // never blocks: the token was ours
	t.end()
}

// end drops what the turn holds besides the local lock.
func (t *turn) end() {
	t.ended = true
	t.g.table.leave(t.e)
	if t.counted {
		t.g.inflight.exit(t.bucket)
	}
	t.passed = nil // a lease kept after its release keeps no other lease alive
}

// Acquire lets the acquire through: it calls next and returns its error.
// core.WithHandlers puts a Guard in the Locker's local-queue slot, where the
// Locker calls Enter; this method and Release only make the Guard a
// core.Handler, so that it can be given to core.WithHandlers.
func (g *Guard) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	if g.err != nil {
		return g.err
	}
	_, err := next(ctx, req)
	return err
}

// Release calls next: see Acquire.
func (g *Guard) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	return next(ctx, lease)
}
