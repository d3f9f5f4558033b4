package memcachedstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/undo"
)

// Store is the core.Store on memcached (see the package documentation). Its
// methods are safe for concurrent use.
type Store struct {
	client *memcache.Client
	clock  func(ctx context.Context) (int64, error) // µs, for a new fence counter
	undos  *undo.Queue
	calls  group // calls that went on after their context ended

	servers []string // the client's servers (WithServers), for the Inspector
}

var (
	_ core.Store  = (*Store)(nil)
	_ core.Undoer = (*Store)(nil)
	_ core.Sharer = (*Store)(nil)

	// errContention reports a compare-and-swap that kept failing because the
	// item kept changing (the holder's own concurrent Extends).
	errContention = errors.New("memcachedstore: the item kept changing between gets and cas")
)

// casTries bounds the gets-and-cas rounds of one call.
const casTries = 5

// maxExpiration is the longest relative expiration memcached takes, 30
// days; it reads larger values as absolute Unix times.
const maxExpiration = 30 * 24 * 60 * 60

// counterGrace is how long a fence counter outlives the TTL of the lock that
// created it.
const counterGrace = time.Minute

// New returns the Store on the memcached server or servers of client. It
// does no I/O. A nil client or an invalid option is an error, and nothing
// is built. The Store does not close client; Close it before closing the
// client.
func New(client *memcache.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("memcachedstore: New: the client is nil")
	}
	var cfg config
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("memcachedstore: New: option %d is nil", i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{client: client, clock: localClock, servers: cfg.servers}
	if cfg.clockAddr != "" {
		addr := cfg.clockAddr
		s.clock = func(ctx context.Context) (int64, error) { return s.serverClock(ctx, addr) }
	}
	s.undos = undo.NewQueue(s.sweep, s.timeout)
	return s, nil
}

// timeout returns the client's socket timeout, which bounds each of its
// calls.
func (s *Store) timeout() time.Duration {
	if s.client.Timeout > 0 {
		return s.client.Timeout
	}
	return memcache.DefaultTimeout
}

// expirationMargin is what expiration adds to a TTL, in seconds.
const expirationMargin = 2

// expiration returns memcached's expiration for ttl: whole seconds, rounded
// up, plus two. memcached's clock is whole seconds, updated by a timer about
// once a second, so it lags real time by up to about two seconds, more when
// the timer is late: an item given N seconds was seen to expire after N-1.14
// on a loaded machine.
func expiration(ttl time.Duration) (int32, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("memcachedstore: TTL %v: a TTL must be positive", ttl)
	}
	secs := (ttl+time.Second-1)/time.Second + expirationMargin
	if secs > maxExpiration {
		return 0, fmt.Errorf("memcachedstore: TTL %v: memcached takes TTLs of up to 30 days", ttl)
	}
	return int32(secs), nil
}

// TryAcquire takes key for token with memcached's add (see the package
// documentation). When the key is taken, it checks with gets whether it
// holds token already (an attempt sent again), and then resets its TTL by
// cas; or whether it lists shares none of which is live any more (see
// Shares in the package documentation), and then takes it by cas. With
// fenced, it then draws the next fence from the key's counter.
//
// An attempt that fails after its add may have reached memcached is undone
// by a compare-and-delete of its token, at once within ctx if ctx has time
// left, then in the background (internal/undo).
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.acquire(ctx, key, token, ttl, fenced, 0)
}

// acquire is TryAcquire, and with a patience above 0 TryAcquireWaiting.
func (s *Store) acquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool, patience time.Duration) (bool, int64, error) {
	exp, err := expiration(ttl)
	if err != nil {
		return false, 0, err
	}
	var wexp int32
	if patience > 0 {
		if wexp, err = expiration(patience); err != nil {
			return false, 0, fmt.Errorf("memcachedstore: patience: %w", err)
		}
	}
	k := itemKey(key)
	sent := time.Now()
	err = s.do(ctx, func() error {
		return s.client.Add(&memcache.Item{Key: k, Value: []byte(token), Expiration: exp})
	})
	switch {
	case err == nil:
	case errors.Is(err, memcache.ErrNotStored):
		// Taken: by this token, if this attempt was sent before; or by
		// shares, which may all have expired.
		ok, err := s.takeHeld(ctx, key, k, token, exp, wexp)
		if err != nil {
			s.undo(ctx, k, token, ttl, sent)
			return false, 0, fmt.Errorf("memcachedstore: acquire %s: %w", key, err)
		}
		if !ok {
			return false, 0, nil
		}
	default:
		if mayHaveApplied(err) {
			s.undo(ctx, k, token, ttl, sent)
		}
		return false, 0, fmt.Errorf("memcachedstore: acquire %s: %w", key, err)
	}
	if patience > 0 {
		// Taken: clear the waiter record (it expires by itself if this
		// fails).
		_ = s.do(ctx, func() error { return s.client.Delete(waiterKey(key)) })
	}
	if !fenced {
		return true, 0, nil
	}
	fence, err := s.drawHeld(ctx, key, k, token, ttl, sent)
	if err != nil || fence == 0 {
		s.undo(ctx, k, token, ttl, sent)
	}
	return fence > 0, fence, err
}

// takeHeld takes k, which add found taken, for token with the expiration
// exp, by cas: when it holds token (an attempt sent again), or lists no
// live share. When it lists live shares and wexp > 0, it records a waiting
// exclusive holder with that expiration, and then stores k again by cas.
func (s *Store) takeHeld(ctx context.Context, key, k, token string, exp, wexp int32) (bool, error) {
	recorded, shared := false, false
	for try := 0; try < maxShareRounds; try++ {
		if err := pause(ctx, try); err != nil {
			return false, err
		}
		if try >= casTries && !recorded {
			break // only the record's cas goes on (see below)
		}
		it, err := s.get(ctx, k)
		if err != nil || it == nil {
			return false, err
		}
		next := memcache.Item{Key: k, Value: []byte(token), Expiration: exp, CasID: it.CasID}
		if string(it.Value) != token {
			list, ok, err := decodeShares(it.Value)
			if err != nil || !ok {
				return false, err
			}
			shared = true
			if list, err = s.live(ctx, key, list); err != nil {
				return false, err
			}
			if len(list.entries) > 0 {
				if wexp == 0 {
					return false, nil
				}
				if !recorded {
					if err := s.do(ctx, func() error {
						return s.client.Set(&memcache.Item{Key: waiterKey(key), Value: []byte(token), Flags: companionFlags, Expiration: wexp})
					}); err != nil {
						return false, err
					}
					recorded = true
				}
				// The lock's item again, with a new CAS unique: a share
				// that read it before the record fails its cas. Tried
				// until it lands, so that no share that read the item
				// before the record is stored after this call.
				next = memcache.Item{Key: k, Value: it.Value, Expiration: list.expiration(), CasID: it.CasID}
				stored, err := s.cas(ctx, next)
				if err != nil || stored {
					return false, err
				}
				continue
			}
			// No live share: the lock's item is free.
		}
		stored, err := s.cas(ctx, next)
		if err != nil || stored {
			return stored, err
		}
		// Changed since the gets: look again.
	}
	if shared {
		return false, nil // shares kept changing the list: held
	}
	return false, errContention
}

// drawHeld draws the next fence of key (item k) for token, which took k
// with ttl by a command sent at sent, and makes sure the draw happened
// while token held k: when the draw ended within ttl of sent, it did (the
// item lives at least ttl from its add or cas, which came after sent);
// otherwise a gets checks that k still holds token (nobody else writes
// token, so it held k all along). It returns 0 when token lost k.
func (s *Store) drawHeld(ctx context.Context, key, k, token string, ttl time.Duration, sent time.Time) (int64, error) {
	fence, err := s.draw(ctx, key, ttl)
	if err != nil {
		return 0, fmt.Errorf("memcachedstore: fence of %s: %w", key, err)
	}
	if time.Since(sent) < ttl-ttl/100 { // 1%: the clock rates of memcached and of this process
		return fence, nil
	}
	it, err := s.get(ctx, k)
	switch {
	case err != nil:
		return 0, fmt.Errorf("memcachedstore: fence of %s: %w", key, err)
	case it == nil || string(it.Value) != token:
		return 0, nil
	}
	return fence, nil
}

// Release deletes key if it holds token: gets, then a cas that stores an
// item that has already expired (see the package documentation).
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	ok, err := s.compareAndDelete(ctx, itemKey(key), token)
	if err != nil {
		return false, fmt.Errorf("memcachedstore: release %s: %w", key, err)
	}
	return ok, nil
}

// Extend resets the TTL of key to ttl if it holds token: gets, then cas
// with the new expiration. With fenced, it then draws a new fence (see
// TryAcquire).
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	exp, err := expiration(ttl)
	if err != nil {
		return false, 0, err
	}
	k := itemKey(key)
	sent := time.Now()
	ok, err := s.compareAndExtend(ctx, k, token, exp)
	if err != nil {
		return false, 0, fmt.Errorf("memcachedstore: extend %s: %w", key, err)
	}
	if !ok || !fenced {
		return ok, 0, nil
	}
	fence, err := s.drawHeld(ctx, key, k, token, ttl, sent)
	return fence > 0, fence, err
}

// get returns the item of k with its CAS unique, nil when there is none.
func (s *Store) get(ctx context.Context, k string) (*memcache.Item, error) {
	it, err := call(ctx, s, func() (*memcache.Item, error) {
		return s.client.Get(k) // gets: the value and its CAS unique
	})
	if errors.Is(err, memcache.ErrCacheMiss) {
		return nil, nil
	}
	return it, err
}

// compareAndSwap stores next in place of k's item if k holds token,
// checked by memcached against the CAS unique of the item the comparison
// read. It reports whether it stored next.
func (s *Store) compareAndSwap(ctx context.Context, k, token string, next memcache.Item) (bool, error) {
	for range casTries {
		it, err := s.get(ctx, k)
		if err != nil || it == nil || string(it.Value) != token {
			return false, err
		}
		next.Key, next.CasID = k, it.CasID
		item := next // the call's own: it may outlive this round
		err = s.do(ctx, func() error { return s.client.CompareAndSwap(&item) })
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, memcache.ErrCacheMiss), errors.Is(err, memcache.ErrNotStored):
			return false, nil // expired or evicted since the gets
		case !errors.Is(err, memcache.ErrCASConflict):
			return false, err
		}
		// Changed since the gets (the holder's own Extend): look again.
	}
	return false, errContention
}

// compareAndExtend gives k the expiration exp if it holds token.
func (s *Store) compareAndExtend(ctx context.Context, k, token string, exp int32) (bool, error) {
	return s.compareAndSwap(ctx, k, token, memcache.Item{Value: []byte(token), Expiration: exp})
}

// compareAndDelete frees k if it holds token: the item is replaced by an
// empty one with a negative expiration, which memcached treats as expired
// at once (a later gets misses, and add succeeds).
func (s *Store) compareAndDelete(ctx context.Context, k, token string) (bool, error) {
	return s.compareAndSwap(ctx, k, token, memcache.Item{Expiration: -1})
}

// Undo removes key if it holds token, at once within ctx and then in the
// background, as the clean-up of a failed attempt does (core.Undoer): the
// Locker hands it a release that failed.
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.undo(ctx, itemKey(key), token, ttl, sent)
}

// undo removes what a failed attempt may have set (see TryAcquire).
func (s *Store) undo(ctx context.Context, k, token string, ttl time.Duration, sent time.Time) {
	s.undos.Undo(ctx, k, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		ok, err := s.compareAndDelete(ctx, k, token)
		return undoOutcome(ok, err)
	})
}

// sweep is a round of clean-ups: a compare-and-delete of each, one after
// the other (gomemcache has no pipeline), within ctx.
func (s *Store) sweep(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	out := make([]undo.Outcome, len(batch))
	for i, a := range batch {
		if ctx.Err() != nil {
			break // NoAnswer: tried again next round
		}
		if key, ok := strings.CutPrefix(a.Key, shareUndo); ok {
			listed, _, err := s.releaseShare(ctx, key, a.Token)
			out[i] = undoOutcome(listed, err)
			continue
		}
		ok, err := s.compareAndDelete(ctx, a.Key, a.Token)
		out[i] = undoOutcome(ok, err)
	}
	return out
}

// undoOutcome is the outcome of a compare-and-delete of a clean-up.
func undoOutcome(deleted bool, err error) undo.Outcome {
	switch {
	case deleted:
		return undo.Done
	case err == nil || errors.Is(err, syscall.ECONNREFUSED):
		// A reply; or no server listens, and what the one that had
		// received the attempt had received is gone with it.
		return undo.Answered
	}
	return undo.NoAnswer
}

// mayHaveApplied reports whether a command that failed with err may still
// have been executed by memcached: everything but a failure to connect.
func mayHaveApplied(err error) bool {
	var op *net.OpError
	var timeout *memcache.ConnectTimeoutError
	switch {
	case errors.Is(err, memcache.ErrNoServers), errors.Is(err, memcache.ErrMalformedKey),
		errors.As(err, &timeout), errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// do runs f, a call of the client, which takes no context (see call).
func (s *Store) do(ctx context.Context, f func() error) error {
	_, err := call(ctx, s, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// call runs f, a call of the client, which takes no context: it returns
// f's results, or ctx's error as soon as ctx ends. f then goes on in the
// background, bounded by the client's Timeout; Close waits for it. f must
// not write to variables that the caller reads.
func call[T any](ctx context.Context, s *Store, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	s.calls.run(func() {
		v, err := f()
		done <- result{v, err}
	})
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // both: the reply wins
			return r.v, r.err
		default:
			return zero, ctx.Err()
		}
	}
}

// Close ends the background clean-ups of failed attempts (keys they could
// not remove yet expire with their TTL) and waits for the calls that went
// on after their context ended. It does not close the client. The Store
// still works after Close, without background clean-ups.
func (s *Store) Close() error {
	s.undos.Close()
	s.calls.wait()
	return nil
}

// group runs goroutines that wait can wait for, and may start new ones
// while wait waits (unlike sync.WaitGroup).
type group struct {
	mu   sync.Mutex
	n    int
	idle *sync.Cond // signalled when n drops to 0
}

// run runs f on a goroutine of its own.
func (g *group) run(f func()) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	go func() {
		defer func() {
			g.mu.Lock()
			if g.n--; g.n == 0 && g.idle != nil {
				g.idle.Broadcast()
			}
			g.mu.Unlock()
		}()
		f()
	}()
}

// wait blocks until no goroutine started by run is left.
func (g *group) wait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idle == nil {
		g.idle = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.idle.Wait()
	}
}
