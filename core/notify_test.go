package core_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// notifyOpts make a waiter whose sleep is a minute: only a notification
// wakes it before its context's deadline.
var notifyOpts = []core.Option{core.WithWait(time.Minute), core.WithSpin(time.Minute, 0)}

func TestNotifyWakesWaiterOnRelease(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	holder := newEnv(t, srv, core.WithNotify())
	var attempts atomic.Int64
	count := core.WithHandlers(core.HandlerFuncs{OnAcquire: func(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
		_, err := next(ctx, req)
		attempts.Store(int64(req.Attempts))
		return err
	}})
	waiter := newEnv(t, srv, append(notifyOpts, core.WithNotify(), count)...)
	t.Cleanup(func() { _ = holder.locker.Close(); _ = waiter.locker.Close() })
	checkWake(t, holder.locker, waiter.locker, srv)
	if n := attempts.Load(); n != 2 {
		t.Fatalf("the woken waiter made %d attempts, want 2 (one before the release, one after)", n)
	}
}

// TestNotifyControlWithoutNotify is the control of the test above: without
// WithNotify the same waiter sleeps past its context's deadline.
func TestNotifyControlWithoutNotify(t *testing.T) {
	leakCheck(t)
	name := uniq(t)
	holder := newEnv(t, nil)
	waiter := newEnv(t, nil, notifyOpts...)
	// The release comes once the waiter's first attempt has its answer, not
	// at a fixed time that a loaded machine could let pass before it.
	attempted := &afterFirstReply{done: make(chan struct{})}
	waiter.client.AddHook(attempted)
	ctx := context.Background()
	held, err := holder.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-attempted.done
		_ = held.Release(ctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := waiter.locker.Acquire(wctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline: without notifications the waiter sleeps on", err)
	}
}

// afterFirstReply is a go-redis hook that closes done once a command has
// its reply (a NOSCRIPT error, to which go-redis sends the script, does not
// count).
type afterFirstReply struct {
	once sync.Once
	done chan struct{}
}

func (h *afterFirstReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterFirstReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			h.once.Do(func() { close(h.done) })
		}
		return err
	}
}

func (h *afterFirstReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.once.Do(func() { close(h.done) })
		return err
	}
}

func TestNotifySharesOneSubscription(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	holder := newEnv(t, srv, core.WithNotify())
	const linger = 2 * time.Second
	waiters := newEnv(t, srv, core.WithNotify(), core.WithNotifyLinger(linger), core.WithWait(time.Minute), core.WithSpin(time.Minute, 0))
	admin := srv.Client(t)
	ctx := context.Background()
	const names, perName = 5, 4
	var held []*core.Lease
	for i := 0; i < names; i++ {
		lease, err := holder.locker.Acquire(ctx, fmt.Sprintf("%s:%d", uniq(t), i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	var wg sync.WaitGroup
	errs := make(chan error, names*perName)
	for _, h := range held {
		for j := 0; j < perName; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				lease, err := waiters.locker.Acquire(wctx, h.Name())
				if err == nil {
					err = lease.Release(ctx)
				}
				errs <- err
			}()
		}
	}
	for _, h := range held {
		waitSubscribed(t, h.Key()+":released", srv)
	}
	for _, h := range held {
		if n := admin.PubSubNumSub(ctx, h.Key()+":released").Val()[h.Key()+":released"]; n != 1 {
			t.Fatalf("%d subscriptions to a name with %d waiters, want 1", n, perName)
		}
	}
	if n := pubsubClients(t, srv); n != 1 {
		t.Fatalf("%d pub/sub connections for %d waiters in one Locker, want 1", n, names*perName)
	}
	// No waiter can leave before its name is released: the linger counts
	// from after this.
	left := time.Now()
	for _, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiter: %v", err)
		}
	}
	// A name stays subscribed for the linger after its last waiter left,
	// then is unsubscribed.
	for _, h := range held {
		n := admin.PubSubNumSub(ctx, h.Key()+":released").Val()[h.Key()+":released"]
		if n != 1 && time.Since(left) < linger/2 {
			t.Fatalf("a channel was unsubscribed %v after its last waiter left, within the linger of %v", time.Since(left), linger)
		}
	}
	deadline := time.Now().Add(linger + 5*time.Second)
	for _, h := range held {
		for admin.PubSubNumSub(ctx, h.Key()+":released").Val()[h.Key()+":released"] != 0 {
			if time.Now().After(deadline) {
				t.Fatal("a channel stayed subscribed after its last waiter left")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := waiters.locker.Close(); err != nil {
		t.Fatal(err)
	}
	_ = waiters.locker.Close() // idempotent
	deadline = time.Now().Add(5 * time.Second)
	for pubsubClients(t, srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Close left the pub/sub connection open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A closed Locker still locks, on its sleep alone.
	lease, err := waiters.locker.Acquire(ctx, uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(ctx)
}

// pubsubClients counts the pub/sub connections of srv.
func pubsubClients(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	list, err := srv.Client(t).Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}

// TestNotifyLingerKeepsAHotNameSubscribed waits on one name twice: the second
// wait, within the linger, costs no SUBSCRIBE; with a linger of 0 it does.
func TestNotifyLingerKeepsAHotNameSubscribed(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		linger time.Duration
		want   int64 // SUBSCRIBE calls for two waits
	}{{time.Minute, 1}, {0, 2}} {
		holder := newEnv(t, srv, core.WithNotify())
		waiter := newEnv(t, srv, core.WithNotify(), core.WithNotifyLinger(tc.linger), core.WithWait(10*time.Second))
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		name := uniq(t)
		for i := 0; i < 2; i++ {
			held, err := holder.locker.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				lease, err := waiter.locker.Acquire(ctx, name)
				if err == nil {
					err = lease.Release(ctx)
				}
				got <- err
			}()
			waitSubscribed(t, held.Key()+":released", srv)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if tc.linger == 0 { // let the unsubscribe happen before the next wait
				deadline := time.Now().Add(5 * time.Second)
				for admin.PubSubNumSub(ctx, held.Key()+":released").Val()[held.Key()+":released"] != 0 {
					if time.Now().After(deadline) {
						t.Fatal("linger 0: the channel stayed subscribed")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		if n := subscribeCalls(t, admin); n != tc.want {
			t.Errorf("linger %v: %d SUBSCRIBE calls for two waits on one name, want %d", tc.linger, n, tc.want)
		}
		if err := waiter.locker.Close(); err != nil {
			t.Fatal(err)
		}
		_ = holder.locker.Close()
	}
}

// subscribeCalls reads the SUBSCRIBE count of INFO commandstats.
func subscribeCalls(t *testing.T, admin *redis.Client) int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_subscribe:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}
