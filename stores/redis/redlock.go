package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/drift"
	"github.com/reqlock/reqlock/lockstore"
)

// NewRedlock returns the Redlock store on independent Redis masters, one
// client each: NewQuorum of New(client) for each client (see the package
// documentation for the algorithm, its guarantees and its limits). An
// empty list or a nil client is an invalid option, reported by the
// Locker's Err (see Check).
func NewRedlock(clients []redis.UniversalClient) *Redlock {
	stores := make([]lockstore.Store, len(clients))
	for i, c := range clients {
		stores[i] = New(c)
	}
	return NewQuorum(stores...)
}

// NewQuorum returns a store that keeps each lock on a majority of the
// independent stores given (Redlock): N/2+1 of them must take the key
// within the lock's validity. With fencing, every store must be a
// lockstore.FenceRaiser. Close it after the Lockers that use it: it waits
// for the calls of nodes left running in the background, and closes its
// stores.
func NewQuorum(stores ...lockstore.Store) *Redlock {
	return &Redlock{nodes: stores, quorum: len(stores)/2 + 1, ioTimeout: lockstore.DefaultIOTimeout}
}

// Redlock is a store that runs every operation on a majority of
// independent nodes. It is a lockstore.Notifier when its nodes are Redis
// stores, an Undoer, a Tuner and a Checker, an Inspector when its nodes
// are (see List and Inspect), and an io.Closer. It is no
// lockstore.Sharer (permit slots taken on each node apart would not agree
// across a quorum) and no lockstore.MultiAcquirer: a Locker on it refuses
// core.Shared and core.Permits with core.ErrInvalidOption, and takes the
// names of AcquireAll one by one.
type Redlock struct {
	nodes     []lockstore.Store
	quorum    int
	ioTimeout time.Duration // set by the Locker (WithIOTimeout)
	// bg counts the node calls left running once an outcome was decided,
	// and the clean-ups that wait for them; Close waits for them.
	bg background
}

// Check refuses what a quorum cannot serve (lockstore.Checker): no nodes, a
// nil node or one that refuses st, fencing on nodes that cannot raise a fence counter, and fair
// queueing, as each node would order its waiters apart and no grant would
// hold a quorum.
func (r *Redlock) Check(st lockstore.StoreSettings) error {
	var errs []error
	if len(r.nodes) == 0 {
		errs = append(errs, fmt.Errorf("%w: Redlock: no stores", lockstore.ErrInvalidOption))
	}
	for i, n := range r.nodes {
		if n == nil || isNilPointer(n) {
			errs = append(errs, fmt.Errorf("%w: Redlock: store %d is nil", lockstore.ErrInvalidOption, i))
			continue
		}
		if c, ok := n.(lockstore.Checker); ok {
			if err := c.Check(st); err != nil {
				errs = append(errs, fmt.Errorf("Redlock: store %d: %w", i, err))
			}
		}
		if _, ok := n.(lockstore.FenceRaiser); st.Fencing && !ok {
			errs = append(errs, fmt.Errorf("%w: Redlock: WithFencing: store %d (%T) cannot raise a fence counter (FenceRaiser)", lockstore.ErrInvalidOption, i, n))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if st.Fair {
		return fmt.Errorf("%w: WithFair: a Redlock quorum keeps no queue: each node would order its waiters apart, and no grant would hold a quorum", lockstore.ErrInvalidOption)
	}
	return nil
}

// isNilPointer reports a typed nil, such as a (*redis.Client)(nil).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Tune takes the Locker's settings and passes them on to the nodes
// (lockstore.Tuner).
func (r *Redlock) Tune(st lockstore.StoreSettings) {
	r.ioTimeout = st.IOTimeout
	for _, n := range r.nodes {
		if t, ok := n.(lockstore.Tuner); ok {
			t.Tune(st)
		}
	}
}

// Announce makes every node announce its releases.
func (r *Redlock) Announce() {
	for _, n := range r.nodes {
		if nn, ok := n.(lockstore.Notifier); ok {
			nn.Announce()
		}
	}
}

// Watch watches key on every node that can push notices: a release seen by
// any of them wakes the waiter.
func (r *Redlock) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	var stops []func()
	for _, n := range r.nodes {
		if rs, ok := n.(*Store); ok {
			stops = append(stops, rs.watchInto(key, c))
		}
	}
	return c, func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// Close waits for the node calls left in the background, then closes the
// nodes that have a Close method.
func (r *Redlock) Close() error {
	r.bg.wait()
	var errs []error
	for _, n := range r.nodes {
		if c, ok := n.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Undo hands the removal of key to every node that can do it in the
// background (lockstore.Undoer), all at once; a node that cannot gets one
// compare-and-delete within ctx.
func (r *Redlock) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u, ok := n.(lockstore.Undoer); ok {
				u.Undo(ctx, key, token, ttl, sent)
				return
			}
			if ctx.Err() == nil {
				_, _ = n.Release(ctx, key, token)
			}
		}()
	}
	wg.Wait()
}

// quorumError is the storage error of a Redlock operation for which too many
// nodes failed to reach a quorum. It wraps the nodes' errors.
type quorumError struct {
	failed, need int
	errs         error
}

func (e *quorumError) Error() string {
	return fmt.Sprintf("redlock: %d nodes failed, a quorum of %d is out of reach: %s", e.failed, e.need,
		strings.ReplaceAll(e.errs.Error(), "\n", "; "))
}

func (e *quorumError) Unwrap() error { return e.errs }

// nodeResult is one node's answer.
type nodeResult struct {
	ok    bool
	fence int64
	err   error
	state lockstore.KeyState // the node's answer to Inspect
	// running is set when the node had not answered by the time the outcome
	// was decided: its call goes on in the background (until its deadline)
	// and may still apply. It is then counted as a failure (err is
	// errNoReply) if the caller's deadline passed, and not at all if the
	// outcome was reached without it.
	running *nodeCall
}

// mayHold reports whether the node may hold the key after the call: those
// that took it, and those that had not answered. A node that failed has
// removed what its attempt may have set itself (see lockstore.Store.TryAcquire).
func (r nodeResult) mayHold() bool {
	return r.ok || r.running != nil
}

// nodeCall is one node's call of a fanout; res is set when done is closed.
type nodeCall struct {
	done chan struct{}
	res  nodeResult
}

// errNoReply stands for a node that did not answer in time. A node's context
// error is replaced by it, so that a Redlock storage error never reads as the
// caller's context.DeadlineExceeded or Canceled.
var errNoReply = errors.New("no reply in time")

// noReply is the error of node n that did not answer in time: errNoReply,
// or the reason its client could not connect (a refused dial) when it knows
// one.
func noReply(n lockstore.Store) error {
	if s, ok := n.(*Store); ok {
		if err := s.dials.explain(context.DeadlineExceeded); err != context.DeadlineExceeded {
			return err
		}
	}
	return errNoReply
}

// tally counts the answers.
func tally(results []nodeResult) (ok, failed int, fence int64, errs error) {
	var all []error
	for i, r := range results {
		switch {
		case r.ok:
			ok++
			fence = max(fence, r.fence)
		case r.err != nil:
			failed++
			err := r.err
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				err = errNoReply
			}
			all = append(all, fmt.Errorf("node %d: %w", i, err))
		}
	}
	return ok, failed, fence, errors.Join(all...)
}

// fanout runs op on every node in parallel and returns as soon as the
// outcome is known: a quorum answered ok (after a grace as long again as the
// quorum took, for the nodes just behind it), a quorum is out of reach, or
// ctx ended. It does not wait for the other nodes: go-redis does not abort a
// read in flight when its context is cancelled, so a partitioned node (its
// connection open, no reply) would hold every call until the deadline. Their
// calls go on in the background until ctx's deadline (they are not
// cancelled with ctx, so that a release still reaches them), counted in
// r.bg; their results are marked running.
func (r *Redlock) fanout(ctx context.Context, op func(context.Context, lockstore.Store) nodeResult) []nodeResult {
	start := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(r.ioTimeout)
	}
	detached := context.WithoutCancel(ctx)
	calls := make([]*nodeCall, len(r.nodes))
	answered := make(chan int, len(r.nodes))
	for i, n := range r.nodes {
		c := &nodeCall{done: make(chan struct{})}
		calls[i] = c
		r.bg.run(func() {
			ctx, cancel := context.WithDeadline(detached, deadline)
			defer cancel()
			c.res = op(ctx, n)
			close(c.done)
			answered <- i
		})
	}
	results := make([]nodeResult, len(r.nodes))
	for i, c := range calls {
		results[i].running = c
	}
	var grace <-chan time.Time
	nok := 0
wait:
	for pending := len(r.nodes); pending > 0; pending-- {
		select {
		case i := <-answered:
			results[i] = calls[i].res
			if results[i].ok {
				nok++
			}
			if nok >= r.quorum && grace == nil {
				t := time.NewTimer(time.Since(start))
				defer t.Stop()
				grace = t.C
			}
			if nok+pending-1 < r.quorum {
				break wait // out of reach
			}
		case <-grace:
			break wait // the others run on, abandoned but not failed
		case <-ctx.Done():
			for i, n := range r.nodes {
				if results[i].running != nil {
					results[i].err = noReply(n)
				}
			}
			break wait
		}
	}
	return results
}

// outcome turns a tally into the store's answer: ours with a quorum, a
// quorumError when failures alone make a quorum impossible, not ours else.
func (r *Redlock) outcome(ok, failed int, errs error) (bool, error) {
	if ok >= r.quorum {
		return true, nil
	}
	if failed > len(r.nodes)-r.quorum {
		return false, &quorumError{failed: failed, need: r.quorum, errs: errs}
	}
	return false, nil
}

// TryAcquire is one Redlock attempt: acquire on every node, keep the lock if
// a quorum holds it within its validity (and, with fenced, took the
// quorum's highest token), release it everywhere otherwise.
func (r *Redlock) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	start := time.Now()
	valid := drift.Validity(start, ttl)
	vctx, cancel := context.WithDeadline(ctx, valid) // no node may take longer than the lock is worth
	defer cancel()
	results := r.fanout(vctx, func(ctx context.Context, n lockstore.Store) nodeResult {
		ok, fence, err := n.TryAcquire(ctx, key, token, ttl, fenced)
		return nodeResult{ok: ok, fence: fence, err: err}
	})
	ok, failed, fence, errs := tally(results)
	held, err := r.outcome(ok, failed, errs)
	if held && fenced {
		held, err = r.raiseFence(vctx, key, token, fence)
	}
	if held, err = settle(vctx, held, err, valid); held {
		return true, fence, nil
	}
	r.releaseAll(ctx, key, token, results)
	return false, 0, err
}

// errSlowQuorum is the storage error of a Redlock acquire or extend whose
// quorum came after the lock's validity ran out, or was cut off by the
// deadline (the validity, or the I/O timeout) while nodes that could have
// made it had not answered: slow nodes, not another holder.
var errSlowQuorum = errors.New("redlock: no quorum in time")

// settle ends an acquire or extend whose quorum phases ran under vctx, with
// deadline valid: the lock is held if a quorum took it before valid. A
// quorum after valid, or none by a deadline that passed, is errSlowQuorum
// (where no quorumError is reported already), so that the watchdog retries
// and Acquire reports a storage failure rather than a busy lock.
func settle(vctx context.Context, held bool, err error, valid time.Time) (bool, error) {
	switch {
	case held && time.Now().Before(valid):
		return true, nil
	case err != nil:
		return false, err
	case held:
		return false, fmt.Errorf("%w: quorum reached after the validity ran out", errSlowQuorum)
	case vctx.Err() != nil || pastDeadline(vctx):
		return false, fmt.Errorf("%w: the nodes that could make a quorum did not answer before the deadline", errSlowQuorum)
	}
	return false, nil
}

// pastDeadline reports whether ctx's deadline has passed. The nodes' calls
// have contexts of their own with the same deadline, whose timers may fire
// (and end the calls) before ctx's own.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// raiseFence is the second phase of a fenced acquire or hand-off: the quorum's
// counters are raised to fence before the lease is handed out.
func (r *Redlock) raiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	ok, failed, _, errs := tally(r.fanout(ctx, func(ctx context.Context, n lockstore.Store) nodeResult {
		ok, err := n.(lockstore.FenceRaiser).RaiseFence(ctx, key, token, fence)
		return nodeResult{ok: ok, err: err}
	}))
	return r.outcome(ok, failed, errs)
}

// releaseAll deletes the key on every node that may hold token after
// results (see mayHold). It waits for the nodes that took the key (up to the
// I/O timeout, on a context of its own, as it runs after failures and
// cancellations too), and releases the others in the background: those
// that failed, and once its call has ended, so that the release cannot
// overtake it, a node that had not answered. Every attempt has a token of
// its own (the Locker draws one per attempt): a release in the background cannot delete the
// key of a later attempt.
func (r *Redlock) releaseAll(ctx context.Context, key, token string, results []nodeResult) {
	ctx = context.WithoutCancel(ctx)
	release := func(n lockstore.Store) {
		ctx, cancel := context.WithTimeout(ctx, r.ioTimeout)
		defer cancel()
		_, _ = n.Release(ctx, key, token)
	}
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		res := results[i]
		if !res.mayHold() {
			continue
		}
		if res.ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				release(n)
			}()
			continue
		}
		r.bg.run(func() {
			if c := res.running; c != nil {
				if <-c.done; !c.res.mayHold() {
					return
				}
			}
			release(n)
		})
	}
	wg.Wait()
}

// Release deletes the key on every node. The lock was ours if a quorum held
// it; with fewer, failed nodes may hide that it was (a quorumError), or it
// had expired.
func (r *Redlock) Release(ctx context.Context, key, token string) (bool, error) {
	ok, failed, _, errs := tally(r.fanout(ctx, func(ctx context.Context, n lockstore.Store) nodeResult {
		ok, err := n.Release(ctx, key, token)
		return nodeResult{ok: ok, err: err}
	}))
	if ok < r.quorum && ok+failed >= r.quorum {
		return false, &quorumError{failed: failed, need: r.quorum, errs: errs}
	}
	return ok >= r.quorum, nil
}

// Extend resets the TTL on every node that holds token; the lease stays valid
// if a quorum did within the new validity.
func (r *Redlock) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	start := time.Now()
	valid := drift.Validity(start, ttl)
	vctx, cancel := context.WithDeadline(ctx, valid)
	defer cancel()
	ok, failed, fence, errs := tally(r.fanout(vctx, func(ctx context.Context, n lockstore.Store) nodeResult {
		ok, fence, err := n.Extend(ctx, key, token, ttl, fenced)
		return nodeResult{ok: ok, fence: fence, err: err}
	}))
	held, err := r.outcome(ok, failed, errs)
	if held && fenced {
		held, err = r.raiseFence(vctx, key, token, fence)
	}
	if held, err = settle(vctx, held, err, valid); held {
		return true, fence, nil
	}
	return false, 0, err
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
