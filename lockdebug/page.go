package lockdebug

import (
	"context"
	"sync"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Page is the live debug page of one process's locks: a core.StartObserver
// that keeps the leases held and the acquires in progress of the Lockers it
// is given to, and counts their waits, and an http.Handler that shows them.
// Build it with New, give it to the Lockers (core.WithObservers, or
// core.WithHandlers), and mount it on the service's admin mux. It is safe
// for concurrent use; its memory is bounded by its caps (WithMaxLeases,
// WithMaxWaiters) and its window's fixed ring of counts.
type Page struct {
	cfg config
	err error

	mu sync.Mutex
	// held are the listed leases (at most maxLeases); heldN counts every
	// lease held, listed or not.
	held  map[*lease]struct{}
	heldN int
	// waiting counts the listed acquires in progress by what the page
	// shows of them (identical ones are one key); waitingListed is their
	// sum, at most maxWaiters, and waitingN counts every acquire in
	// progress.
	waiting       map[waitKey]int
	waitingListed int
	waitingN      int
	win           *window
}

var (
	_ core.StartObserver = (*Page)(nil)
	_ core.Handler       = (*Page)(nil)
)

// New returns a Page configured by opts.
//
// New never panics. Invalid options are reported by Err, as errors wrapping
// core.ErrInvalidOption; such a Page observes nothing and answers every
// request 500, so check Err once at start-up.
func New(opts ...Option) *Page {
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, errNilOption(i))
			continue
		}
		opt(&cfg)
	}
	p := &Page{cfg: cfg, err: cfg.validate(), held: make(map[*lease]struct{}), waiting: make(map[waitKey]int)}
	if p.err == nil {
		p.win = newWindow(cfg.window)
	}
	return p
}

// Err reports the configuration error of the Page, nil if it is usable.
func (p *Page) Err() error {
	return p.err
}

// waitKey is what the page shows of an acquire in progress; the start
// event and the end event of one Acquire carry the same.
type waitKey struct {
	name, key, route string
	start            time.Time
	mode             core.Mode
	permits          int
}

// ObserveStart counts an Acquire that begins as waiting, until
// ObserveAcquire; it lists it while fewer than the cap are.
func (p *Page) ObserveStart(_ context.Context, e core.StartEvent) {
	if p.err != nil {
		return
	}
	k := waitKey{name: e.Name, key: e.Key, route: e.Route, start: e.Start, mode: e.Mode, permits: e.Permits}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitingN++
	if p.waitingListed < p.cfg.maxWaiters {
		p.waiting[k]++
		p.waitingListed++
	}
}

// ObserveAcquire ends the wait that ObserveStart began, counts it in the
// window (its wait, from e.Start to e.End, by outcome), and for an acquired
// lock lists the lease while fewer than the cap are; the LeaseObserver it
// returns takes the lease off the page when it ends.
func (p *Page) ObserveAcquire(_ context.Context, e core.AcquireEvent) core.LeaseObserver {
	if p.err != nil {
		return nil
	}
	k := waitKey{name: e.Name, key: e.Key, route: e.Route, start: e.Start, mode: e.Mode, permits: e.Permits}
	end := e.End
	if end.IsZero() {
		end = p.cfg.now()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitingN > 0 {
		p.waitingN--
	}
	if n, ok := p.waiting[k]; ok {
		if n == 1 {
			delete(p.waiting, k)
		} else {
			p.waiting[k] = n - 1
		}
		p.waitingListed--
	}
	wait := end.Sub(e.Start)
	if e.Start.IsZero() || wait < 0 {
		wait = 0
	}
	p.win.acquired(end, wait, e.Outcome, e.HandedOver)
	if e.Outcome != core.OutcomeAcquired {
		return nil
	}
	p.heldN++
	if len(p.held) >= p.cfg.maxLeases {
		return unlisted{p}
	}
	l := &lease{p: p, name: e.Name, key: e.Key, route: e.Route, mode: e.Mode, permits: e.Permits, ttl: e.TTL,
		acquired: end, waited: wait, handedOver: e.HandedOver, lease: e.Lease}
	p.held[l] = struct{}{}
	return l
}

// lease is a listed lease: what the page shows of it, and its
// LeaseObserver.
type lease struct {
	p                *Page
	name, key, route string
	mode             core.Mode
	permits          int
	ttl              time.Duration // asked for; the lease's own when it has one
	acquired         time.Time
	waited           time.Duration
	handedOver       bool
	lease            *core.Lease // nil for an event made by hand
}

// ObserveRelease takes the lease off the page and counts its end.
func (l *lease) ObserveRelease(_ context.Context, e core.ReleaseEvent) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.held[l]; ok {
		delete(p.held, l)
		p.heldN--
	}
	p.win.released(p.endOf(e), e.Outcome)
}

// unlisted is the LeaseObserver of a lease held while the list was full:
// it is counted, not shown.
type unlisted struct{ p *Page }

// ObserveRelease counts the lease's end.
func (u unlisted) ObserveRelease(_ context.Context, e core.ReleaseEvent) {
	p := u.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heldN > 0 {
		p.heldN--
	}
	p.win.released(p.endOf(e), e.Outcome)
}

func (p *Page) endOf(e core.ReleaseEvent) time.Time {
	if e.End.IsZero() {
		return p.cfg.now()
	}
	return e.End
}

// Acquire calls next and returns its error. core.WithHandlers puts a Page
// in the Locker's observer slot, where the Locker calls ObserveStart and
// ObserveAcquire; this method and Release only make the Page a
// core.Handler, so that it can be given to core.WithHandlers.
func (p *Page) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	_, err := next(ctx, req)
	return err
}

// Release calls next: see Acquire.
func (p *Page) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	return next(ctx, lease)
}
