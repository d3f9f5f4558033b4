package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Locker that keeps each lock on a majority of
// independent Redis masters (Redlock): no replication between them, no
// cluster. An attempt sends the acquire to every node in parallel and
// succeeds when N/2+1 of them set the key while the lock is still valid:
// validity = TTL − time spent acquiring − drift (1% of the TTL plus 2 ms). A
// failed attempt releases the key on every node, then waits like any other
// attempt. Release, Extend, the watchdog, Done, fencing and wake-ups work as
// with New; extensions also need the quorum.
//
// Nodes that are down slow little down: an attempt on them fails at once, or
// is abandoned shortly after the quorum has answered (after as long again as
// the quorum took, or a tenth of the I/O timeout if that is longer). With 5
// nodes the lock keeps working with 2 of them down. When so many are down
// that no quorum is possible, Acquire fails with ErrStorage at once. Release
// waits for every node, up to the I/O timeout, so that no node keeps the
// lock for its whole TTL.
//
// Redlock does not make a lock safe against a holder that pauses (a GC
// pause, a stopped VM, a long network delay) past its validity: another
// client then acquires the name while the first still believes it holds it,
// and nothing the lock does can tell the first one in time. Use WithFencing
// and a store that rejects lower fencing tokens where that matters; with
// NewRedlock the fencing token is the highest counter of the quorum, written
// back to the quorum before Acquire returns (one more round trip), so that
// tokens stay strictly increasing across holders.
//
// A restarted node without persistence forgets the locks it held, which may
// let a second client reach a quorum while the first still holds the name:
// restart nodes only after the longest TTL has passed, or run them with
// persistence (appendfsync always).
//
// Give the clients a dial and read timeout well below the TTL. NewRedlock
// reports an empty list or a nil client through Err, like New.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) *Locker {
	var errs []error
	if len(clients) == 0 {
		errs = append(errs, fmt.Errorf("%w: NewRedlock: no clients", ErrInvalidOption))
	}
	for i, c := range clients {
		if c == nil || isNilPointer(c) {
			errs = append(errs, fmt.Errorf("%w: NewRedlock: client %d is nil", ErrInvalidOption, i))
		}
	}
	return newLocker(clients, errors.Join(errs...), opts)
}

// redlockStore runs every operation on a majority of independent nodes.
type redlockStore struct {
	nodes     []redisStore
	quorum    int
	fencing   bool
	ioTimeout time.Duration
}

func newRedlockStore(clients []redis.UniversalClient, cfg *config) redlockStore {
	nodes := make([]redisStore, len(clients))
	for i, c := range clients {
		nodes[i] = newRedisStore(c, cfg)
	}
	return redlockStore{nodes: nodes, quorum: len(clients)/2 + 1, fencing: cfg.fencing, ioTimeout: cfg.ioTimeout}
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
	late  bool // came after the outcome was decided: a failure then is our own cancellation
}

// errNoReply stands for a node that did not answer in time. A node's context
// error is replaced by it, so that a Redlock storage error never reads as the
// caller's context.DeadlineExceeded or Canceled.
var errNoReply = errors.New("no reply in time")

// tally counts the answers.
func tally(results []nodeResult) (ok, failed int, fence int64, errs error) {
	var all []error
	for i, r := range results {
		switch {
		case r.ok:
			ok++
			fence = max(fence, r.fence)
		case r.err != nil && !r.late:
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

// fanout runs op on every node in parallel and returns their answers. With
// decide, the nodes still running once the outcome is known are cancelled:
// at once when a quorum is out of reach; after a grace when it is reached,
// so that nodes a little slower than the quorum still take the lock or its
// renewal (a lock kept by the fastest quorum alone would be lost at the next
// node failure), while a node that hangs does not hold every call up. Answers
// after the outcome are marked late: a failure then is our cancellation, not
// the node's.
func (r redlockStore) fanout(ctx context.Context, decide bool, op func(context.Context, redisStore) nodeResult) []nodeResult {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]nodeResult, len(r.nodes))
	done := make(chan int, len(r.nodes))
	for i, n := range r.nodes {
		go func() {
			results[i] = op(ctx, n)
			done <- i
		}()
	}
	ok, decided := 0, false
	for pending := len(r.nodes); pending > 0; pending-- {
		i := <-done
		results[i].late = decided
		if results[i].ok {
			ok++
		}
		switch {
		case !decide || decided:
		case ok >= r.quorum:
			decided = true
			grace := time.AfterFunc(max(time.Since(start), r.ioTimeout/10), cancel)
			defer grace.Stop()
		case ok+pending-1 < r.quorum:
			decided = true
			cancel()
		}
	}
	return results
}

// outcome turns a tally into the store's answer: ours with a quorum, a
// quorumError when failures alone make a quorum impossible, not ours else.
func (r redlockStore) outcome(ok, failed int, errs error) (bool, error) {
	if ok >= r.quorum {
		return true, nil
	}
	if failed > len(r.nodes)-r.quorum {
		return false, &quorumError{failed: failed, need: r.quorum, errs: errs}
	}
	return false, nil
}

// tryAcquire is one Redlock attempt: acquire on every node, keep the lock if
// a quorum holds it within its validity (and, with fencing, took the
// quorum's highest token), release it everywhere otherwise.
func (r redlockStore) tryAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, int64, error) {
	start := time.Now()
	valid := validity(start, ttl)
	vctx, cancel := context.WithDeadline(ctx, valid) // no node may take longer than the lock is worth
	defer cancel()
	results := r.fanout(vctx, true, func(ctx context.Context, n redisStore) nodeResult {
		ok, fence, err := n.tryAcquire(ctx, key, token, ttl)
		return nodeResult{ok: ok, fence: fence, err: err}
	})
	ok, failed, fence, errs := tally(results)
	held, err := r.outcome(ok, failed, errs)
	if held && r.fencing {
		held, err = r.raiseFence(vctx, key, token, fence)
	}
	if held && time.Now().Before(valid) {
		return true, fence, nil
	}
	r.releaseAll(ctx, key, token, results)
	return false, 0, err
}

// raiseFence is the second phase of a fenced acquire or handoff: the quorum's
// counters are raised to fence before the lease is handed out.
func (r redlockStore) raiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	ok, failed, _, errs := tally(r.fanout(ctx, true, func(ctx context.Context, n redisStore) nodeResult {
		ok, err := n.raiseFence(ctx, key, token, fence)
		return nodeResult{ok: ok, err: err}
	}))
	return r.outcome(ok, failed, errs)
}

// releaseAll deletes the key on every node that may hold token after
// results: all but those that answered that another holder has the key. It
// has a context of its own, as it runs after failures and cancellations too.
func (r redlockStore) releaseAll(ctx context.Context, key, token string, results []nodeResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.ioTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		if res := results[i]; !res.ok && res.err == nil {
			continue // the key is someone else's there
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = n.release(ctx, key, token)
		}()
	}
	wg.Wait()
}

// release deletes the key on every node. The lock was ours if a quorum held
// it; with fewer, failed nodes may hide that it was (a quorumError), or it
// had expired.
func (r redlockStore) release(ctx context.Context, key, token string) (bool, error) {
	ok, failed, _, errs := tally(r.fanout(ctx, false, func(ctx context.Context, n redisStore) nodeResult {
		ok, err := n.release(ctx, key, token)
		return nodeResult{ok: ok, err: err}
	}))
	if ok < r.quorum && ok+failed >= r.quorum {
		return false, &quorumError{failed: failed, need: r.quorum, errs: errs}
	}
	return ok >= r.quorum, nil
}

// extend resets the TTL on every node that holds token; the lease stays valid
// if a quorum did within the new validity.
func (r redlockStore) extend(ctx context.Context, key, token string, ttl time.Duration, newFence bool) (bool, int64, error) {
	start := time.Now()
	valid := validity(start, ttl)
	vctx, cancel := context.WithDeadline(ctx, valid)
	defer cancel()
	ok, failed, fence, errs := tally(r.fanout(vctx, true, func(ctx context.Context, n redisStore) nodeResult {
		ok, fence, err := n.extend(ctx, key, token, ttl, newFence)
		return nodeResult{ok: ok, fence: fence, err: err}
	}))
	held, err := r.outcome(ok, failed, errs)
	if held && newFence && r.fencing {
		held, err = r.raiseFence(vctx, key, token, fence)
	}
	if held && time.Now().Before(valid) {
		return true, fence, nil
	}
	return false, 0, err
}
