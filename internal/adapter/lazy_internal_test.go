package adapter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// The context of a stream locked from its first message reports the loss
// of its lease at the first look, as the other adapters' request contexts
// do: after a pause of the process past the lease's validity, Err, Done and
// context.Cause see it before the watch's goroutine has run.
func TestLazyContextSeesTheLossAtOnce(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	bg := context.Background()
	for _, look := range []string{"Err", "Done", "Cause"} {
		lease, err := e.Locker.Acquire(bg, adaptertest.Uniq(t), core.TTL(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		base, cancel := context.WithCancelCause(bg)
		c := &lazyCtx{Context: base}
		time.Sleep(time.Until(lease.ValidUntil()) + 2*time.Millisecond)
		c.withLease.Store(&contextBox{ctx: core.ContextWithLease(base, lease), lease: lease, cancel: cancel})
		var seen bool
		switch look {
		case "Err":
			seen = c.Err() != nil
		case "Done":
			select {
			case <-c.Done():
				seen = true
			default:
			}
		case "Cause":
			seen = context.Cause(c) != nil
		}
		if !seen || !errors.Is(context.Cause(c), ErrLost) {
			t.Errorf("%s: the stream's context of a lease past its validity reports %v (cause %v), want the loss at once", look, c.Err(), context.Cause(c))
		}
		cancel(context.Canceled)
		_ = lease.Release(bg)
	}
}
