package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker acquires named locks in Redis. It is safe for concurrent use; build
// one per process and share it. With WithNotify, Close it when done.
type Locker struct {
	cfg     config
	err     error
	store   store
	notify  *notifier             // WithNotify; nil otherwise
	reload  func(context.Context) // a cluster client's ReloadState; nil otherwise
	acquire AcquireFunc           // the handler chain around spin
	release ReleaseFunc           // the handler chain around unlock
	// bg runs the Redis calls left to the background (clean-ups, Redlock
	// nodes slower than the outcome), each bounded by its deadline.
	bg background
}

// background runs goroutines that Close waits for. Unlike a sync.WaitGroup,
// it may start new ones while Close waits (an Acquire racing Close).
type background struct {
	mu   sync.Mutex
	n    int
	idle *sync.Cond // signalled when n drops to 0
}

// run runs f on a goroutine of its own.
func (b *background) run(f func()) {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			if b.n--; b.n == 0 && b.idle != nil {
				b.idle.Broadcast()
			}
			b.mu.Unlock()
		}()
		f()
	}()
}

// wait blocks until no goroutine started by run is left.
func (b *background) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle == nil {
		b.idle = sync.NewCond(&b.mu)
	}
	for b.n > 0 {
		b.idle.Wait()
	}
}

// New returns a Locker that keeps its locks in the Redis deployment behind
// client: a *redis.Client, a Sentinel failover client
// (redis.NewFailoverClient) or a *redis.ClusterClient. A lock's key and its
// companion keys (fence counter, release channel) share one hash tag, hence
// one cluster slot.
//
// New does no I/O and never panics. Invalid options (a negative wait, a TTL
// under 1 ms, a nil client...) are reported by Err and by every Acquire, as
// errors wrapping ErrInvalidOption; check Err once at start-up.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	var err error
	if client == nil || isNilPointer(client) {
		err = fmt.Errorf("%w: New: the Redis client is nil", ErrInvalidOption)
	}
	return newLocker([]redis.UniversalClient{client}, err, opts)
}

// newLocker builds a Locker on one deployment (New) or on several
// independent ones (NewRedlock); err reports bad clients.
func newLocker(clients []redis.UniversalClient, err error, opts []Option) *Locker {
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			cfg.errs = append(cfg.errs, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i))
			continue
		}
		opt(&cfg)
	}
	err = errors.Join(err, cfg.validate())
	l := &Locker{cfg: cfg, err: err}
	if len(clients) == 1 {
		l.store = newRedisStore(clients[0], &l.cfg)
		if c, ok := clients[0].(interface{ ReloadState(context.Context) }); ok && err == nil {
			l.reload = c.ReloadState
		}
	} else {
		l.store = newRedlockStore(clients, &l.cfg, &l.bg)
	}
	if cfg.notify && err == nil {
		l.notify = newNotifier(clients, cfg.ioTimeout, cfg.notifyLinger)
	}
	l.acquire, l.release = chain(cfg.handlers, l.spin, l.unlock)
	return l
}

// Close ends what the Locker runs in the background: the shared subscription
// of WithNotify and its goroutines; and it waits for the Redis calls still
// running in the background to end, each within its deadline (the I/O
// timeout, or the client's read timeout where it does not honour context
// deadlines): clean-ups of failed attempts, and with NewRedlock the calls
// of nodes that had not answered when an operation's outcome was known. It
// neither releases nor ends leases; Acquires after Close still work, waiting
// on their random sleep alone. Close is idempotent and returns nil.
func (l *Locker) Close() error {
	l.notify.close()
	l.bg.wait()
	return nil
}

// isNilPointer reports a typed nil, such as a (*redis.Client)(nil), which
// would otherwise pass the nil check and panic at the first Acquire.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Err reports the configuration error of the Locker, nil if it is usable.
func (l *Locker) Err() error {
	return l.err
}

// Acquire takes the lock called name and returns its Lease, which the caller
// must Release. While another holder keeps the name, Acquire retries after a
// random sleep (WithSpin) until the wait budget runs out (WithWait, cut by the
// context's deadline).
//
// Errors keep their kind:
//   - ErrTimeout: the budget was spent while the name was held;
//   - context.Canceled or context.DeadlineExceeded: ctx ended first;
//   - ErrStorage: Redis could not be reached or failed (returned when the
//     failing call ends, bounded by the I/O timeout; not retried until the
//     budget runs out);
//   - ErrInvalidName, ErrInvalidOption: bad input; nothing was sent to Redis.
//
// A cancellation of ctx wakes a waiting Acquire at once; during a Redis call
// it is seen when the call ends, within the I/O timeout.
//
// The lock lives for the Locker's TTL, or for the one set on ctx with
// ContextWithTTL; the wait budget is the Locker's, or the one set on ctx with
// ContextWithWait.
//
// Acquire is reentrant through the context: when ctx carries (see
// ContextWithLease) a lease of this Locker for the same name that is still
// held, Acquire returns a nested lease at once, with no Redis call and no
// handler. Releasing the nested lease releases nothing; the name is released
// when the outermost lease is. So a service function can lock "order:42"
// whether or not the route's middleware already did. Reentrancy goes by
// context, not by goroutine: goroutines that share a context carrying the
// lease all get nested leases, and run at once.
func (l *Locker) Acquire(ctx context.Context, name string) (*Lease, error) {
	if l.err != nil {
		return nil, l.err
	}
	key, err := l.Key(name)
	if err != nil {
		return nil, err
	}
	if outer := l.heldIn(ctx, key); outer != nil {
		return nested(outer), nil
	}
	ttl := l.cfg.ttl
	if v, ok := TTLFromContext(ctx); ok {
		if ttl, err = checkTTL(v, "ContextWithTTL"); err != nil {
			return nil, err
		}
	}
	wait := l.cfg.wait
	if v, ok := WaitFromContext(ctx); ok {
		if v < 0 {
			return nil, fmt.Errorf("%w: ContextWithWait(%v): the wait budget must not be negative", ErrInvalidOption, v)
		}
		wait = v
	}
	now := time.Now()
	deadline := now.Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	req := &Request{Name: name, Key: key, Route: RouteFromContext(ctx), TTL: ttl, Start: now, Deadline: deadline}
	lease, err := l.acquire(ctx, req)
	switch {
	case err != nil && lease != nil: // a handler broke the contract: do not leak the lock
		_ = lease.Release(ctx)
		return nil, err
	case err == nil && lease == nil:
		return nil, errors.New("reqlock: a handler returned neither a lease nor an error")
	}
	return lease, err
}

// spin is the innermost acquire link: the seed's pull-mode loop.
func (l *Locker) spin(ctx context.Context, req *Request) (*Lease, error) {
	ttl, err := checkTTL(req.TTL, "Request.TTL") // a handler may have changed it
	if err != nil {
		return nil, err
	}
	req.TTL = ttl
	var timer *time.Timer
	var wake *waiter // WithNotify: the release messages of req.Key
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		l.notify.leave(wake)
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req.Attempts++
		// A token of its own per attempt: the clean-up of a failed attempt
		// that Redlock leaves to the background cannot touch a later one.
		token := rand.Text() // 128 bits or more from crypto/rand
		sent := time.Now()
		ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
		ok, fence, err := l.store.tryAcquire(ioCtx, req.Key, token, req.TTL)
		cancel()
		if err != nil {
			cerr := ctx.Err()
			if mayHaveApplied(err) {
				if cerr != nil {
					// The caller is gone: do not make it wait for the clean-up.
					l.bg.run(func() { l.undo(ctx, req.Key, token) })
				} else {
					l.undo(ctx, req.Key, token)
				}
			}
			if cerr != nil {
				return nil, cerr
			}
			return nil, l.storageErr("acquire", req.Name, err)
		}
		if ok {
			return l.newLease(req.Name, req.Key, token, fence, req.TTL, validity(sent, req.TTL)), nil
		}
		left := time.Until(req.Deadline)
		if left <= 0 {
			return nil, req.TimeoutErr(ctx)
		}
		sleep := min(l.sleep(), left)
		if timer == nil {
			timer = time.NewTimer(sleep)
			wake = l.notify.join(req.Key) // from the first failed attempt on
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		case <-wake.C():
			timer.Stop() // no stale tick after Stop since Go 1.23
		}
	}
}

// sleep draws a duration in [spinMin, spinMin+spinRandom).
func (l *Locker) sleep() time.Duration {
	d := l.cfg.spinMin
	if l.cfg.spinRandom > 0 {
		d += time.Duration(mrand.Int64N(int64(l.cfg.spinRandom)))
	}
	return d
}

// undo removes a key that a failed acquire may have set, if it holds token;
// it is bounded by the I/O timeout.
func (l *Locker) undo(ctx context.Context, key, token string) {
	ioCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ioTimeout)
	defer cancel()
	_, _ = l.store.release(ioCtx, key, token)
}

// unlock is the innermost release link: compare-and-delete.
func (l *Locker) unlock(ctx context.Context, lease *Lease) error {
	lease.mu.Lock()
	handedOff := lease.handedOff
	lease.deleted = !handedOff
	lease.mu.Unlock()
	if handedOff {
		return nil // the hold is another lease's now
	}
	ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
	defer cancel()
	ok, err := l.store.release(ioCtx, lease.key, lease.token)
	if err != nil {
		return l.storageErr("release", lease.name, err)
	}
	if !ok {
		return fmt.Errorf("%w: release %q: the lock had expired", ErrNotHeld, lease.name)
	}
	return nil
}

// storageErr wraps a client error in ErrStorage. A context deadline that
// fired inside the client is our I/O timeout, not the caller's: it is
// reported as such and not wrapped, so that errors.Is(err,
// context.DeadlineExceeded) stays false for storage errors.
//
// With a cluster client, a storage error also asks the client to reload the
// cluster's topology in the background (go-redis deduplicates the reloads):
// after a failover the dead master answers no MOVED, and go-redis would
// otherwise keep sending to it until its periodic reload, a minute later.
func (l *Locker) storageErr(op, name string, err error) error {
	if l.reload != nil {
		l.reload(context.Background())
	}
	var q *quorumError
	switch {
	case errors.As(err, &q):
		return fmt.Errorf("%w: %s %q: %w", ErrStorage, op, name, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %s %q: no reply within the I/O timeout of %v", ErrStorage, op, name, l.cfg.ioTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %s %q: no reply within the I/O timeout of %v: %w", ErrStorage, op, name, l.cfg.ioTimeout, err)
	}
	return fmt.Errorf("%w: %s %q: %w", ErrStorage, op, name, err)
}
