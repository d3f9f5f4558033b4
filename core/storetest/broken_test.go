package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/core/storetest"
	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
)

// This file shows that the suite catches what it claims: each property is
// run on a store with a deliberate bug, and must fail.

// base is the real Redis store that a broken store wraps, and its client for
// the parts the broken store does its own way.
type base struct {
	core.Store
	c   *redis.Client
	tag string // fresh per test: the one key of oneKey
}

// Close closes the real store (which does not close the client).
func (b base) Close() error { return b.Store.(io.Closer).Close() }

// overwriting sets the key whoever holds it: SET without NX.
type overwriting struct{ base }

func (s overwriting) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	err := s.c.Set(ctx, key, token, ttl).Err()
	return err == nil, 0, err
}

// noExpiry gives the lock no TTL: it outlives a holder that never releases.
type noExpiry struct{ base }

func (s noExpiry) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Store.TryAcquire(ctx, key, token, ttl, fenced)
	if ok {
		err = s.c.Persist(ctx, key).Err()
	}
	return ok, fence, err
}

// shortTTL gives the lock a quarter of its TTL.
type shortTTL struct{ base }

func (s shortTTL) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.Store.TryAcquire(ctx, key, token, ttl/4, fenced)
}

// releaseIgnoresToken deletes the key whoever holds it.
type releaseIgnoresToken struct{ base }

func (s releaseIgnoresToken) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := s.c.Del(ctx, key).Result()
	return n == 1, err
}

// releaseAlwaysTrue reports a release whether it deleted the key or not.
type releaseAlwaysTrue struct{ base }

func (s releaseAlwaysTrue) Release(ctx context.Context, key, token string) (bool, error) {
	_, err := s.Store.Release(ctx, key, token)
	return err == nil, err
}

// extendIgnoresToken resets the TTL of the key whoever holds it.
type extendIgnoresToken struct{ base }

func (s extendIgnoresToken) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, err := s.c.PExpire(ctx, key, ttl).Result()
	return ok, 0, err
}

// extendSets sets the key to the token, held or not, expired or not.
type extendSets struct{ base }

func (s extendSets) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	err := s.c.Set(ctx, key, token, ttl).Err()
	return err == nil, 0, err
}

// extendKeepsTTL checks the token but forgets to reset the TTL.
type extendKeepsTTL struct{ base }

func (s extendKeepsTTL) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	v, err := s.c.Get(ctx, key).Result()
	if err == redis.Nil {
		return false, 0, nil
	}
	return err == nil && v == token, 0, err
}

// fixedFence hands out fencing token 1 every time.
type fixedFence struct{ base }

func (s fixedFence) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, _, err := s.Store.TryAcquire(ctx, key, token, ttl, false)
	return ok, fence(ok, fenced), err
}

func (s fixedFence) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, _, err := s.Store.Extend(ctx, key, token, ttl, false)
	return ok, fence(ok, fenced), err
}

func fence(ok, fenced bool) int64 {
	if ok && fenced {
		return 1
	}
	return 0
}

// plainSetNX is SET NX PX alone: a re-sent attempt finds its own token and
// fails.
type plainSetNX struct{ base }

func (s plainSetNX) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, err := s.c.SetNX(ctx, key, token, ttl).Result()
	return ok, 0, err
}

// resendKeepsTTL accepts a re-sent attempt but leaves the TTL it was first
// set with.
type resendKeepsTTL struct{ base }

func (s resendKeepsTTL) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	old, err := s.c.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: ttl, Get: true}).Result()
	if err == redis.Nil {
		return true, 0, nil
	}
	return err == nil && old == token, 0, err
}

// oneKey keeps every lock under one key: names block each other.
type oneKey struct{ base }

func (s oneKey) key() string { return "broken:{" + s.tag + "}" }

func (s oneKey) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.Store.TryAcquire(ctx, s.key(), token, ttl, fenced)
}

func (s oneKey) Release(ctx context.Context, key, token string) (bool, error) {
	return s.Store.Release(ctx, s.key(), token)
}

func (s oneKey) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return s.Store.Extend(ctx, s.key(), token, ttl, fenced)
}

// busyIsError reports a held key as an error.
type busyIsError struct{ base }

func (s busyIsError) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Store.TryAcquire(ctx, key, token, ttl, fenced)
	if err == nil && !ok {
		err = errors.New("broken: the key is locked")
	}
	return ok, fence, err
}

// errorsAsBusy swallows errors: a store that is down looks like a held key,
// and a failed release or extend like a lost lock.
type errorsAsBusy struct{ base }

func (s errorsAsBusy) TryAcquire(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Store.TryAcquire(ctx, key, token, ttl, fenced)
	if err != nil {
		return false, 0, nil
	}
	return ok, fence, nil
}

func (s errorsAsBusy) Release(ctx context.Context, key, token string) (bool, error) {
	ok, err := s.Store.Release(ctx, key, token)
	return ok && err == nil, nil
}

func (s errorsAsBusy) Extend(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Store.Extend(ctx, key, token, ttl, fenced)
	if err != nil {
		return false, 0, nil
	}
	return ok, fence, nil
}

// mute is a Notifier whose Announce does nothing: releases are never
// published, so watchers are never woken.
type mute struct{ base }

func (s mute) Announce() {}

func (s mute) Watch(key string) (<-chan struct{}, func()) {
	return s.Store.(core.Notifier).Watch(key)
}

// queue is the real store's fair queue (core.Queuer), for the broken
// Queuers to build on.
type queue struct{ base }

func (q queue) real() core.Queuer { return q.Store.(core.Queuer) }

func (q queue) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	return q.real().Enqueue(ctx, key, token, ttl, patience, fenced)
}

func (q queue) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	return q.real().Poll(ctx, key, waiters, patience, fenced)
}

func (q queue) Dequeue(ctx context.Context, key, token string) error {
	return q.real().Dequeue(ctx, key, token)
}

func (q queue) Grants(key, token string) (<-chan core.Grant, func()) {
	return q.real().Grants(key, token)
}

// enqueueOverwrites is a Queuer whose Enqueue takes the key whoever holds
// it: SET without NX.
type enqueueOverwrites struct{ queue }

func (s enqueueOverwrites) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	err := s.c.Set(ctx, key, token, ttl).Err()
	return core.Grant{OK: err == nil, TTL: ttl}, err
}

// releaseIgnoresQueue is a Queuer whose Release frees the key without
// granting it to the first waiter (plain compare-and-delete): waiters find
// the key free at their next poll.
type releaseIgnoresQueue struct{ queue }

func (s releaseIgnoresQueue) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := s.c.Eval(ctx, `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`,
		[]string{key}, token).Int64()
	return n == 1, err
}

// dequeueLeavesLine is a Queuer whose Dequeue takes the token out of the
// queue, but leaves it the key if a release granted it.
type dequeueLeavesLine struct{ queue }

func (s dequeueLeavesLine) Dequeue(ctx context.Context, key, token string) error {
	return s.c.Eval(ctx, `redis.call("ZREM", KEYS[1], ARGV[1]) redis.call("HDEL", KEYS[2], ARGV[1]) return 0`,
		[]string{redisscript.QueueKey(key), redisscript.WaitersKey(key)}, token).Err()
}

// mutantQueue is a Queuer whose Enqueue, Release, Poll and Dequeue run the
// Redis store's scripts with a deliberate bug in their text.
type mutantQueue struct {
	queue
	enqueue, release, poll, dequeue string
}

// mutant returns a Queuer on b whose scripts have old replaced by new (the
// library queue.lua is in the enqueue, poll and dequeue scripts).
func mutant(b base, old, new string) core.Store {
	m := mutantQueue{queue: queue{b}, enqueue: redisscript.Enqueue, release: redisscript.Release, poll: redisscript.Poll, dequeue: redisscript.Dequeue}
	n := 0
	for _, text := range []*string{&m.enqueue, &m.release, &m.poll, &m.dequeue} {
		n += strings.Count(*text, old)
		*text = strings.ReplaceAll(*text, old, new)
	}
	if n == 0 {
		panic(fmt.Sprintf("broken store: %q is in none of the scripts", old))
	}
	return m
}

func (m mutantQueue) Enqueue(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (core.Grant, error) {
	f := "0"
	if fenced {
		f = "1"
	}
	r, err := m.c.Eval(ctx, m.enqueue, redisscript.Keys(key), token, ttl.Milliseconds(), patience.Milliseconds(), f,
		redisscript.Channel(key), redisscript.FenceGrace.Milliseconds()).Int64Slice()
	if err != nil {
		return core.Grant{}, err
	}
	if len(r) != 3 {
		return core.Grant{}, fmt.Errorf("broken store: enqueue answered %v", r)
	}
	return core.Grant{OK: r[0] == 1, Fence: r[1], TTL: time.Duration(r[2]) * time.Millisecond}, nil
}

func (m mutantQueue) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := m.c.Eval(ctx, m.release, redisscript.Keys(key), token, redisscript.Channel(key), "0", redisscript.FenceGrace.Milliseconds()).Int64()
	return n == 1, err
}

func (m mutantQueue) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	args := []any{patience.Milliseconds(), redisscript.Flag(fenced), redisscript.Channel(key), redisscript.FenceGrace.Milliseconds()}
	for _, w := range waiters {
		args = append(args, w.Token, w.TTL.Milliseconds())
	}
	r, err := m.c.Eval(ctx, m.poll, redisscript.Keys(key), args...).Int64Slice()
	if err != nil {
		return -1, core.Grant{}, err
	}
	i, fence, ttl, err := redisscript.ParsePoll(r, len(waiters))
	if err != nil || i < 0 {
		return -1, core.Grant{}, err
	}
	return i, core.Grant{OK: true, Fence: fence, TTL: ttl}, nil
}

func (m mutantQueue) Dequeue(ctx context.Context, key, token string) error {
	return m.c.Eval(ctx, m.dequeue, redisscript.Keys(key), token, redisscript.Channel(key), redisscript.FenceGrace.Milliseconds()).Err()
}

// pollsNothing is a Queuer whose Poll renews no place and reports no grant.
type pollsNothing struct{ queue }

func (pollsNothing) Poll(context.Context, string, []core.Waiter, time.Duration, bool) (int, core.Grant, error) {
	return -1, core.Grant{}, nil
}

// pollsEveryone is a Queuer whose Poll renews every waiter in the queue,
// listed or not: a waiter that stopped polling keeps its place.
type pollsEveryone struct{ queue }

func (q pollsEveryone) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	members, err := q.c.ZRange(ctx, redisscript.QueueKey(key), 0, -1).Result()
	if err != nil {
		return -1, core.Grant{}, err
	}
	all := slices.Clone(waiters)
	for _, m := range members {
		if !slices.ContainsFunc(waiters, func(w core.Waiter) bool { return w.Token == m }) {
			all = append(all, core.Waiter{Token: m, TTL: patience})
		}
	}
	i, g, err := q.real().Poll(ctx, key, all, patience, fenced)
	if i >= len(waiters) {
		return -1, core.Grant{}, err
	}
	return i, g, err
}

// pollTTLAsked is a Queuer whose Poll reports a grant as lasting the TTL
// the waiter asked for, not what is left of it.
type pollTTLAsked struct{ queue }

func (q pollTTLAsked) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	i, g, err := q.real().Poll(ctx, key, waiters, patience, fenced)
	if i >= 0 {
		g.TTL = waiters[i].TTL
	}
	return i, g, err
}

// pollRequeuesAtHead is a Queuer whose Poll takes a waiter that lost its
// place back at the head of the queue, not at the tail.
type pollRequeuesAtHead struct{ queue }

func (q pollRequeuesAtHead) Poll(ctx context.Context, key string, waiters []core.Waiter, patience time.Duration, fenced bool) (int, core.Grant, error) {
	for _, w := range waiters {
		if err := q.c.ZAddNX(ctx, redisscript.QueueKey(key), redis.Z{Score: 0, Member: w.Token}).Err(); err != nil {
			return -1, core.Grant{}, err
		}
	}
	return q.real().Poll(ctx, key, waiters, patience, fenced)
}

// undoing is the real store's Undo (the Redis store is a core.Undoer).
type undoing struct{ base }

func (s undoing) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	s.Store.(core.Undoer).Undo(ctx, key, token, ttl, sent)
}

// undoIgnoresToken deletes the key whoever holds it.
type undoIgnoresToken struct{ undoing }

func (s undoIgnoresToken) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	_ = s.c.Del(ctx, key).Err()
}

// undoNothing removes nothing.
type undoNothing struct{ undoing }

func (undoNothing) Undo(context.Context, string, string, time.Duration, time.Time) {}

// undoKeepsPlace is a Queuer whose Undo is a plain compare-and-delete: a
// waiter's token stays in the queue.
type undoKeepsPlace struct{ queue }

func (q undoKeepsPlace) Undo(ctx context.Context, key, token string, ttl time.Duration, sent time.Time) {
	_ = q.c.Eval(ctx, `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`, []string{key}, token).Err()
}

// freeAcquireOverwrites is a FreeAcquirer whose TryAcquireFree sets the
// key whoever holds it.
type freeAcquireOverwrites struct{ base }

func (s freeAcquireOverwrites) TryAcquireFree(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if err := s.c.Set(ctx, key, token, ttl).Err(); err != nil {
		return false, 0, err
	}
	return true, 0, nil
}

// freeAcquireNeverTakes is a FreeAcquirer whose TryAcquireFree reports
// false and takes nothing: its false is not the re-sent answer that
// core.FreeAcquirer allows.
type freeAcquireNeverTakes struct{ base }

func (freeAcquireNeverTakes) TryAcquireFree(context.Context, string, string, time.Duration, bool) (bool, int64, error) {
	return false, 0, nil
}

// sharing is the Redis store, a Sharer and a HeldAcquirer, whose
// TryAcquireHeld a broken store below replaces.
type sharing struct{ base }

func (m sharing) sharer() core.Sharer { return m.Store.(core.Sharer) }

func (m sharing) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	return m.sharer().TryAcquireShare(ctx, key, token, ttl, h, fenced)
}

func (m sharing) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	return m.sharer().ReleaseShare(ctx, key, token)
}

func (m sharing) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return m.sharer().ExtendShare(ctx, key, token, ttl, fenced)
}

func (m sharing) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	return m.sharer().TryAcquireWaiting(ctx, key, token, ttl, patience, fenced)
}

func (m sharing) held() core.HeldAcquirer { return m.Store.(core.HeldAcquirer) }

// heldOverwrites is a HeldAcquirer whose TryAcquireHeld sets the key
// whoever holds it.
type heldOverwrites struct{ sharing }

func (s heldOverwrites) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	if err := s.c.Set(ctx, key, token, ttl).Err(); err != nil {
		return false, false, 0, err
	}
	return true, false, fence(true, fenced), nil
}

// heldHidesShares is a HeldAcquirer that answers a key shares hold as an
// exclusive holder's: the Locker would never record its writer.
type heldHidesShares struct{ sharing }

func (s heldHidesShares) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	ok, _, f, err := s.held().TryAcquireHeld(ctx, key, token, ttl, fenced)
	return ok, false, f, err
}

// heldRecordsWriter is a HeldAcquirer that records a waiting writer where
// shares hold the key (TryAcquireWaiting), which a HeldAcquirer must not:
// the Locker could not know to clear it.
type heldRecordsWriter struct{ sharing }

func (s heldRecordsWriter) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	ok, shared, f, err := s.held().TryAcquireHeld(ctx, key, token, ttl, fenced)
	if shared {
		_, _, _ = s.TryAcquireWaiting(ctx, key, token, ttl, time.Minute, fenced)
	}
	return ok, shared, f, err
}

// heldResendBusy is a HeldAcquirer whose re-sent attempt (the key holds
// its token) reports false: a plain SET NX without GET.
type heldResendBusy struct{ sharing }

func (s heldResendBusy) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	if s.c.Get(ctx, key).Val() == token {
		return false, false, 0, nil
	}
	return s.held().TryAcquireHeld(ctx, key, token, ttl, fenced)
}

// inspectMutant is the Redis store, a Queuer, a Sharer and an Inspector,
// whose Inspect runs inspect.lua with old replaced by new (inspectBug):
// a broken Inspector over the real store's holds, shares and queue.
type inspectMutant struct {
	queue
	script string
}

// inspectBug returns the store on b whose inspect.lua has old replaced by
// new.
func inspectBug(b base, old, new string) core.Store {
	if strings.Count(redisscript.Inspect, old) != 1 {
		panic(fmt.Sprintf("broken store: %q is not once in inspect.lua", old))
	}
	return inspectMutant{queue: queue{b}, script: strings.Replace(redisscript.Inspect, old, new, 1)}
}

func (m inspectMutant) sharer() core.Sharer { return m.Store.(core.Sharer) }

func (m inspectMutant) TryAcquireShare(ctx context.Context, key, token string, ttl time.Duration, h core.Hold, fenced bool) (bool, int, int64, error) {
	return m.sharer().TryAcquireShare(ctx, key, token, ttl, h, fenced)
}

func (m inspectMutant) ReleaseShare(ctx context.Context, key, token string) (bool, error) {
	return m.sharer().ReleaseShare(ctx, key, token)
}

func (m inspectMutant) ExtendShare(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return m.sharer().ExtendShare(ctx, key, token, ttl, fenced)
}

func (m inspectMutant) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	return m.sharer().TryAcquireWaiting(ctx, key, token, ttl, patience, fenced)
}

func (m inspectMutant) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return m.Store.(core.Inspector).List(ctx, prefix, cursor, limit)
}

func (m inspectMutant) Inspect(ctx context.Context, key string) (core.KeyState, error) {
	r, err := m.c.Eval(ctx, m.script, redisscript.InspectKeys(key)).StringSlice()
	if err != nil {
		return core.KeyState{}, err
	}
	return redisscript.ParseInspect(key, r)
}

// brokenCase is a store that breaks property, described by store, and a
// piece of the failure the suite must report.
type brokenCase struct {
	property string
	store    string
	wrap     func(base) core.Store
	want     string
	// alone: the bug shows in timing only (a lock freed early), which a
	// starved process could miss; the case runs before the parallel ones,
	// with a TTL of 3 s (Options.TTLResolution of a second), so that the
	// window in which the bug shows is over a second long, and up to three
	// times until the suite fails it.
	alone bool
}

// brokenCases pairs each property with a store that breaks it and a piece of
// the failure the suite must report.
var brokenCases = []brokenCase{
	{
		property: "MutualExclusion", store: "TryAcquire without NX",
		wrap: func(b base) core.Store { return overwriting{b} },
		want: "critical sections overlapped",
	},
	{
		property: "TTLFreesUnreleasedLock", store: "no expiry",
		wrap: func(b base) core.Store { return noExpiry{b} },
		want: "its TTL is not honoured",
	},
	{
		property: "TTLFreesUnreleasedLock", store: "a quarter of the TTL",
		wrap:  func(b base) core.Store { return shortTTL{b} },
		want:  "before its TTL ran out",
		alone: true,
	},
	{
		property: "ReleaseByOtherTokenKeepsLock", store: "Release ignores the token",
		wrap: func(b base) core.Store { return releaseIgnoresToken{b} },
		want: "with a token that does not hold it freed the lock",
	},
	{
		property: "UndoByHolderFreesLock", store: "Undo removes nothing",
		wrap: func(b base) core.Store { return undoNothing{undoing{b}} },
		want: "by the token that holds it left the lock held",
	},
	{
		property: "UndoByOtherTokenKeepsLock", store: "Undo ignores the token",
		wrap: func(b base) core.Store { return undoIgnoresToken{undoing{b}} },
		want: "with a token that does not hold it freed the lock",
	},
	{
		property: "FreeAcquireIsTryAcquire", store: "TryAcquireFree without NX",
		wrap: func(b base) core.Store { return freeAcquireOverwrites{b} },
		want: "which another token holds, reported true",
	},
	{
		property: "FreeAcquireIsTryAcquire", store: "TryAcquireFree that takes nothing",
		wrap: func(b base) core.Store { return freeAcquireNeverTakes{b} },
		want: "reported false and left it free",
	},
	{
		property: "HeldAcquireIsTryAcquire", store: "TryAcquireHeld without NX",
		wrap: func(b base) core.Store { return heldOverwrites{sharing{b}} },
		want: "which another token holds exclusively, reported ok true",
	},
	{
		property: "HeldAcquireIsTryAcquire", store: "TryAcquireHeld counts a re-sent attempt as busy",
		wrap: func(b base) core.Store { return heldResendBusy{sharing{b}} },
		want: "sent again with the token that holds it reported false",
	},
	{
		property: "Holds/HeldAcquireReportsShares", store: "TryAcquireHeld hides shares",
		wrap: func(b base) core.Store { return heldHidesShares{sharing{b}} },
		want: "reported ok false, shared false",
	},
	{
		property: "Holds/HeldAcquireReportsShares", store: "TryAcquireHeld records a waiting writer",
		wrap: func(b base) core.Store { return heldRecordsWriter{sharing{b}} },
		want: "it must write nothing, no waiting writer's record",
	},
	{
		property: "UndoOfWaiterLeavesQueue", store: "Undo leaves a waiter its place",
		wrap: func(b base) core.Store { return undoKeepsPlace{queue{b}} },
		want: "granted it (to the waiter that had gone)",
	},
	{
		property: "SecondReleaseReportsFalse", store: "Release always reports true",
		wrap: func(b base) core.Store { return releaseAlwaysTrue{b} },
		want: "a second Release",
	},
	{
		property: "ExpiredHolderCannotReleaseOrExtend", store: "Release ignores the token",
		wrap: func(b base) core.Store { return releaseIgnoresToken{b} },
		want: "freed the new holder's lock",
	},
	{
		property: "ExpiredHolderCannotReleaseOrExtend", store: "Extend sets the key",
		wrap: func(b base) core.Store { return extendSets{b} },
		want: "whose lock had expired and was taken by another token reported true",
	},
	{
		property: "ExtendByOtherTokenKeepsTTL", store: "Extend ignores the token",
		wrap: func(b base) core.Store { return extendIgnoresToken{b} },
		want: "with a token that does not hold it reported true",
	},
	{
		property: "ExtendByHolderKeepsLock", store: "Extend keeps the old TTL",
		wrap: func(b base) core.Store { return extendKeepsTTL{b} },
		want: "extended by its holder",
	},
	{
		property: "FencesStrictlyIncrease", store: "fencing token always 1",
		wrap: func(b base) core.Store { return fixedFence{b} },
		want: "fencing tokens must strictly increase",
	},
	{
		property: "ResentAcquireSucceedsAndResetsTTL", store: "plain SET NX",
		wrap: func(b base) core.Store { return plainSetNX{b} },
		want: "would wait for itself",
	},
	{
		property: "ResentAcquireSucceedsAndResetsTTL", store: "a resent attempt keeps the old TTL",
		wrap: func(b base) core.Store { return resendKeepsTTL{b} },
		want: "did not reset the TTL",
	},
	{
		property: "KeysAreIndependent", store: "one key for all names",
		wrap: func(b base) core.Store { return oneKey{b} },
		want: "failed while only",
	},
	{
		property: "BusyIsErrTimeout", store: "a held key is an error",
		wrap: func(b base) core.Store { return busyIsError{b} },
		want: "want core.ErrTimeout alone",
	},
	{
		property: "CancelIsContextCanceled", store: "a held key is an error",
		wrap: func(b base) core.Store { return busyIsError{b} },
		want: "want context.Canceled alone",
	},
	{
		property: "DeadlineIsContextDeadlineExceeded", store: "a held key is an error",
		wrap: func(b base) core.Store { return busyIsError{b} },
		want: "want context.DeadlineExceeded alone",
	},
	{
		property: "StoreDownIsErrStorage", store: "errors swallowed",
		wrap: func(b base) core.Store { return errorsAsBusy{b} },
		want: "want core.ErrStorage alone",
	},
	{
		property: "NotifierWakesWatchers", store: "Announce does nothing",
		wrap: func(b base) core.Store { return mute{b} },
		want: "no notice on the Watch channel",
	},
	{
		property: "FairMutualExclusion", store: "Enqueue without NX",
		wrap: func(b base) core.Store { return enqueueOverwrites{queue{b}} },
		want: "critical sections overlapped",
	},
	{
		property: "FairGrantsInArrivalOrder", store: "grants to the tail of the queue",
		wrap: func(b base) core.Store {
			return mutant(b, `redis.call("ZRANGE", KEYS[3], 0, 0)[1]`, `redis.call("ZRANGE", KEYS[3], -1, -1)[1]`)
		},
		want: "want the order they queued in",
	},
	{
		property: "QueuerReleaseGrantsTheHead", store: "grants not published",
		wrap: func(b base) core.Store {
			return mutant(b, `redis.call("PUBLISH", channel, string.format("%s %d %d", token, fence, ttl))`, ``)
		},
		want: "no grant on the Grants channel",
	},
	{
		property: "QueuerReleaseGrantsTheHead", store: "Release frees the key without granting it",
		wrap: func(b base) core.Store { return releaseIgnoresQueue{queue{b}} },
		want: "no grant on the Grants channel",
	},
	{
		property: "QueuerReleaseGrantsTheHead", store: "grants to the tail of the queue",
		wrap: func(b base) core.Store {
			return mutant(b, `redis.call("ZRANGE", KEYS[3], 0, 0)[1]`, `redis.call("ZRANGE", KEYS[3], -1, -1)[1]`)
		},
		want: "did not grant it to the first",
	},
	{
		property: "QueuerGiveUpPassesTheGrantOn", store: "Dequeue frees a grant without passing it on",
		wrap: func(b base) core.Store {
			return mutant(b, `grant(now_ms(), ARGV[2], tonumber(ARGV[3]))`, `tidy()`)
		},
		want: "the grant was not passed on",
	},
	{
		property: "QueuerGiveUpPassesTheGrantOn", store: "Dequeue only leaves the line",
		wrap: func(b base) core.Store { return dequeueLeavesLine{queue{b}} },
		want: "the grant left with the waiter",
	},
	{
		property: "QueuerSkipsDeadWaiters", store: "dead waiters not dropped",
		wrap: func(b base) core.Store {
			return mutant(b, `if e and e.deadline > now then`, `if e then`)
		},
		want: "did not grant it to the live waiter",
	},
	{
		property: "QueuerGrantToDeadWaiterExpires", store: "grants for the full TTL",
		wrap: func(b base) core.Store {
			return mutant(b, `local ttl = math.min(e.ttl, e.patience)`, `local ttl = e.ttl`)
		},
		want: "not its TTL",
	},
	{
		property: "QueuerPollKeepsPlaces", store: "Poll renews nothing",
		wrap: func(b base) core.Store { return pollsNothing{queue{b}} },
		want: "Poll did not keep their places",
	},
	{
		property: "QueuerPollKeepsPlaces", store: "Poll renews every waiter in the queue",
		wrap: func(b base) core.Store { return pollsEveryone{queue{b}} },
		want: "Poll must renew only the waiters it lists",
	},
	{
		property: "QueuerPollReportsAGrant", store: "Poll reports the index before the holder's",
		wrap: func(b base) core.Store {
			return mutant(b, `r[1] = (i - 3) / 2`, `r[1] = (i - 5) / 2`)
		},
		want: "returned index 0: want 1",
	},
	{
		property: "QueuerPollReportsAGrant", store: "Poll reports a grant without its fence",
		wrap: func(b base) core.Store {
			return mutant(b, `local r = holding(holder, fenced, grace)`, `local r = holding(holder, false, grace)`)
		},
		want: "with fence 0",
	},
	{
		property: "QueuerPollReportsAGrant", store: "Poll reports the TTL asked for",
		wrap: func(b base) core.Store { return pollTTLAsked{queue{b}} },
		want: "at most the patience",
	},
	{
		property: "QueuerPollGrantsAFreeKey", store: "Poll never grants a free key",
		wrap: func(b base) core.Store {
			return mutant(b, `holder = grant(now, ARGV[3], grace)`, `holder = nil`)
		},
		want: "Poll must grant a free key to the first live waiter",
	},
	{
		property: "QueuerPollGrantsAFreeKey", store: "Poll grants a free key to the first waiter it lists",
		wrap: func(b base) core.Store {
			return mutant(b, `holder = grant(now, ARGV[3], grace)`,
				`redis.call("SET", KEYS[1], ARGV[5], "PX", ARGV[6]) redis.call("ZREM", KEYS[3], ARGV[5]) holder = ARGV[5]`)
		},
		want: "granted it to the second",
	},
	{
		property: "QueuerPollRequeuesALostWaiter", store: "Poll renews only the waiters still in line",
		wrap: func(b base) core.Store {
			return mutant(b, `renew(ARGV[i], tonumber(ARGV[i + 1]), patience, fenced, now)`,
				`if redis.call("ZSCORE", KEYS[3], ARGV[i]) then renew(ARGV[i], tonumber(ARGV[i + 1]), patience, fenced, now) end`)
		},
		want: "Poll did not queue it again",
	},
	{
		property: "QueuerPollRequeuesALostWaiter", store: "Poll takes a lost waiter back at the head",
		wrap: func(b base) core.Store { return pollRequeuesAtHead{queue{b}} },
		want: "before a waiter that queued after it",
	},
	{
		property: "Inspect/InspectLeavesOutExpiredAndDead", store: "Inspect reports the expired shares",
		wrap: func(b base) core.Store {
			return inspectBug(b, `redis.call("ZRANGEBYSCORE", KEYS[5], "(" .. nowtext, "+inf", "WITHSCORES")`,
				`redis.call("ZRANGEBYSCORE", KEYS[5], "-inf", "+inf", "WITHSCORES")`)
		},
		want: "a hold whose TTL ran out holds no more",
	},
	{
		property: "Inspect/InspectLeavesOutExpiredAndDead", store: "Inspect lists the dead waiters",
		wrap: func(b base) core.Store {
			return inspectBug(b, `if deadline and tonumber(deadline) > now then`, `if deadline then`)
		},
		want: "a waiter whose patience ran out waits no more",
	},
	{
		property: "Inspect/InspectShares", store: "Inspect reports the key's TTL for every share",
		wrap: func(b base) core.Store {
			return inspectBug(b, `shares[#shares + 1] = live[i + 1]`, `shares[#shares + 1] = tostring(now + redis.call("PTTL", KEYS[1]))`)
		},
		want: "not its own TTL left?",
	},
	{
		property: "Inspect/InspectFairQueue", store: "Inspect reports the patience asked for",
		wrap: func(b base) core.Store {
			return inspectBug(b, `waiters[#waiters + 1] = e`,
				`waiters[#waiters + 1] = string.gsub(e, "^%d+ (%d+) (%d) (%d+)$", function(ttl, f, p) return (now + tonumber(p)) .. " " .. ttl .. " " .. f .. " " .. p end)`)
		},
		want: "the patience asked for, or another's, not its own patience left?",
	},
}

// TestSuiteFailsBrokenStores runs each property on its broken stores. Most
// cases run in parallel, to keep the run short: their bugs are far beyond
// the bounds the suite allows, or not a matter of timing, so that the extra
// load does not hide them.
func TestSuiteFailsBrokenStores(t *testing.T) {
	for i, c := range brokenCases {
		t.Run(c.property+"/"+c.store, func(t *testing.T) {
			if !c.alone {
				t.Parallel()
			}
			proxy := redistest.NewProxy(t, shared.Addr())
			tag := t.Name()
			opts := proxied(proxy)
			tries := 1
			if c.alone {
				opts.TTLResolution, tries = time.Second, 3
			}
			var rep storetest.Report
			for try := 0; try < tries && !rep.Failed; try++ {
				rep = storetest.Check(t, c.property, func(t *testing.T) core.Store {
					cl := client(t, shared, proxy)
					return c.wrap(base{Store: core.NewRedisStore(cl), c: cl, tag: tag})
				}, opts)
			}
			for _, m := range rep.Messages {
				t.Log(m)
			}
			if !rep.Failed {
				t.Fatalf("case %d: the suite passed a store whose %s", i, c.store)
			}
			if !slices.ContainsFunc(rep.Messages, func(m string) bool { return strings.Contains(m, c.want) }) {
				t.Fatalf("case %d: the suite failed, but without a message containing %q", i, c.want)
			}
		})
	}
}

// TestEveryPropertyHasABrokenStore keeps the table above complete.
func TestEveryPropertyHasABrokenStore(t *testing.T) {
	for _, name := range storetest.PropertyNames() {
		if !slices.ContainsFunc(brokenCases, func(c brokenCase) bool { return c.property == name }) &&
			!slices.ContainsFunc(memCases, func(c memCase) bool { return c.property == name }) {
			t.Errorf("no broken store shows that property %s can fail", name)
		}
	}
}
