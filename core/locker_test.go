package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// hammer runs lockers × goroutines × rounds acquires of name, each holding the
// lock across a critical section of two Redis round trips, and reports what
// the overlap detector saw.
func hammer(t *testing.T, envs []*env, name string, goroutines, rounds int, hold time.Duration) (ok, failed int64, o *redistest.Overlap) {
	t.Helper()
	o = &redistest.Overlap{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range envs {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for r := 0; r < rounds; r++ {
					lease, err := e.locker.Acquire(ctx, name)
					if err != nil {
						if !errors.Is(err, core.ErrTimeout) {
							t.Errorf("acquire: %v", err)
						}
						mu.Lock()
						failed++
						mu.Unlock()
						continue
					}
					exit := o.Enter()
					e.client.Incr(ctx, "cs:"+name)
					e.client.Get(ctx, "cs:"+name)
					time.Sleep(hold)
					exit()
					if err := lease.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return ok, failed, o
}

func TestMutualExclusionAcrossLockers(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	// A waiter can only wait while the others run their sections, all of
	// which take seconds at most: a minute's budget is never spent.
	opts := []core.Option{core.WithWait(time.Minute), core.WithSpin(time.Millisecond, 2*time.Millisecond)}
	envs := []*env{newEnv(t, nil, opts...), newEnv(t, nil, opts...), newEnv(t, nil, opts...)}
	ok, failed, o := hammer(t, envs, "order:"+name, 4, 25, 0)
	if o.Overlaps() != 0 {
		t.Fatalf("%d of %d critical sections overlapped", o.Overlaps(), o.Entries())
	}
	if ok != 300 || failed != 0 {
		t.Fatalf("acquired %d, failed %d; want all 300 to succeed within the wait budget", ok, failed)
	}
}

// TestOverlapDetectorCatchesBrokenLock shows that the detector used above does
// fail when exclusion is broken: lockers with different prefixes lock
// different keys for the same name.
func TestOverlapDetectorCatchesBrokenLock(t *testing.T) {
	name := uniq(t)
	var envs []*env
	for i := 0; i < 3; i++ {
		envs = append(envs, newEnv(t, nil, core.WithPrefix(fmt.Sprintf("broken%d:", i)),
			core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond)))
	}
	_, _, o := hammer(t, envs, "order:"+name, 4, 25, time.Millisecond)
	if o.Overlaps() == 0 {
		t.Fatalf("three independent locks ran %d critical sections without a single overlap: the detector is blind", o.Entries())
	}
}

func TestDifferentNamesDoNotBlock(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil, core.WithWait(0))
	ctx := context.Background()
	a, err := e.locker.Acquire(ctx, name+":a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := e.locker.Acquire(ctx, name+":b")
	if err != nil {
		t.Fatalf("a second name was blocked by the first: %v", err)
	}
	defer b.Release(ctx)
}

func pttl(t *testing.T, e *env, key string) time.Duration {
	t.Helper()
	d, err := e.client.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTTLAndPerRequestTTL(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil, core.WithTTL(5*time.Second))
	ctx := context.Background()

	check := func(ctx context.Context, want time.Duration) {
		t.Helper()
		lease, err := e.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		// Slack for a slow reply; the TTLs checked are 25 s apart.
		if got := pttl(t, e, lease.Key()); got > want || got < want-3*time.Second {
			t.Fatalf("PTTL = %v, want just under %v", got, want)
		}
		if lease.TTL() != want {
			t.Fatalf("Lease.TTL() = %v, want %v", lease.TTL(), want)
		}
	}
	check(ctx, 5*time.Second)
	check(core.ContextWithTTL(ctx, 30*time.Second), 30*time.Second)
	check(ctx, 5*time.Second)                                                  // the override did not stick
	check(core.ContextWithTTL(ctx, 1500*time.Microsecond), 2*time.Millisecond) // rounded up to whole ms
}

func TestInvalidPerRequestTTL(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil)
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		_, err := e.locker.Acquire(core.ContextWithTTL(context.Background(), ttl), name)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), "ContextWithTTL") {
			t.Errorf("ttl %v: err = %v, want ErrInvalidOption naming ContextWithTTL", ttl, err)
		}
	}
	if n := e.rt.N.Load(); n != 0 {
		t.Fatalf("bad input sent %d commands to Redis", n)
	}
}

func TestTimeoutWhileHeld(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	holder := newEnv(t, nil)
	// A budget of 2 s with 10-20 ms sleeps: some hundred attempts, and at
	// least three unless two round trips take the whole budget.
	const budget = 2 * time.Second
	waiter := newEnv(t, nil, core.WithWait(budget), core.WithSpin(10*time.Millisecond, 10*time.Millisecond))
	ctx := context.Background()
	hold(t, holder, name)

	start := time.Now()
	_, err := waiter.locker.Acquire(ctx, name)
	waited := time.Since(start)
	if !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrStorage) {
		t.Fatalf("timeout also reads as another kind: %v", err)
	}
	if waited < budget {
		t.Fatalf("gave up after %v, before the %v budget", waited, budget)
	}
	if n := waiter.rt.N.Load(); n < 3 {
		t.Fatalf("only %d attempts in a %v budget with 10-20ms sleeps", n, budget)
	}
}

func TestWaitZeroIsOneAttempt(t *testing.T) {
	name := uniq(t)
	holder := newEnv(t, nil)
	waiter := newEnv(t, nil, core.WithWait(0))
	ctx := context.Background()
	hold(t, holder, name)
	waiter.rt.N.Store(0)
	if _, err := waiter.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if n := waiter.rt.N.Load(); n != 1 {
		t.Fatalf("try-lock made %d round trips, want 1", n)
	}
}

func TestSleepIsTrimmedToBudget(t *testing.T) {
	name := uniq(t)
	holder := newEnv(t, nil)
	waiter := newEnv(t, nil, core.WithWait(50*time.Millisecond), core.WithSpin(time.Minute, 0))
	ctx := context.Background()
	hold(t, holder, name)
	start := time.Now()
	if _, err := waiter.locker.Acquire(ctx, name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("a one-minute sleep was not trimmed to the 50ms budget (returned after %v)", d)
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	holder := newEnv(t, nil)
	waiter := newEnv(t, nil, core.WithWait(time.Minute), core.WithSpin(time.Minute, 0))
	hold(t, holder, name)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := waiter.locker.Acquire(ctx, name)
	if !errors.Is(err, context.Canceled) || errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want context.Canceled only", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("cancel did not wake the sleeping waiter (returned after %v)", d)
	}
}

func TestContextDeadlineCutsBudget(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	holder := newEnv(t, nil)
	var budgetEnd time.Time
	waiter := newEnv(t, nil, core.WithWait(time.Minute), core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			budgetEnd = req.Deadline
			_, err := next(ctx, req)
			return err
		},
	}))
	hold(t, holder, name)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := waiter.locker.Acquire(ctx, name)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want context.DeadlineExceeded only", err)
	}
	if dl, _ := ctx.Deadline(); !budgetEnd.Equal(dl) {
		t.Fatalf("the wait budget ends at %v, not at the context's deadline %v", budgetEnd, dl)
	}
}

func TestCancelledContextSendsNothing(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.locker.Acquire(ctx, name); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := e.rt.N.Load(); n != 0 {
		t.Fatalf("sent %d commands for a cancelled request", n)
	}
}

func TestRedisDownIsStorageErrorAndRecovers(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	srv := redistest.Start(t)
	e := newEnv(t, srv, core.WithWait(time.Minute))
	// A client that neither retries commands nor dials: the refused
	// connection itself must reach the caller.
	opts := srv.Options()
	opts.MaxRetries, opts.DialerRetries = -1, 1
	bare := redis.NewClient(opts)
	defer bare.Close()
	bareLocker := core.New(bare, core.WithWait(time.Minute))
	ctx := context.Background()
	srv.Stop()

	for _, l := range []*core.Locker{e.locker, bareLocker} {
		start := time.Now()
		_, err := l.Acquire(ctx, name)
		if !errors.Is(err, core.ErrStorage) {
			t.Fatalf("err = %v, want ErrStorage", err)
		}
		if errors.Is(err, core.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("storage error reads as a timeout: %v", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("a refused connection took %v to report instead of failing fast", d)
		}
	}
	_, err := bareLocker.Acquire(ctx, name)
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("the client's error is not reachable with errors.As: %v", err)
	}

	srv.Restart(t)
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("the Locker did not recover after Redis came back: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestIOTimeoutIsStorageError(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	srv := redistest.Start(t)
	// The pause (3 s) outlasts the I/O timeout (500 ms) by far, also when
	// the Acquire starts late on a loaded machine; the attempt whose reply
	// is lost sets the lock for 30 s when the pause ends, which the
	// clean-ups must undo well before.
	e := newEnv(t, srv, core.WithIOTimeout(500*time.Millisecond), core.WithWait(time.Minute), core.WithTTL(30*time.Second))
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 3000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := e.locker.Acquire(ctx, name)
	if !errors.Is(err, core.ErrStorage) || !strings.Contains(err.Error(), "I/O timeout") {
		t.Fatalf("err = %v, want ErrStorage for the I/O timeout", err)
	}
	if errors.Is(err, core.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an I/O timeout reads as a lock timeout or a caller deadline: %v", err)
	}
	// Once Redis answers again, the attempt whose reply was lost has not left
	// the name locked for a whole TTL.
	key, _ := e.locker.Key(name)
	deadline := time.Now().Add(15 * time.Second)
	for admin.Exists(ctx, key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out attempt left %s held (PTTL %v)", key, admin.PTTL(ctx, key).Val())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReleaseAfterExpiryLeavesNewHolder(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	a := newEnv(t, nil)
	b := newEnv(t, nil, core.WithWait(5*time.Second), core.WithSpin(5*time.Millisecond, 5*time.Millisecond))
	ctx := context.Background()
	old, err := a.locker.Acquire(core.ContextWithTTL(ctx, 50*time.Millisecond), name)
	if err != nil {
		t.Fatal(err)
	}
	// b gets the name once a's lock expires.
	cur, err := b.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Release(ctx)
	if cur.Token() == old.Token() {
		t.Fatal("two leases share a token")
	}
	if err := old.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("late release: err = %v, want ErrNotHeld", err)
	}
	if got := a.client.Get(ctx, cur.Key()).Val(); got != cur.Token() {
		t.Fatalf("the late release touched the new holder's key: value %q, want %q", got, cur.Token())
	}
	if err := old.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("late extend: err = %v, want ErrNotHeld", err)
	}
}

func TestReleaseDoesNotDeleteForeignValue(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	e.client.Set(ctx, lease.Key(), "someone-else", time.Minute) // the key expired and was retaken
	if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld", err)
	}
	if got := e.client.Get(ctx, lease.Key()).Val(); got != "someone-else" {
		t.Fatalf("release deleted another holder's key (now %q)", got)
	}
}

func TestReleaseIsIdempotentAndWorksCancelled(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the request went away before the handler finished
	before := e.rt.N.Load()
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release on a cancelled context: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if n := e.rt.N.Load() - before; n != 1 {
		t.Fatalf("two releases made %d round trips, want 1", n)
	}
	if n := e.client.Exists(context.Background(), lease.Key()).Val(); n != 0 {
		t.Fatal("the key survived the release")
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done is open after Release")
	}
	// Done taken before the release closes on the release.
	second, err := e.locker.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	done := second.Done()
	_ = second.Release(context.Background())
	select {
	case <-done:
	default:
		t.Fatal("Done is open after Release")
	}
	var nilLease *core.Lease
	if err := nilLease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("nil lease: err = %v, want ErrNotHeld", err)
	}
}

func TestExtend(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil, core.WithTTL(5*time.Second)) // the Extend comes before the TTL ends on a loaded machine too
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	done := lease.Done()
	if err := lease.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := pttl(t, e, lease.Key()); got < 15*time.Second { // 20 s less a slow reply, not the 5 s TTL
		t.Fatalf("PTTL after Extend(20s) = %v", got)
	}
	if err := lease.Extend(ctx, 0); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Extend(0): err = %v, want ErrInvalidOption", err)
	}
	e.client.Del(ctx, lease.Key()) // lost, as after an expiry
	if err := lease.Extend(ctx, 20*time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("extend of a lost lease: err = %v, want ErrNotHeld", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done stayed open after Extend found the lease lost")
	}
	if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("release of a lost lease: err = %v, want ErrNotHeld", err)
	}
}

func TestDoneClosesWhenTTLRunsOut(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	lease, err := e.locker.Acquire(core.ContextWithTTL(ctx, 100*time.Millisecond), name)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done stayed open long after the TTL ran out")
	}
	if time.Now().Before(lease.ValidUntil()) {
		t.Fatal("Done closed before ValidUntil")
	}
}

func TestKeys(t *testing.T) {
	l := core.New(shared.Client(t), core.WithPrefix("svc:"))
	long := strings.Repeat("x", core.MaxNameLen+1)
	for _, tc := range []struct{ name, want string }{
		{"order:42", "svc:{order:42}"},
		{strings.Repeat("y", core.MaxNameLen), "svc:{" + strings.Repeat("y", core.MaxNameLen) + "}"},
		{long, "svc:{sha256:"},
		{"a{b}", "svc:{sha256:"},
		{"sha256:abc", "svc:{sha256:"},
	} {
		got, err := l.Key(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("Key(%.20q) = %q, want prefix %q", tc.name, got, tc.want)
		}
		if len(got) > len("svc:{}")+core.MaxNameLen {
			t.Errorf("Key(%.20q) is %d bytes long", tc.name, len(got))
		}
	}
	k1, _ := l.Key(long)
	k2, _ := l.Key(long[:len(long)-1] + "z")
	if k1 == k2 {
		t.Error("two long names that differ in their last byte share a key")
	}
	if _, err := l.Key(""); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("Key(\"\"): err = %v, want ErrInvalidName", err)
	}
}

func TestEmptyNameSendsNothing(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.locker.Acquire(context.Background(), ""); !errors.Is(err, core.ErrInvalidName) {
		t.Fatalf("err = %v, want ErrInvalidName", err)
	}
	if n := e.rt.N.Load(); n != 0 {
		t.Fatalf("sent %d commands for an empty name", n)
	}
}

func TestOptionValidation(t *testing.T) {
	name := uniq(t)
	c := shared.Client(t)
	for _, tc := range []struct {
		opt  core.Option
		want string // in the message
	}{
		{core.WithTTL(0), "WithTTL"},
		{core.WithTTL(time.Microsecond), "WithTTL"},
		{core.WithWait(-time.Second), "WithWait"},
		{core.WithSpin(-time.Millisecond, time.Millisecond), "WithSpin"},
		{core.WithSpin(time.Millisecond, -time.Millisecond), "WithSpin"},
		{core.WithSpin(0, 0), "WithSpin"},
		{core.WithIOTimeout(0), "WithIOTimeout"},
		{core.WithPrefix("a{b"), "WithPrefix"},
		{core.WithHandlers(nil), "WithHandlers"},
		{core.WithWatchdogInterval(0), "WithWatchdogInterval"},
		{core.WithNotifyLinger(-time.Second), "WithNotifyLinger"},
		{nil, "option 0 is nil"},
	} {
		l := core.New(c, tc.opt)
		err := l.Err()
		if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Err() = %v, want ErrInvalidOption mentioning it", tc.want, err)
			continue
		}
		if _, aerr := l.Acquire(context.Background(), name); !errors.Is(aerr, core.ErrInvalidOption) {
			t.Errorf("%s: Acquire err = %v, want the configuration error", tc.want, aerr)
		}
	}
	// Every problem is reported at once.
	err := core.New(nil, core.WithTTL(0), core.WithWait(-1)).Err()
	for _, want := range []string{"client is nil", "WithTTL", "WithWait"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %v, want it to mention %q", err, want)
		}
	}
	// Edge values that are valid.
	for _, opt := range []core.Option{
		core.WithSpin(5*time.Millisecond, 0), core.WithSpin(0, time.Millisecond),
		core.WithWait(0), core.WithPrefix(""), core.WithTTL(time.Millisecond),
	} {
		if err := core.New(c, opt).Err(); err != nil {
			t.Errorf("valid option rejected: %v", err)
		}
	}
}

type logHandler struct {
	tag   string
	log   *[]string
	mu    *sync.Mutex
	state *sync.Map // per lease, from acquire to release
}

func (h logHandler) add(s string) {
	h.mu.Lock()
	*h.log = append(*h.log, s)
	h.mu.Unlock()
}

func (h logHandler) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	h.add(h.tag + ">acquire")
	lease, err := next(ctx, req)
	h.add(fmt.Sprintf("%s<acquire attempts=%d", h.tag, req.Attempts))
	if lease != nil {
		h.state.Store(lease, "state of "+h.tag)
	}
	return err
}

func (h logHandler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	state, _ := h.state.LoadAndDelete(lease)
	h.add(fmt.Sprintf("%s>release %v", h.tag, state))
	err := next(ctx, lease)
	h.add(h.tag + "<release")
	return err
}

func TestHandlerChainOrder(t *testing.T) {
	name := uniq(t)
	var log []string
	mu := &sync.Mutex{}
	e := newEnv(t, nil, core.WithHandlers(logHandler{"outer", &log, mu, &sync.Map{}}), core.WithHandlers(logHandler{"inner", &log, mu, &sync.Map{}}))
	ctx := context.Background()
	lease, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"outer>acquire", "inner>acquire", "inner<acquire attempts=1", "outer<acquire attempts=1",
		"outer>release state of outer", "inner>release state of inner", "inner<release", "outer<release",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Fatalf("chain ran\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

func TestHandlerMayRefuse(t *testing.T) {
	name := uniq(t)
	refused := errors.New("refused by policy")
	e := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			return refused
		},
	}))
	if _, err := e.locker.Acquire(context.Background(), name); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the handler's error", err)
	}
	if n := e.rt.N.Load(); n != 0 {
		t.Fatalf("a refusing handler still let %d commands through", n)
	}
}

func TestRoundTripsPerAcquireRelease(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	cycle := func() {
		lease, err := e.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // loads the scripts into the server if needed
	e.rt.N.Store(0)
	for i := 0; i < 10; i++ {
		cycle()
	}
	if n := e.rt.N.Load(); n != 20 {
		t.Fatalf("10 uncontended acquire+release cycles made %d round trips, want 20", n)
	}
}

func TestTokensAreUnique(t *testing.T) {
	name := uniq(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		lease, err := e.locker.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(lease.Token()) < 26 || seen[lease.Token()] {
			t.Fatalf("token %q is short or repeated", lease.Token())
		}
		seen[lease.Token()] = true
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBadClientAndTTLBounds(t *testing.T) {
	var typedNil *redis.Client
	if err := core.New(typedNil).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("typed nil client: Err() = %v, want ErrInvalidOption", err)
	}
	if err := core.New(shared.Client(t), core.WithTTL(1<<63-1)).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("huge TTL: Err() = %v, want ErrInvalidOption", err)
	}
	e := newEnv(t, nil)
	_, err := e.locker.Acquire(core.ContextWithTTL(context.Background(), core.MaxTTL+time.Hour), uniq(t))
	if !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("huge per-request TTL: err = %v, want ErrInvalidOption", err)
	}
}

func TestHandlerContractViolations(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	both := errors.New("lease and error")
	e := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
			_, _ = next(ctx, req)
			return both
		},
	}))
	ctx := context.Background()
	if lease, err := e.locker.Acquire(ctx, name); lease != nil || !errors.Is(err, both) {
		t.Fatalf("got %v, %v; want no lease and the handler's error", lease, err)
	}
	key, _ := e.locker.Key(name)
	if e.client.Exists(ctx, key).Val() != 0 {
		t.Fatal("the lease a handler returned with an error was left held")
	}

	panicky := newEnv(t, nil, core.WithHandlers(core.HandlerFuncs{
		OnRelease: func(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
			panic("boom")
		},
	}))
	lease, err := panicky.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = lease.Release(ctx)
	}()
	if err := lease.Release(ctx); err == nil {
		t.Fatal("a release whose handler panicked reports success")
	}
	e.client.Del(ctx, key)
}

func TestHandlerSetTTL(t *testing.T) {
	name := uniq(t)
	setTTL := func(ttl time.Duration) core.Option {
		return core.WithHandlers(core.HandlerFuncs{
			OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
				req.TTL = ttl
				_, err := next(ctx, req)
				return err
			},
		})
	}
	e := newEnv(t, nil, setTTL(42*time.Second))
	lease := hold(t, e, name)
	if got := pttl(t, e, lease.Key()); got > 42*time.Second || got < 39*time.Second {
		t.Fatalf("PTTL = %v, want the handler's 42s", got)
	}
	bad := newEnv(t, nil, setTTL(0))
	if _, err := bad.locker.Acquire(context.Background(), uniq(t)); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("a handler's zero TTL: err = %v, want ErrInvalidOption", err)
	}
	if n := bad.rt.N.Load(); n != 0 {
		t.Fatalf("a zero TTL sent %d commands", n)
	}
}
