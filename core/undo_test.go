package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

// lateReply is a go-redis hook: once armed, the next command (an attempt:
// the acquire script of a first attempt, SET of a later one) reaches Redis
// but its reply comes only after the caller's deadline; every later command
// waits delay before it is sent, as a command does that must dial a new
// connection (go-redis closes one whose read timed out) on a busy machine.
type lateReply struct {
	armed, after atomic.Bool
	delay        time.Duration
}

func (h *lateReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.CompareAndSwap(true, false) {
			_ = next(ctx, cmd) // executed by Redis
			<-ctx.Done()       // the reply is late
			h.after.Store(true)
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		if h.after.Load() {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

func (h *lateReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An attempt cut by the caller's deadline after its SET reached Redis is
// undone even when the deadline left it only a sliver of time: the undo has
// the I/O timeout, not what was left of the caller's wait, so the name is
// not locked without a holder for a whole TTL.
func TestAttemptCutByTheCallersDeadlineIsUndone(t *testing.T) {
	leakCheck(t)
	c := shared.Client(t)
	hook := &lateReply{delay: 50 * time.Millisecond}
	c.AddHook(hook)
	l := core.New(c)
	defer l.Close()
	name := uniq(t)
	hook.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want the caller's deadline", err)
	}
	admin := shared.Client(t)
	key, _ := l.Key(name)
	deadline := time.Now().Add(5 * time.Second) // well within the 10 s TTL
	for admin.Exists(context.Background(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the attempt cut by the caller's deadline left %s held (PTTL %v)", key, admin.PTTL(context.Background(), key).Val())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
