package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/undo"
	"github.com/reqlock/reqlock/lockstore"
)

// Each command is one round trip (scripts run by EVAL the first time, by
// EVALSHA afterwards; see run).
var (
	acquireScript       = newScript(redisscript.Acquire)
	acquireFencedScript = redis.NewScript(redisscript.AcquireFenced)
	releaseScript       = newScript(redisscript.Release)
	extendScript        = redis.NewScript(redisscript.Extend)
	extendFencedScript  = redis.NewScript(redisscript.ExtendFenced)
	fenceFloorScript    = redis.NewScript(redisscript.FenceFloor)
	enqueueScript       = newScript(redisscript.Enqueue)
	dequeueScript       = redis.NewScript(redisscript.Dequeue)
	pollScript          = redis.NewScript(redisscript.Poll)
	acquireHeldScript   = redis.NewScript(redisscript.AcquireHeld)
)

// Store is the lock store on one Redis deployment: a standalone server, a
// Sentinel-managed master or a Cluster, all behind redis.UniversalClient
// (see the package documentation). It is a lockstore.Store with every
// capability but TTLRounder: Notifier, Queuer, FenceRaiser, Undoer,
// FreeAcquirer, Sharer, HeldAcquirer, MultiAcquirer, Inspector, Tuner,
// Checker and io.Closer.
type Store struct {
	client redis.UniversalClient
	// noSetGet is set once the server rejected SET ... NX GET (servers before
	// Redis 7.0); acquires then run acquire.lua instead.
	noSetGet atomic.Bool
	// noEvalRO is set once the server rejected EVAL_RO (servers before
	// Redis 7.0); read-only scripts then run by EVAL (see runRO).
	noEvalRO atomic.Bool
	// cached holds, per script, whether it ran on this deployment already
	// (see run). The map is read-only after New.
	cached   map[*redis.Script]*atomic.Bool
	announce atomic.Bool           // Notifier.Announce was called: releases publish
	reload   func(context.Context) // a cluster client's ReloadState; nil otherwise

	mu       sync.Mutex
	notifier *notifier // made by the first Watch
	linger   time.Duration
	closed   bool
	undos    *undo.Queue // clean-ups of failed attempts (see Undo)
	// shareUndos are the clean-ups of failed share attempts (see
	// UndoShare): a ReleaseShare, not a compare-and-delete.
	shareUndos *undo.Queue
	// ioTimeout bounds each call of a clean-up (see TryAcquire): the I/O
	// timeout of the Locker that configured the store, 0 for
	// lockstore.DefaultIOTimeout.
	ioTimeout atomic.Int64
	// dials remembers why the client's latest dial failed (see dialWatch),
	// for the error of a call that ran out of time meanwhile.
	dials *dialWatch
}

// New returns the store on the Redis deployment behind client: a
// *redis.Client, a Sentinel failover client (redis.NewFailoverClient) or a
// *redis.ClusterClient. Give the client ContextTimeoutEnabled, so that the
// Locker's I/O timeout cuts a blocked read. On a *redis.Client, New adds a
// hook that watches the client's dials, so that a call that found no
// connection reports why (a refused dial, say). New does no I/O; a nil
// client is an invalid option, reported by the Locker's Err (see Check).
func New(client redis.UniversalClient) *Store {
	s := &Store{client: client, cached: make(map[*redis.Script]*atomic.Bool), linger: lockstore.DefaultNotifyLinger, dials: new(dialWatch)}
	s.undos = newUndos(s)
	s.shareUndos = undo.NewQueue(s.sweepShares, s.undoTimeout)
	if c, ok := client.(*redis.Client); ok && c != nil {
		c.AddHook(s.dials)
	}
	for _, sc := range []*redis.Script{acquireScript.Script, acquireFencedScript, releaseScript.Script, extendScript, extendFencedScript, fenceFloorScript, enqueueScript.Script, dequeueScript, pollScript,
		acquireShareScript, releaseShareScript, extendShareScript, acquireWaitingScript, acquireAllScript, inspectScript, acquireHeldScript} {
		s.cached[sc] = new(atomic.Bool)
	}
	if c, ok := client.(interface{ ReloadState(context.Context) }); ok && client != nil && !isNilPointer(client) {
		s.reload = c.ReloadState
	}
	return s
}

// Check refuses a nil client (lockstore.Checker).
func (s *Store) Check(lockstore.StoreSettings) error {
	if s.client == nil || isNilPointer(s.client) {
		return fmt.Errorf("%w: redisstore: the Redis client is nil", lockstore.ErrInvalidOption)
	}
	return nil
}

// Tune takes the settings of the Locker built on the store
// (lockstore.Tuner): the I/O timeout of its clean-ups, and the linger of
// its subscriptions.
func (s *Store) Tune(st lockstore.StoreSettings) {
	s.setLinger(st.NotifyLinger)
	s.ioTimeout.Store(int64(st.IOTimeout))
}

// failed is called with every error of a call, and returns the error to
// report. With a cluster client it asks the client to reload the cluster's
// topology in the background (go-redis deduplicates the reloads): after a
// failover the dead master answers no MOVED, and go-redis would otherwise
// keep sending to it until its periodic reload, a minute later. A call that
// ran out of time while the client could not connect reports why it could
// not (see dialWatch.explain).
func (s *Store) failed(err error) error {
	if err != nil && err != redis.Nil && s.reload != nil {
		s.reload(context.Background())
	}
	return s.dials.explain(err)
}

// dialWatch is a go-redis hook that remembers the outcome of the client's
// latest dial. go-redis retries a failed dial (and the command) with
// back-off sleeps until the command's context ends, and then returns the
// context's error alone: an unreachable server would be reported as "no
// reply within the I/O timeout", its cause (a refused connection, an
// unknown host) lost.
type dialWatch struct {
	last atomic.Pointer[error] // the latest dial's error; nil once a dial succeeded
}

// DialHook records the outcome of each dial. A dial cut by its context is
// not recorded: that says no more than the call's own context error.
func (d *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			d.last.Store(nil)
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			d.last.Store(&err)
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (d *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (d *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explain returns err, or, when err is a context's deadline (the call ran
// out of time) while the client's latest dial failed, a connectError
// carrying that dial's error: the call found no connection, and the dial
// error says why. A cancellation stays itself.
func (d *dialWatch) explain(err error) error {
	if d == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if last := d.last.Load(); last != nil {
		return &connectError{dial: *last}
	}
	return err
}

// connectError is the error of a call that ended with its context while the
// client could not connect to the server. It wraps the dial error (a
// *net.OpError: errors.Is(err, syscall.ECONNREFUSED) for a refused
// connection), not the context's error, so that the Locker reports it as
// ErrStorage with its cause.
type connectError struct{ dial error }

func (e *connectError) Error() string { return "no connection to Redis: " + e.dial.Error() }
func (e *connectError) Unwrap() error { return e.dial }

// run runs a script in one round trip. Its first run on this deployment
// sends the script's text (EVAL, which also caches it in Redis), later ones
// its hash (EVALSHA, falling back to EVAL once when a restarted or
// failed-over server, or another cluster master, has not cached it yet).
// EVALSHA alone would make the first call of each script three round trips
// (EVALSHA, NOSCRIPT, EVAL): the first renewal of a watchdog on a slow link
// could then come too late.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	seen := s.cached[sc]
	if seen.Load() {
		return sc.Run(ctx, s.client, keys, args...)
	}
	cmd := sc.Eval(ctx, s.client, keys, args...)
	if err := cmd.Err(); err == nil || err == redis.Nil {
		seen.Store(true)
	}
	return cmd
}

// The lock's companion keys and the fence counter's grace, as every Redis
// client of reqlock names them (internal/redisscript).
const fenceGrace = redisscript.FenceGrace

func fenceKey(key string) string  { return redisscript.FenceKey(key) }
func channelOf(key string) string { return redisscript.Channel(key) }

// The suffixes that make the companion keys and the channel of a lock key,
// for building them straight into a command's arguments (cmdArgs.put).
var (
	fenceSuffix   = redisscript.FenceKey("")
	queueSuffix   = redisscript.QueueKey("")
	waitersSuffix = redisscript.WaitersKey("")
	channelSuffix = redisscript.Channel("")
)

// companionsLen is the length of key, its companion keys and its channel,
// the variable arguments of the scripts of redisscript.Keys but the token.
func companionsLen(key string) int {
	return 5*len(key) + len(fenceSuffix) + len(queueSuffix) + len(waitersSuffix) + len(channelSuffix)
}

// TryAcquire is Redis's documented single-instance lock, SET key token NX
// PX ttl GET (a script on servers before Redis 7.0, and with fenced, which
// also draws the next fence). An attempt that fails after its command may
// have reached Redis is undone, at once and in the background (see the
// package documentation).
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.attempt(ctx, key, token, ttl, fenced, false)
}

// TryAcquireFree is TryAcquire for an attempt that expects a free name
// (lockstore.FreeAcquirer): a native SET key token NX PX ttl, which answers
// a free name with OK (cheap to read). Its answer to a held name does not
// tell whose token holds it: a re-sent transmission of this very attempt
// reports false, and the Locker's next attempt, with the same token, finds
// it its own (see lockstore.FreeAcquirer).
func (s *Store) TryAcquireFree(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.attempt(ctx, key, token, ttl, fenced, true)
}

// attempt is TryAcquire and TryAcquireFree: the attempt, and its clean-up if
// it fails. An attempt that fails after its command may have reached Redis
// is undone (see mayHaveApplied) without holding the caller up past the
// attempt's context, whose deadline is the Locker's I/O timeout: a
// compare-and-delete of its token is sent at once if the context has time
// left, and again in the background every 250 ms until it deletes the key,
// or until the attempt's SET can no longer arrive late (see Undo): a stalled
// server or link may run it after the attempt has failed, so that a
// compare-and-delete that finds nothing proves nothing.
func (s *Store) attempt(ctx context.Context, key, token string, ttl time.Duration, fenced, free bool) (bool, int64, error) {
	sent := time.Now()
	ok, fence, err := s.tryAcquire(ctx, key, token, ttl, fenced, free)
	if err != nil && mayHaveApplied(err) {
		s.Undo(ctx, key, token, ttl, sent)
	}
	return ok, fence, s.failed(err)
}

// tryAcquire sends one attempt. SET ... NX GET returns the value the key
// already had: none means the key is now ours; our own token means that the
// client re-sent this attempt after losing the reply of a transmission that
// did set the key, so it is ours too, instead of a lock that waits for
// itself until its TTL ends, once a compare-and-extend has given it the TTL
// of this attempt.
//
// A native command costs Redis, the resource every instance shares, a fifth
// of the CPU of a script doing the same (about 2 µs against 9 µs per call on
// Redis 7). Servers before Redis 7.0 reject NX with GET; for them the same
// logic runs as acquire.lua. With fenced, acquire_fenced.lua does the same
// and draws the next fence: the larger of the name's counter + 1 and the
// server's clock in microseconds (Redis 5.0 or later).
//
// With free (the first attempt of an Acquire, see TryAcquireFree) it
// sends SET key token NX PX ttl, without GET: SET ... NX GET answers a free
// name with a nil reply, which go-redis turns into an error (redis.Nil) and
// classifies on its error path (whether to retry, whether the connection
// is bad) at the cost of some twenty allocations, more than the rest of an
// uncontended acquire and release, while SET ... NX answers it with OK. Its
// nil reply to a held name may be this very attempt's re-sent
// transmission, whose first reply was lost: the Locker sends its next
// attempt with the same token, and SET ... NX GET recognises it. (This
// used to be acquire.lua, one round trip either way but a script: 2 to 3
// µs more of Redis's CPU on every uncontended acquire, the resource every
// instance shares.) A core.Locker sends its later attempts through
// TryAcquireHeld (the same native command with GET, which also tells
// shares apart), and once shares held the name, through TryAcquireWaiting
// (acquire_waiting.lua: the same SET, and the waiting writer's record),
// one round trip each.
func (s *Store) tryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced, free bool) (bool, int64, error) {
	if fenced {
		fence, err := s.run(ctx, acquireFencedScript, []string{key, fenceKey(key)}, token, ttl.Milliseconds(), (ttl + fenceGrace).Milliseconds()).Int64()
		return err == nil && fence > 0, fence, err
	}
	if free {
		ok, err := s.setNX(ctx, key, token, ttl)
		return ok, 0, err
	}
	if !s.noSetGet.Load() {
		ok, _, err := s.setNXGet(ctx, key, token, ttl)
		if !errors.Is(err, errNoSetGet) {
			return ok, 0, err
		}
	}
	a := scriptArgs(acquireScript, "1", 3, 3, len(key)+len(token)+decLen(ttl.Milliseconds()))
	a.put(key)
	a.put(token)
	a.putInt(ttl.Milliseconds())
	n, err := call(ctx, s, acquireScript, a, redis.NewCmd).Int64()
	return n == 1, 0, err
}

// setNX sends SET key token NX PX ttl, one native command: true when the
// key is now ours, false when it was held (by another holder, or by this
// token if a lost reply made the client send it again).
func (s *Store) setNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	cmd := redis.NewStatusCmd(ctx, setArgs(key, token, ttl, false).list...)
	_ = s.client.Process(ctx, cmd)
	switch err := cmd.Err(); err {
	case nil:
		return true, nil
	case redis.Nil:
		return false, nil
	default:
		return false, err
	}
}

// setArgs are the arguments of SET key token PX ttl NX, and GET with get.
func setArgs(key, token string, ttl time.Duration, get bool) *cmdArgs {
	a := newCmdArgs(7, 3, len(key)+len(token)+decLen(ttl.Milliseconds()))
	a.add("set")
	a.put(key)
	a.put(token)
	a.add("px")
	a.putInt(ttl.Milliseconds())
	if get {
		a.add("nx", "get")
	} else {
		a.add("nx")
	}
	return a
}

// errNoSetGet is setNXGet's answer on a server that rejects SET ... NX GET
// (before Redis 7.0); noSetGet is then set, and the caller runs a script.
var errNoSetGet = errors.New("redisstore: SET ... NX GET is not supported")

// setNXGet sends SET key token NX PX ttl GET, one native command, and
// reads the value the key already had: none means the key is now ours; our
// own token means that the client re-sent this attempt after losing the
// reply of a transmission that did set the key, so it is ours too, once a
// compare-and-extend has given it the TTL of this attempt (one more round
// trip, on this rare path only, as the scripts do, or the key could
// expire before the validity the lease is given); the marker of shares
// (redisscript.MarkerPrefix) means shares hold it: shared, and the
// command wrote nothing.
func (s *Store) setNXGet(ctx context.Context, key, token string, ttl time.Duration) (ok, shared bool, err error) {
	cmd := redis.NewStringCmd(ctx, setArgs(key, token, ttl, true).list...)
	_ = s.client.Process(ctx, cmd)
	old, err := cmd.Result()
	switch {
	case err == redis.Nil:
		return true, false, nil
	case err == nil && old == token:
		ok, _, err := s.extend(ctx, key, token, ttl, false)
		return ok, false, err
	case err == nil:
		return false, strings.HasPrefix(old, redisscript.MarkerPrefix), nil
	case !isSyntaxError(err):
		return false, false, err
	}
	s.noSetGet.Store(true)
	return false, false, errNoSetGet
}

// TryAcquireHeld is TryAcquire for a later exclusive attempt of an Acquire,
// one that expects a held name (lockstore.HeldAcquirer): one native SET key
// token NX PX ttl GET, which answers a held name with the holder's token at
// no cost to classify, and which also tells shares apart (the lock key then
// holds their marker, and the SET wrote nothing): shared. A fenced attempt,
// and any on a server before Redis 7.0, runs acquire_held.lua instead (the
// same logic, the fence drawn in the same step). It writes no waiting
// writer's record (TryAcquireWaiting does) and clears none. A failed
// attempt is undone as TryAcquire's are.
func (s *Store) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	sent := time.Now()
	ok, shared, fence, err := s.tryAcquireHeld(ctx, key, token, ttl, fenced)
	if err != nil && mayHaveApplied(err) {
		s.Undo(ctx, key, token, ttl, sent)
	}
	return ok, shared, fence, s.failed(err)
}

func (s *Store) tryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	if !fenced && !s.noSetGet.Load() {
		ok, shared, err := s.setNXGet(ctx, key, token, ttl)
		if !errors.Is(err, errNoSetGet) {
			return ok, shared, 0, err
		}
	}
	n, err := s.run(ctx, acquireHeldScript, []string{key, fenceKey(key)}, token, ttl.Milliseconds(), redisscript.Flag(fenced), (ttl + fenceGrace).Milliseconds()).Int64()
	switch {
	case err != nil:
		return false, false, 0, err
	case n == -1:
		return false, true, 0, nil
	case n <= 0:
		return false, false, 0, nil
	case fenced:
		return true, false, n, nil
	}
	return true, false, 0, nil
}

// isSyntaxError reports the server's rejection of a command's options.
func isSyntaxError(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.Contains(strings.ToLower(reply.Error()), "syntax error")
}

// Release is compare-and-delete (release.lua): the key is deleted only if it
// holds token. Once Announce was called, the same script publishes on the
// key's release channel.
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := s.release(ctx, key, token)
	return n == 1, s.failed(err)
}

// release runs release.lua for key and token (see call).
func (s *Store) release(ctx context.Context, key, token string) (int64, error) {
	return call(ctx, s, releaseScript, s.releaseArgs(key, token), redis.NewCmd).Int64()
}

// releaseArgs are the EVALSHA arguments of release.lua for key and token:
// the keys of redisscript.Keys, the token, the key's channel, whether to
// announce the release, and the fence counter's grace.
func (s *Store) releaseArgs(key, token string) *cmdArgs {
	a := scriptArgs(releaseScript, "4", 8, 6, companionsLen(key)+len(token))
	a.put(key)
	a.put(key, fenceSuffix)
	a.put(key, queueSuffix)
	a.put(key, waitersSuffix)
	a.put(token)
	a.put(key, channelSuffix)
	if s.announce.Load() {
		a.add("1")
	} else {
		a.add("0")
	}
	a.add(fenceGraceArg)
	return a
}

// Extend is compare-and-extend (extend.lua), or with fenced
// extend_fenced.lua, which also draws a new fence.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.extend(ctx, key, token, ttl, fenced)
	return ok, fence, s.failed(err)
}

func (s *Store) extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if fenced {
		fence, err := s.run(ctx, extendFencedScript, []string{key, fenceKey(key)}, token, ttl.Milliseconds(), (ttl + fenceGrace).Milliseconds()).Int64()
		return err == nil && fence > 0, fence, err
	}
	n, err := s.run(ctx, extendScript, []string{key}, token, ttl.Milliseconds()).Int64()
	return n == 1, 0, err
}

// RaiseFence sets the fence counter to at least fence if the key still holds
// token (lockstore.FenceRaiser: Redlock's second phase, fence_floor.lua); a
// raised counter expires 5 s after the lock.
func (s *Store) RaiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	n, err := s.run(ctx, fenceFloorScript, []string{key, fenceKey(key)}, token, fence, fenceGrace.Milliseconds()).Int64()
	return n == 1, s.failed(err)
}

// Enqueue is the fair queue's acquire and poll (enqueue.lua, one round
// trip): take key if it is free and nobody lives ahead of token in its
// queue, else queue token or keep its place, renewed for patience.
func (s *Store) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (lockstore.Grant, error) {
	sent := time.Now()
	r, err := call(ctx, s, enqueueScript, enqueueArgs(key, token, ttl, patience, fenced), redis.NewIntSliceCmd).Result()
	if err != nil {
		if mayHaveApplied(err) {
			// The call may have taken key, or queued token: leave, at once
			// and in the background, as a failed TryAcquire is undone.
			s.Undo(ctx, key, token, ttl, sent)
		}
		return lockstore.Grant{}, s.failed(err)
	}
	if len(r) != 3 {
		return lockstore.Grant{}, fmt.Errorf("reqlock: enqueue: unexpected reply %v", r)
	}
	return lockstore.Grant{OK: r[0] == 1, Fence: r[1], TTL: time.Duration(r[2]) * time.Millisecond}, nil
}

// enqueueArgs are the EVALSHA arguments of enqueue.lua: the keys of
// redisscript.Keys, the token, the TTL and the patience in ms, fenced ("1"
// or "0"), the key's channel and the fence counter's grace.
func enqueueArgs(key, token string, ttl, patience time.Duration, fenced bool) *cmdArgs {
	a := scriptArgs(enqueueScript, "4", 10, 8, companionsLen(key)+len(token)+decLen(ttl.Milliseconds())+decLen(patience.Milliseconds()))
	a.put(key)
	a.put(key, fenceSuffix)
	a.put(key, queueSuffix)
	a.put(key, waitersSuffix)
	a.put(token)
	a.putInt(ttl.Milliseconds())
	a.putInt(patience.Milliseconds())
	if fenced {
		a.add("1")
	} else {
		a.add("0")
	}
	a.put(key, channelSuffix)
	a.add(fenceGraceArg)
	return a
}

// Poll renews the places of waiters in key's queue and grants a free key to
// its first live waiter (poll.lua, one round trip).
func (s *Store) Poll(ctx context.Context, key string, waiters []lockstore.Waiter, patience time.Duration, fenced bool) (int, lockstore.Grant, error) {
	args := make([]any, 0, 4+2*len(waiters))
	args = append(args, patience.Milliseconds(), redisscript.Flag(fenced), channelOf(key), fenceGrace.Milliseconds())
	for _, w := range waiters {
		args = append(args, w.Token, w.TTL.Milliseconds())
	}
	r, err := s.run(ctx, pollScript, redisscript.Keys(key), args...).Int64Slice()
	if err != nil {
		return -1, lockstore.Grant{}, s.failed(err)
	}
	i, fence, ttl, err := redisscript.ParsePoll(r, len(waiters))
	if err != nil {
		return -1, lockstore.Grant{}, fmt.Errorf("reqlock: poll %s: %w", key, err)
	}
	if i < 0 {
		return -1, lockstore.Grant{}, nil
	}
	return i, lockstore.Grant{OK: true, Fence: fence, TTL: ttl}, nil
}

// Dequeue takes token out of key's queue (dequeue.lua, one round trip);
// a lock granted to it meanwhile is released and granted on.
func (s *Store) Dequeue(ctx context.Context, key, token string) error {
	err := s.run(ctx, dequeueScript, redisscript.Keys(key), token, channelOf(key), fenceGrace.Milliseconds()).Err()
	return s.failed(err)
}

// Grants subscribes to key's channel, on the store's one shared pub/sub
// connection, for the grants of token.
func (s *Store) Grants(key, token string) (<-chan lockstore.Grant, func()) {
	g := make(chan lockstore.Grant, 1)
	n := s.subscriber()
	w := n.joinQueue(key, token, g)
	return g, func() { n.leave(w) }
}

// Announce makes later releases publish on the key's channel.
func (s *Store) Announce() { s.announce.Store(true) }

// Watch subscribes to the release channel of key: one shared pub/sub
// connection per store, subscribed to the channels that have waiters (or had
// one within the linger, see core.WithNotifyLinger).
func (s *Store) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	return c, s.watchInto(key, c)
}

// watchInto signals c on a release of key until the returned stop is called;
// Redlock shares one channel among its nodes.
func (s *Store) watchInto(key string, c chan struct{}) (stop func()) {
	n := s.subscriber()
	w := n.join(key, c)
	return func() { n.leave(w) }
}

// subscriber returns the store's notifier, made at the first call; nil once
// the store is closed.
func (s *Store) subscriber() *notifier {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notifier == nil && !s.closed {
		s.notifier = newNotifier([]redis.UniversalClient{s.client}, lockstore.DefaultIOTimeout, s.linger)
	}
	return s.notifier
}

// undoTimeout returns the time a call of a clean-up may take.
func (s *Store) undoTimeout() time.Duration {
	if d := time.Duration(s.ioTimeout.Load()); d > 0 {
		return d
	}
	return lockstore.DefaultIOTimeout
}

// setLinger sets how long a channel stays subscribed without waiters; the
// Locker passes core.WithNotifyLinger before its first Watch (Tune).
func (s *Store) setLinger(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notifier == nil {
		s.linger = d
	}
}

// Close ends the subscription of Watch and the clean-ups of failed attempts
// that are still retrying (within the I/O timeout, the bound of their call
// in flight; keys they could not remove yet expire with their TTL), and
// waits for their goroutines. It does not close the client. Attempts that
// fail after Close get one compare-and-delete, within their context.
func (s *Store) Close() error {
	s.mu.Lock()
	n := s.notifier
	s.closed = true
	s.mu.Unlock()
	n.close()
	s.undos.Close()
	s.shareUndos.Close()
	return nil
}

// mayHaveApplied reports whether a command that failed with err may still have
// been executed by the server: everything but a failure to connect. An
// acquire that fails this way is undone with a compare-and-delete (see
// undo.go), so that a SET whose reply was lost, or that a stalled server
// runs late, does not keep the name locked for a whole TTL.
// An error reply counts too: a script that fails after its SET (Redis does
// not roll scripts back) has left the key set. Undoing is always safe, as the
// compare-and-delete only deletes the attempt's own token; it costs a round
// trip on a failure path only.
func mayHaveApplied(err error) bool {
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}
