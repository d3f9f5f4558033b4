package rueidisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/undo"
)

// Store is the core.Store on the Redis deployment behind a rueidis client:
// a standalone server, a Sentinel-managed master or a Cluster. It
// implements core.Notifier, core.FenceRaiser, core.Queuer (the fair
// queue of core.WithFair), core.Undoer, core.Sharer (core.Shared and
// core.Permits), core.MultiAcquirer (core.Locker.AcquireAll) and
// lockstore.Inspector (List, Inspect). Its methods are safe for concurrent
// use.
type Store struct {
	client    rueidis.Client
	ioTimeout time.Duration
	linger    time.Duration

	// noSetGet is set once the server rejected SET ... NX GET (servers
	// before Redis 7.0); acquires then run acquire.lua instead.
	noSetGet atomic.Bool
	// noEvalRO is set once the server rejected EVAL_RO (servers before
	// Redis 7.0); Inspect's script then runs by EVAL (see runRO).
	noEvalRO atomic.Bool
	scripts  [numScripts]atomic.Bool // whether each script ran on this deployment already (see run)
	announce atomic.Bool             // Announce was called: releases publish

	undos *undo.Queue
	// shareUndos are the clean-ups of failed share attempts (see
	// UndoShare): a ReleaseShare, not a compare-and-delete.
	shareUndos *undo.Queue

	mu       sync.Mutex
	notifier *notifier // made by the first Watch or Grants
	closed   bool
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.Notifier     = (*Store)(nil)
	_ core.FenceRaiser  = (*Store)(nil)
	_ core.Queuer       = (*Store)(nil)
	_ core.Undoer       = (*Store)(nil)
	_ core.HeldAcquirer = (*Store)(nil)
)

// The scripts, shared with the go-redis store of stores/redis (internal/redisscript).
type scriptID int

const (
	acquireScript scriptID = iota
	acquireFencedScript
	releaseScript
	extendScript
	extendFencedScript
	fenceFloorScript
	enqueueScript
	dequeueScript
	pollScript
	acquireShareScript
	releaseShareScript
	extendShareScript
	acquireWaitingScript
	acquireAllScript
	inspectScript
	acquireHeldScript
	numScripts
)

var scripts = [numScripts]struct {
	src string
	lua *rueidis.Lua
}{
	acquireScript:       {redisscript.Acquire, rueidis.NewLuaScript(redisscript.Acquire)},
	acquireFencedScript: {redisscript.AcquireFenced, rueidis.NewLuaScript(redisscript.AcquireFenced)},
	releaseScript:       {redisscript.Release, rueidis.NewLuaScript(redisscript.Release)},
	extendScript:        {redisscript.Extend, rueidis.NewLuaScript(redisscript.Extend)},
	extendFencedScript:  {redisscript.ExtendFenced, rueidis.NewLuaScript(redisscript.ExtendFenced)},
	fenceFloorScript:    {redisscript.FenceFloor, rueidis.NewLuaScript(redisscript.FenceFloor)},
	enqueueScript:       {redisscript.Enqueue, rueidis.NewLuaScript(redisscript.Enqueue)},
	dequeueScript:       {redisscript.Dequeue, rueidis.NewLuaScript(redisscript.Dequeue)},
	pollScript:          {redisscript.Poll, rueidis.NewLuaScript(redisscript.Poll)},

	acquireShareScript:   {redisscript.AcquireShare, rueidis.NewLuaScript(redisscript.AcquireShare)},
	releaseShareScript:   {redisscript.ReleaseShare, rueidis.NewLuaScript(redisscript.ReleaseShare)},
	extendShareScript:    {redisscript.ExtendShare, rueidis.NewLuaScript(redisscript.ExtendShare)},
	acquireWaitingScript: {redisscript.AcquireWaiting, rueidis.NewLuaScript(redisscript.AcquireWaiting)},
	acquireAllScript:     {redisscript.AcquireAll, rueidis.NewLuaScript(redisscript.AcquireAll)},
	inspectScript:        {redisscript.Inspect, rueidis.NewLuaScript(redisscript.Inspect)},
	acquireHeldScript:    {redisscript.AcquireHeld, rueidis.NewLuaScript(redisscript.AcquireHeld)},
}

// releaseSHA and releaseShareSHA are the SHA-1 of release.lua and
// release_share.lua, for EVALSHA in a pipeline.
var (
	releaseSHA      = sha1Hex(redisscript.Release)
	releaseShareSHA = sha1Hex(redisscript.ReleaseShare)
)

func sha1Hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// New returns the Store on the Redis deployment behind client. It does no
// I/O. A nil client or an invalid option is an error, and nothing is built.
// The Store does not close client: Close the Store first, then the client.
func New(client rueidis.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("rueidisstore: New: the client is nil")
	}
	cfg := config{ioTimeout: core.DefaultIOTimeout, linger: core.DefaultNotifyLinger}
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("rueidisstore: New: option %d is nil", i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{client: client, ioTimeout: cfg.ioTimeout, linger: cfg.linger}
	s.undos = undo.NewQueue(s.sweep, func() time.Duration { return s.ioTimeout })
	s.shareUndos = undo.NewQueue(s.sweepShares, func() time.Duration { return s.ioTimeout })
	return s, nil
}

// run runs a script in one round trip. Its first run on this deployment
// sends the script's text (EVAL, which also caches it in Redis), later ones
// its hash (EVALSHA, falling back to EVAL once when a restarted or
// failed-over server, or another cluster master, has not cached it yet:
// rueidis's Lua.Exec), as the go-redis store does.
func (s *Store) run(ctx context.Context, id scriptID, keys []string, args ...string) rueidis.RedisResult {
	if err := s.oneSlot(keys); err != nil {
		return rueidis.NewErrorResult(err)
	}
	sc := &scripts[id]
	if s.scripts[id].Load() {
		return sc.lua.Exec(ctx, s.client, keys, args)
	}
	r := s.client.Do(ctx, s.client.B().Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if err := r.Error(); err == nil || rueidis.IsRedisNil(err) {
		s.scripts[id].Store(true)
	}
	return r
}

// errCrossSlot is the error of a script whose keys hash to several Cluster
// slots: a lock key without a hash tag, whose companion keys (key +
// ":fence", ...) then hash apart. rueidis panics when it builds such a
// command; a core.Locker's keys always carry a hash tag.
var errCrossSlot = errors.New("rueidisstore: the lock key and its companion keys hash to different Cluster slots: give the key a hash tag (prefix{name})")

// oneSlot returns errCrossSlot, wrapped with keys[0], when the client is a
// cluster client and keys hash to several slots; nil otherwise.
func (s *Store) oneSlot(keys []string) error {
	if len(keys) > 1 && s.client.Mode() == rueidis.ClientModeCluster && !redisscript.OneSlot(keys) {
		return fmt.Errorf("%w (%s)", errCrossSlot, keys[0])
	}
	return nil
}

// ms formats d in milliseconds, as the scripts take TTLs.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// TryAcquire is Redis's documented single-instance lock, as the go-redis
// store of core does it: SET key token NX PX ttl GET, one native command
// (acquire.lua on servers before Redis 7.0, which reject NX with GET). GET
// returns the value the key had: none means the key is now ours; our own
// token means that this attempt was sent before and did set the key, so
// it is ours too, once a compare-and-extend has given it this attempt's
// TTL. With fenced, acquire_fenced.lua does the same and draws the next
// fence: the larger of the name's counter + 1 and the server's clock in
// microseconds.
//
// An attempt that fails after its command may have reached Redis is undone
// by a compare-and-delete of its token, at once within ctx if ctx has time
// left, then in the background every 250 ms until it deletes the key or
// Redis has answered for the attempt's TTL (internal/undo): a stalled
// server or link may run the attempt's command late.
func (s *Store) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	sent := time.Now()
	ok, fence, err := s.tryAcquire(ctx, key, token, ttl, fenced)
	if err != nil {
		if mayHaveApplied(err) {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, 0, fmt.Errorf("rueidisstore: acquire %s: %w", key, err)
	}
	return ok, fence, nil
}

func (s *Store) tryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if fenced {
		fence, err := s.run(ctx, acquireFencedScript, []string{key, redisscript.FenceKey(key)}, token, ms(ttl), ms(ttl+redisscript.FenceGrace)).AsInt64()
		return err == nil && fence > 0, fence, err
	}
	if !s.noSetGet.Load() {
		ok, _, err := s.setNXGet(ctx, key, token, ttl)
		if !errors.Is(err, errNoSetGet) {
			return ok, 0, err
		}
	}
	n, err := s.run(ctx, acquireScript, []string{key}, token, ms(ttl)).AsInt64()
	return n == 1, 0, err
}

// errNoSetGet is setNXGet's answer on a server that rejects SET ... NX GET
// (before Redis 7.0); noSetGet is then set, and the caller runs a script.
var errNoSetGet = errors.New("rueidisstore: SET ... NX GET is not supported")

// setNXGet sends SET key token NX PX ttl GET and reads the value the key
// had: none, the key is ours; our own token (a re-sent attempt), ours too
// once a compare-and-extend has reset its TTL (one more round trip, on this
// rare path only, as the scripts do); the marker of shares
// (redisscript.MarkerPrefix), shared, and nothing was written.
func (s *Store) setNXGet(ctx context.Context, key, token string, ttl time.Duration) (ok, shared bool, err error) {
	old, err := s.client.Do(ctx, s.client.B().Set().Key(key).Value(token).Nx().Get().PxMilliseconds(ttl.Milliseconds()).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
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

// TryAcquireHeld is TryAcquire for a later exclusive attempt of an Acquire
// (core.HeldAcquirer): one native SET key token NX PX ttl GET, which also
// tells shares apart (the key holds their marker; nothing is written):
// shared. A fenced attempt, and any on a server before Redis 7.0, runs
// acquire_held.lua (the same, with the fence drawn in the same step). No
// waiting writer's record is written or cleared. A failed attempt is undone
// as TryAcquire's are.
func (s *Store) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	sent := time.Now()
	ok, shared, fence, err := s.tryAcquireHeld(ctx, key, token, ttl, fenced)
	if err != nil {
		if mayHaveApplied(err) {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return false, false, 0, fmt.Errorf("rueidisstore: acquire %s: %w", key, err)
	}
	return ok, shared, fence, nil
}

func (s *Store) tryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	if !fenced && !s.noSetGet.Load() {
		ok, shared, err := s.setNXGet(ctx, key, token, ttl)
		if !errors.Is(err, errNoSetGet) {
			return ok, shared, 0, err
		}
	}
	n, err := s.run(ctx, acquireHeldScript, []string{key, redisscript.FenceKey(key)}, token, ms(ttl), redisscript.Flag(fenced), ms(ttl+redisscript.FenceGrace)).AsInt64()
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
	reply, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(strings.ToLower(reply.Error()), "syntax error")
}

// Release is compare-and-delete (release.lua): the key is deleted only if
// it holds token. Once Announce was called, the same script publishes on
// the key's release channel.
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := s.run(ctx, releaseScript, redisscript.Keys(key), s.releaseArgs(key, token)...).AsInt64()
	if err != nil {
		return false, fmt.Errorf("rueidisstore: release %s: %w", key, err)
	}
	return n == 1, nil
}

// releaseArgs are the arguments of release.lua for key and token.
func (s *Store) releaseArgs(key, token string) []string {
	announce := "0"
	if s.announce.Load() {
		announce = "1"
	}
	return []string{token, redisscript.Channel(key), announce, ms(redisscript.FenceGrace)}
}

// Extend is compare-and-extend (extend.lua), or with fenced
// extend_fenced.lua, which also draws a new fence.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.extend(ctx, key, token, ttl, fenced)
	if err != nil {
		return false, 0, fmt.Errorf("rueidisstore: extend %s: %w", key, err)
	}
	return ok, fence, nil
}

func (s *Store) extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if fenced {
		fence, err := s.run(ctx, extendFencedScript, []string{key, redisscript.FenceKey(key)}, token, ms(ttl), ms(ttl+redisscript.FenceGrace)).AsInt64()
		return err == nil && fence > 0, fence, err
	}
	n, err := s.run(ctx, extendScript, []string{key}, token, ms(ttl)).AsInt64()
	return n == 1, 0, err
}

// RaiseFence sets the fence counter of key to at least fence if key still
// holds token (fence_floor.lua: Redlock's second phase); a raised counter
// expires a few seconds after the lock.
func (s *Store) RaiseFence(ctx context.Context, key, token string, fence int64) (bool, error) {
	n, err := s.run(ctx, fenceFloorScript, []string{key, redisscript.FenceKey(key)}, token, strconv.FormatInt(fence, 10), ms(redisscript.FenceGrace)).AsInt64()
	if err != nil {
		return false, fmt.Errorf("rueidisstore: raise the fence of %s: %w", key, err)
	}
	return n == 1, nil
}

// Announce makes later releases publish on the key's release channel, as
// the go-redis store's do: waiters of either client wake up.
func (s *Store) Announce() { s.announce.Store(true) }

// Watch subscribes to the release channel of key: one dedicated pub/sub
// connection per Store, subscribed to the channels that have waiters (or
// had one within the linger, see WithNotifyLinger). After Close it returns
// a channel that never receives.
func (s *Store) Watch(key string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	n := s.subscriber()
	w := n.join(key, c)
	return c, func() { n.leave(w) }
}

// Enqueue is the fair queue's acquire and poll (enqueue.lua, one round
// trip), as the go-redis store's: take key if it is free and nobody lives
// ahead of token in its queue, else queue token or keep its place, renewed
// for patience. A call that fails after it may have reached Redis is undone
// as a failed TryAcquire is (a compare-and-delete of token, at once and in
// the background); a place in the queue it may have left dies after
// patience.
func (s *Store) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	sent := time.Now()
	r, err := s.run(ctx, enqueueScript, redisscript.Keys(key), token, ms(ttl), ms(patience), redisscript.Flag(fenced), redisscript.Channel(key), ms(redisscript.FenceGrace)).AsIntSlice()
	if err != nil {
		if mayHaveApplied(err) {
			s.Undo(ctx, key, token, ttl, sent)
		}
		return core.Grant{}, fmt.Errorf("rueidisstore: enqueue %s: %w", key, err)
	}
	if len(r) != 3 {
		return core.Grant{}, fmt.Errorf("rueidisstore: enqueue %s: unexpected reply %v", key, r)
	}
	return core.Grant{OK: r[0] == 1, Fence: r[1], TTL: time.Duration(r[2]) * time.Millisecond}, nil
}

// Poll renews the places of waiters in key's queue and grants a free key to
// its first live waiter (poll.lua, one round trip), as the go-redis
// store's.
func (s *Store) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	args := make([]string, 0, 4+2*len(waiters))
	args = append(args, ms(patience), redisscript.Flag(fenced), redisscript.Channel(key), ms(redisscript.FenceGrace))
	for _, w := range waiters {
		args = append(args, w.Token, ms(w.TTL))
	}
	r, err := s.run(ctx, pollScript, redisscript.Keys(key), args...).AsIntSlice()
	if err != nil {
		return -1, core.Grant{}, fmt.Errorf("rueidisstore: poll %s: %w", key, err)
	}
	i, fence, ttl, err := redisscript.ParsePoll(r, len(waiters))
	if err != nil {
		return -1, core.Grant{}, fmt.Errorf("rueidisstore: poll %s: %w", key, err)
	}
	if i < 0 {
		return -1, core.Grant{}, nil
	}
	return i, core.Grant{OK: true, Fence: fence, TTL: ttl}, nil
}

// Dequeue takes token out of key's queue (dequeue.lua, one round trip); a
// lock granted to it meanwhile is released and granted on.
func (s *Store) Dequeue(ctx context.Context, key, token string) error {
	if err := s.run(ctx, dequeueScript, redisscript.Keys(key), token, redisscript.Channel(key), ms(redisscript.FenceGrace)).Error(); err != nil {
		return fmt.Errorf("rueidisstore: dequeue %s: %w", key, err)
	}
	return nil
}

// Grants subscribes to key's channel, on the Store's dedicated pub/sub
// connection (the one of Watch), for the grants of token: a release of
// either client that grants key to token publishes "token fence ttl" there.
// The channel also receives a Grant without OK, a request to poll, when
// the subscription is confirmed, and again when a new connection confirms
// it after a lost one: a grant may have been published before. After Close
// it returns a channel that never receives.
func (s *Store) Grants(key, token string) (<-chan core.Grant, func()) {
	g := make(chan core.Grant, 1)
	n := s.subscriber()
	w := n.joinQueue(key, token, g)
	return g, func() { n.leave(w) }
}

// subscriber returns the Store's notifier, made at the first call; nil once
// the Store is closed.
func (s *Store) subscriber() *notifier {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notifier == nil && !s.closed {
		s.notifier = newNotifier(s.client, s.ioTimeout, s.linger)
	}
	return s.notifier
}

// Undo removes key if it holds token, at once within ctx and then in the
// background (core.Undoer): the clean-up of a failed attempt (see
// TryAcquire), of a release that failed, and of the place of a fair waiter
// that has gone (release.lua takes a token that does not hold the key out
// of its queue).
func (s *Store) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.undos.Undo(ctx, key, token, ttl, sent, func(ctx context.Context) undo.Outcome {
		n, err := s.run(ctx, releaseScript, redisscript.Keys(key), s.releaseArgs(key, token)...).AsInt64()
		return undoOutcome(n, err)
	})
}

// sweep sends the compare-and-delete of each clean-up of batch, in one
// pipeline (DoMulti; a cluster client splits it by slot), within ctx: by
// EVALSHA once the script is known to the deployment, by EVAL (which caches
// it) the first time and after a NOSCRIPT (a restarted server).
func (s *Store) sweep(ctx context.Context, batch []*undo.Attempt) []undo.Outcome {
	seen := &s.scripts[releaseScript]
	sha := seen.Load()
	sc := &scripts[releaseScript]
	cmds := make(rueidis.Commands, 0, len(batch))
	outcomes := make([]undo.Outcome, len(batch))
	sent := make([]int, 0, len(batch)) // the attempts of cmds, by index in batch
	for i, a := range batch {
		if s.oneSlot(redisscript.Keys(a.Key)) != nil {
			outcomes[i] = undo.Done // no script can run on its keys: nothing to undo by one
			continue
		}
		sent = append(sent, i)
		args := s.releaseArgs(a.Key, a.Token)
		if sha {
			cmds = append(cmds, s.client.B().Evalsha().Sha1(releaseSHA).Numkeys(4).Key(redisscript.Keys(a.Key)...).Arg(args...).Build())
		} else {
			cmds = append(cmds, s.client.B().Eval().Script(sc.src).Numkeys(4).Key(redisscript.Keys(a.Key)...).Arg(args...).Build())
		}
	}
	if len(cmds) == 0 {
		return outcomes
	}
	results := s.client.DoMulti(ctx, cmds...)
	for j, i := range sent {
		n, err := results[j].AsInt64()
		outcomes[i] = undoOutcome(n, err)
		switch reply, isReply := rueidis.IsRedisErr(err); {
		case err == nil && !sha:
			seen.Store(true)
		case isReply && reply.IsNoScript():
			seen.Store(false)
		}
	}
	return outcomes
}

// undoOutcome is the outcome of a compare-and-delete that replied n, err.
func undoOutcome(n int64, err error) undo.Outcome {
	switch {
	case err == nil && n == 1, errors.Is(err, rueidis.ErrClosing):
		return undo.Done // undone; or the client is closed, and nothing can be sent any more
	case err == nil || isAnswer(err):
		return undo.Answered
	}
	return undo.NoAnswer
}

// isAnswer reports an error that tells, as a reply does, that no command
// the server had received before can still run late: an error reply (the
// server is processing commands), or a refused connection (no server
// listens: the process that had received the attempt is gone, and what it
// had received with it).
func isAnswer(err error) bool {
	_, reply := rueidis.IsRedisErr(err)
	return reply || errors.Is(err, syscall.ECONNREFUSED)
}

// mayHaveApplied reports whether a command that failed with err may still
// have been executed by the server: everything but a failure to connect
// and a closed client. An error reply counts too: a script that fails after
// its SET (Redis does not roll scripts back) has left the key set.
func mayHaveApplied(err error) bool {
	if errors.Is(err, rueidis.ErrClosing) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}

// Close ends the subscription of Watch and Grants and the clean-ups of failed attempts
// that are still retrying (keys they could not remove yet expire with their
// TTL), and waits for their goroutines. It does not close the client.
// Attempts that fail after Close get one compare-and-delete, within their
// context.
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
