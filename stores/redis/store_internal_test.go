package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
)

// serverError stands for an error reply of Redis.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

func TestMayHaveApplied(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{fmt.Errorf("wrapped: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), false},
		{redis.ErrClosed, false},
		{redis.ErrPoolTimeout, false},
		{serverError("ERR value is not an integer or out of range script: acquire_fenced"), true},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{context.DeadlineExceeded, true},
		{errors.New("EOF"), true},
	} {
		if got := mayHaveApplied(tc.err); got != tc.want {
			t.Errorf("mayHaveApplied(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestIsSyntaxError(t *testing.T) {
	if !isSyntaxError(serverError("ERR syntax error")) {
		t.Error("ERR syntax error not recognised")
	}
	if isSyntaxError(errors.New("syntax error")) || isSyntaxError(serverError("WRONGTYPE")) {
		t.Error("a client error or another reply taken for a syntax error")
	}
}

// serverMicros returns the server's clock (TIME) in microseconds.
func serverMicros(t *testing.T, client *redis.Client) int64 {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// TestTryAcquireIsRetrySafe runs the backend on a real server, with SET ...
// NX GET, with the script used for servers before Redis 7.0 (and for the
// first attempt of an Acquire: free) and with the fenced script, and so
// TryAcquireHeld (native, and its script acquire_held.lua, legacy and
// fenced): the same token twice (a retried transmission) is ours, with
// the same fencing token, another token is not. Fences are drawn as the
// larger of the counter + 1 and the server's clock in microseconds.
func TestTryAcquireIsRetrySafe(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	for _, mode := range []string{"native", "legacy", "free", "fenced", "held", "held-legacy", "held-fenced"} {
		s := New(client)
		fenced := mode == "fenced" || mode == "held-fenced"
		s.noSetGet.Store(mode == "legacy" || mode == "held-legacy")
		try := s.TryAcquire
		switch mode {
		case "free":
			try = freeThenTry(s)
		case "held", "held-legacy", "held-fenced":
			try = heldAsTry(t, s)
		}
		key := "k:" + mode
		var first int64
		before := serverMicros(t, client)
		for i, tc := range []struct {
			token string
			want  bool
		}{{"t1", true}, {"t1", true}, {"t2", false}} {
			got, fence, err := try(ctx, key, tc.token, 30*time.Second, fenced)
			if err != nil || got != tc.want {
				t.Fatalf("%s step %d: tryAcquire(%s) = %v, %v; want %v", mode, i, tc.token, got, err, tc.want)
			}
			switch {
			case !fenced && fence != 0:
				t.Fatalf("%s: fence %d without fencing", mode, fence)
			case fenced && i == 0:
				first = fence
			case fenced && got && fence != first:
				t.Fatalf("a retried fenced acquire got fence %d, the first transmission %d", fence, first)
			}
		}
		// The first fence of a name is the server's clock: fences stay above
		// those drawn before a FLUSHALL or a restart that lost the counter.
		if after := serverMicros(t, client); fenced && (first < before || first > after) {
			t.Fatalf("the first fence of a name is %d, want the server's clock in µs, between %d and %d", first, before, after)
		}
		if d := client.PTTL(ctx, key).Val(); d <= 25*time.Second || d > 30*time.Second { // slack for slow replies
			t.Fatalf("%s: PTTL = %v, want just under 30s", mode, d)
		}
		if ok, err := s.Release(ctx, key, "t2"); ok || err != nil {
			t.Fatalf("%s: release with a foreign token = %v, %v", mode, ok, err)
		}
		if ok, err := s.Release(ctx, key, "t1"); !ok || err != nil {
			t.Fatalf("%s: release = %v, %v", mode, ok, err)
		}
		if ok, _, err := s.Extend(ctx, key, "t1", time.Second, fenced); ok || err != nil {
			t.Fatalf("%s: extend after release = %v, %v", mode, ok, err)
		}
		if mode == "fenced" {
			// Held for 30 s: the calls below find it held on a loaded
			// machine too.
			ok, second, err := s.TryAcquire(ctx, key, "t3", 30*time.Second, fenced)
			if !ok || err != nil || second <= first {
				t.Fatalf("the next holder got %v, fence %d, %v; want a fence above %d", ok, second, err, first)
			}
			ok, third, err := s.Extend(ctx, key, "t3", 30*time.Second, fenced)
			if !ok || err != nil || third <= second {
				t.Fatalf("a fenced extend got %v, fence %d, %v; want a fence above %d", ok, third, err, second)
			}
			if ok, fence, err := s.Extend(ctx, key, "t3", 30*time.Second, false); !ok || err != nil || fence != 0 {
				t.Fatalf("a plain extend got %v, fence %d, %v; want no new fence", ok, fence, err)
			}
			// A Redlock quorum's fence may come from a node whose clock is
			// ahead: the counter is raised above this server's clock.
			ahead := third + int64(time.Hour/time.Microsecond)
			counter := func() string { return client.Get(ctx, fenceKey(key)).Val() }
			if ok, err := s.RaiseFence(ctx, key, "t3", ahead); !ok || err != nil || counter() != fmt.Sprint(ahead) {
				t.Fatalf("raiseFence to %d: %v, %v, counter %s", ahead, ok, err, counter())
			}
			if ok, err := s.RaiseFence(ctx, key, "t3", third); !ok || err != nil || counter() != fmt.Sprint(ahead) {
				t.Fatalf("raiseFence to a lower %d lowered the counter: %v, %v", third, ok, err)
			}
			if ok, err := s.RaiseFence(ctx, key, "t2", ahead+10); ok || err != nil || counter() != fmt.Sprint(ahead) {
				t.Fatalf("raiseFence for a token that does not hold the lock: %v, %v", ok, err)
			}
			// The counter lives as long as the lock and a grace: a name's
			// counter does not outlive its use by more than a few seconds.
			// Both are read at one instant (MULTI), so that time passing
			// between the reads does not count.
			var lockTTL, counterTTL *redis.DurationCmd
			if _, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
				lockTTL, counterTTL = p.PTTL(ctx, key), p.PTTL(ctx, fenceKey(key))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if lock, c := lockTTL.Val(), counterTTL.Val(); c < lock+fenceGrace-time.Second || c > lock+fenceGrace {
				t.Fatalf("after a raise, the fence counter's PTTL is %v with the lock's at %v: want the lock's and %v", c, lock, fenceGrace)
			}
			if ok, err := s.Release(ctx, key, "t3"); !ok || err != nil {
				t.Fatalf("release: %v, %v", ok, err)
			}
			// A counter ahead of the clock: the next fence is the counter + 1.
			if ok, fence, err := s.TryAcquire(ctx, key, "t4", time.Second, fenced); !ok || err != nil || fence != ahead+1 {
				t.Fatalf("an acquire on a counter ahead of the clock got %v, fence %d, %v; want %d", ok, fence, err, ahead+1)
			}
		}
	}
}

// TestTryAcquireOfItsOwnKeyResetsTheTTL: an attempt that finds its own token
// (a transmission re-sent after a lost reply, or a key an earlier clean-up
// missed) counts the key as taken only with the new TTL: with the old one it
// would expire before the validity the lease is given. The old TTL (10 s)
// outlasts the attempt on a loaded machine, and the new one (60 s) is far
// above it.
func TestTryAcquireOfItsOwnKeyResetsTheTTL(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	for _, mode := range []string{"native", "legacy", "free", "fenced", "held", "held-legacy", "held-fenced"} {
		s := New(client)
		fenced := mode == "fenced" || mode == "held-fenced"
		s.noSetGet.Store(mode == "legacy" || mode == "held-legacy")
		try := s.TryAcquire
		switch mode {
		case "free":
			try = freeThenTry(s)
		case "held", "held-legacy", "held-fenced":
			try = heldAsTry(t, s)
		}
		key := "own:" + mode
		client.Set(ctx, key, "t1", 10*time.Second)
		ok, _, err := try(ctx, key, "t1", time.Minute, fenced)
		if !ok || err != nil {
			t.Fatalf("%s: tryAcquire of its own key = %v, %v", mode, ok, err)
		}
		if d := client.PTTL(ctx, key).Val(); d <= 30*time.Second {
			t.Fatalf("%s: PTTL = %v after an acquire with a TTL of 60s: the old TTL (10s) was kept", mode, d)
		}
	}
}

// heldAsTry returns s.TryAcquireHeld in TryAcquire's shape; it fails the
// test when an attempt reports shares, which these tests never take.
// freeThenTry is an Acquire's first attempts as the Locker makes them:
// TryAcquireFree (a native SET NX PX, which may answer false for a key its
// own token holds), then, if it found the key held, TryAcquireHeld with the
// same token (see lockstore.FreeAcquirer).
func freeThenTry(s *Store) func(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return func(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
		ok, fence, err := s.TryAcquireFree(ctx, key, token, ttl, fenced)
		if ok || err != nil {
			return ok, fence, err
		}
		ok, _, fence, err = s.TryAcquireHeld(ctx, key, token, ttl, fenced)
		return ok, fence, err
	}
}

func heldAsTry(t *testing.T, s *Store) func(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
	return func(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, int64, error) {
		ok, shared, fence, err := s.TryAcquireHeld(ctx, key, token, ttl, fenced)
		if shared {
			t.Errorf("TryAcquireHeld(%s, %s) reported shares on a name no share ever held", key, token)
		}
		return ok, fence, err
	}
}

// TestTryAcquireHeldReportsShares: on a name that shares hold,
// TryAcquireHeld (native, legacy and fenced) reports shared and writes
// nothing: the key keeps the shares' marker, no waiting writer's record is
// written (a new share still comes in), the shares are the same; on a name
// an exclusive holder holds, it reports neither ok nor shared. Then, once
// the shares are gone, it takes the name; and it does not clear another
// writer's record.
func TestTryAcquireHeldReportsShares(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	for _, mode := range []string{"native", "legacy", "fenced"} {
		s := New(client)
		fenced := mode == "fenced"
		s.noSetGet.Store(mode == "legacy")
		key := "held:" + mode
		if ok, _, _, err := s.TryAcquireShare(ctx, key, "r1", time.Minute, lockstore.Hold{}, fenced); !ok || err != nil {
			t.Fatalf("%s: TryAcquireShare(r1) = %v, %v", mode, ok, err)
		}
		marker := client.Get(ctx, key).Val()
		ok, shared, fence, err := s.TryAcquireHeld(ctx, key, "w1", time.Minute, fenced)
		if ok || !shared || fence != 0 || err != nil {
			t.Fatalf("%s: TryAcquireHeld on a shared name = %v, shared %v, fence %d, %v; want false, shared", mode, ok, shared, fence, err)
		}
		if v := client.Get(ctx, key).Val(); v != marker {
			t.Fatalf("%s: the lock key holds %q after TryAcquireHeld, want the shares' marker %q", mode, v, marker)
		}
		if n := client.Exists(ctx, redisscript.WriterKey(key)).Val(); n != 0 {
			t.Fatalf("%s: TryAcquireHeld on a shared name wrote a waiting writer's record", mode)
		}
		if ok, _, _, err := s.TryAcquireShare(ctx, key, "r2", time.Minute, lockstore.Hold{}, fenced); !ok || err != nil {
			t.Fatalf("%s: a share after TryAcquireHeld = %v, %v; want taken (no writer recorded)", mode, ok, err)
		}
		if got := client.ZRange(ctx, redisscript.SharesKey(key), 0, -1).Val(); len(got) != 2 {
			t.Fatalf("%s: shares %v, want r1 and r2", mode, got)
		}
		// A writer recorded by TryAcquireWaiting keeps its record through
		// another token's TryAcquireHeld, as through the shares' end.
		if ok, _, err := s.TryAcquireWaiting(ctx, key, "w0", time.Minute, time.Minute, fenced); ok || err != nil {
			t.Fatalf("%s: TryAcquireWaiting on a shared name = %v, %v", mode, ok, err)
		}
		for _, tok := range []string{"r1", "r2"} {
			if ok, err := s.ReleaseShare(ctx, key, tok); !ok || err != nil {
				t.Fatalf("%s: ReleaseShare(%s) = %v, %v", mode, tok, ok, err)
			}
		}
		ok, shared, fence, err = s.TryAcquireHeld(ctx, key, "w1", time.Minute, fenced)
		if !ok || shared || err != nil || (fenced != (fence > 0)) {
			t.Fatalf("%s: TryAcquireHeld once the shares left = %v, shared %v, fence %d, %v; want it taken", mode, ok, shared, fence, err)
		}
		if w := client.Get(ctx, redisscript.WriterKey(key)).Val(); w != "w0" {
			t.Fatalf("%s: the writer's record holds %q after another token's TryAcquireHeld, want w0's left to its patience", mode, w)
		}
		ok, shared, _, err = s.TryAcquireHeld(ctx, key, "w2", time.Minute, fenced)
		if ok || shared || err != nil {
			t.Fatalf("%s: TryAcquireHeld on a name held exclusively = %v, shared %v, %v; want false, not shared", mode, ok, shared, err)
		}
	}
}
