package adapter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

func TestClassify(t *testing.T) {
	for err, want := range map[error]Outcome{
		keyfunc.ErrMissing: BadRequest, keyfunc.ErrUnreadable: BadRequest, core.ErrTimeout: Busy,
		core.ErrStorage: Unavailable, context.Canceled: Canceled, context.DeadlineExceeded: DeadlineOver,
		keyfunc.ErrUnsupported: Internal, core.ErrInvalidOption: Internal,
	} {
		if got := Classify(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 30 * time.Second: 30} {
		if got := (&Config{RetryAfter: d}).RetryAfterSeconds(); got != want {
			t.Errorf("%v: %d, want %d", d, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	c := &Config{TTL: -1, Wait: -1, RetryAfter: -1}
	err := c.Check("x", nil, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Locker is nil", "key Func is nil", "WithTTL", "WithWait", "WithRetryAfter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// A Redis that accepts connections and never replies is unavailable, not
// busy, even when the per-route wait is shorter than the I/O timeout: the
// wait bounds waiting for another holder, not a Redis call in flight.
func TestStalledRedisIsUnavailableNotBusy(t *testing.T) {
	adaptertest.LeakCheck(t)
	l := adaptertest.Stalled(t, core.WithIOTimeout(200*time.Millisecond))
	c := &Config{Wait: 20 * time.Millisecond, WaitSet: true}
	_, err := c.Acquire(context.Background(), l, "order:1", "/orders/:id", 0)
	if !errors.Is(err, core.ErrStorage) || Classify(err) != Unavailable {
		t.Fatalf("got %v (outcome %v), want a storage error", err, Classify(err))
	}
}

// acquireWhileHeld holds name with another Locker, starts c.Acquire of name
// with ctx on e's Locker, releases the hold once that Acquire has made three
// attempts (more than a budget of 1 ms allows), and returns its result.
func acquireWhileHeld(t *testing.T, e *adaptertest.Env, ctx context.Context, c *Config, name string) (*core.Lease, error) {
	t.Helper()
	holder := adaptertest.NewEnv(t, nil).Hold(t, name)
	type result struct {
		lease *core.Lease
		err   error
	}
	done := make(chan result, 1)
	e.RT.N.Store(0)
	go func() {
		lease, err := c.Acquire(ctx, e.Locker, name, "/orders/:id", 0)
		done <- result{lease, err}
	}()
	deadline := time.After(10 * time.Second)
	for e.RT.N.Load() < 3 {
		select {
		case r := <-done: // gave up before its third attempt
			return r.lease, r.err
		case <-deadline:
			t.Fatal("no third attempt within 10 s")
		case <-time.After(time.Millisecond):
		}
	}
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.lease != nil {
		t.Cleanup(func() { _ = r.lease.Release(context.Background()) })
	}
	return r.lease, r.err
}

// A per-route wait longer than the Locker's is honoured: the request waits
// past the Locker's budget and gets the name once it is released.
func TestRouteWaitMayExceedLockers(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Millisecond), core.WithSpin(time.Millisecond, time.Millisecond))
	c := &Config{Wait: 10 * time.Second, WaitSet: true}
	if _, err := acquireWhileHeld(t, e, context.Background(), c, adaptertest.Uniq(t)); err != nil {
		t.Fatalf("with a per-route wait of 10 s: %v", err)
	}
	// The control: without it, the Locker's budget of 1 ms gives up.
	if _, err := acquireWhileHeld(t, e, context.Background(), &Config{}, adaptertest.Uniq(t)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("with the Locker's wait of 1 ms: %v, want ErrTimeout", err)
	}
}

// A wait set on the request's context by an earlier middleware
// (core.ContextWithWait) overrides the per-route one.
func TestContextWaitOverridesRouteWait(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithSpin(time.Millisecond, time.Millisecond))
	ctx := core.ContextWithWait(context.Background(), 10*time.Second)
	if _, err := acquireWhileHeld(t, e, ctx, &Config{Wait: time.Millisecond, WaitSet: true}, adaptertest.Uniq(t)); err != nil {
		t.Fatalf("context wait 10 s, route wait 1 ms: %v", err)
	}
}

// TTL precedence: the adapter's TTL function, then core.ContextWithTTL on the
// request, then the per-route TTL, then the Locker's.
func TestTTLPrecedence(t *testing.T) {
	e := adaptertest.NewEnv(t, nil, core.WithTTL(10*time.Second))
	withTTL := core.ContextWithTTL(context.Background(), time.Hour)
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		route    time.Duration
		fn       time.Duration
		min, max time.Duration
	}{
		{"Locker's", context.Background(), 0, 0, 9 * time.Second, 10 * time.Second},
		{"per-route", context.Background(), time.Minute, 0, 59 * time.Second, time.Minute},
		{"context over per-route", withTTL, time.Minute, 0, 59 * time.Minute, time.Hour},
		{"function over context", withTTL, time.Minute, 2 * time.Hour, 119 * time.Minute, 2 * time.Hour},
	} {
		lease, err := (&Config{TTL: tc.route}).Acquire(tc.ctx, e.Locker, adaptertest.Uniq(t), "/r", tc.fn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pttl := e.Client.PTTL(context.Background(), lease.Key()).Val()
		_ = lease.Release(context.Background())
		if pttl < tc.min || pttl > tc.max {
			t.Errorf("%s: PTTL %v, want in [%v, %v]", tc.name, pttl, tc.min, tc.max)
		}
	}
}

// pastDeadline has a deadline that has passed but does not end by itself, as
// a gRPC server's call context before the server cancels it at the deadline.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A context cancelled after its deadline passed is the deadline's doing:
// DeadlineExceeded, not Canceled; without a deadline it stays Canceled.
func TestCancelledAtDeadlineIsDeadline(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	for _, tc := range []struct {
		parent context.Context
		want   Outcome
	}{{pastDeadline{context.Background()}, DeadlineOver}, {context.Background(), Canceled}} {
		ctx, cancel := context.WithCancel(tc.parent)
		cancel()
		_, err := (&Config{}).Acquire(ctx, e.Locker, adaptertest.Uniq(t), "/r", 0)
		if Classify(err) != tc.want {
			t.Errorf("parent %T: %v (outcome %v), want outcome %v", tc.parent, err, Classify(err), tc.want)
		}
	}
}

// A per-route wait of 0 is one attempt, not "unset": a held name is busy at
// once, although the Locker would wait.
func TestRouteWaitZeroIsOneAttempt(t *testing.T) {
	e := adaptertest.NewEnv(t, nil, core.WithWait(time.Minute))
	name := adaptertest.Uniq(t)
	adaptertest.NewEnv(t, nil).Hold(t, name)
	_, err := (&Config{WaitSet: true}).Acquire(context.Background(), e.Locker, name, "/r", 0)
	if !errors.Is(err, core.ErrTimeout) || e.RT.N.Load() != 1 {
		t.Fatalf("%v after %d attempts, want ErrTimeout after 1", err, e.RT.N.Load())
	}
}
