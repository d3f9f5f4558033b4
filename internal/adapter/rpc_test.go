package adapter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// rpcSrc is the Source of a test call: a header, and a message that is its
// own Field value ("" before the first message).
type rpcSrc struct {
	header string
	msg    any
}

func (s rpcSrc) Route() string                 { return "/t.T/M" }
func (s rpcSrc) Param(string) (string, error)  { return "", keyfunc.ErrUnsupported }
func (s rpcSrc) Query(string) (string, error)  { return "", keyfunc.ErrUnsupported }
func (s rpcSrc) Header(string) (string, error) { return s.header, nil }
func (s rpcSrc) Field(string) (string, error)  { m, _ := s.msg.(string); return m, nil }
func (s rpcSrc) with(msg any) keyfunc.Source   { s.msg = msg; return s }
func failure(_ *Call, f Failure) error         { return errors.New("refused: " + f.Outcome.String()) }
func newRPC(t testing.TB, l *core.Locker, key keyfunc.Func, opts ...func(*RPCConfig)) *RPC {
	t.Helper()
	return Must(NewRPC("rpc", l, key, opts, failure))
}

func TestRPCUnaryAndErrorHandler(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	held := e.Hold(t, "busy")
	r := newRPC(t, e.Locker, byHeader, func(c *RPCConfig) { c.SetWait(0) })
	var name string
	err := r.Unary(context.Background(), rpcSrc{header: "free"}, func(ctx context.Context) error {
		name = core.LeaseFromContext(ctx).Name()
		return errors.New("the handler's")
	})
	if err == nil || err.Error() != "the handler's" || name != "free" {
		t.Fatalf("locked: %v, lease %q", err, name)
	}
	ran := false
	if err := r.Unary(context.Background(), rpcSrc{header: held.Name()}, func(context.Context) error { ran = true; return nil }); err == nil || err.Error() != "refused: busy" || ran {
		t.Fatalf("busy: %v, ran %v", err, ran)
	}
	var told error
	quiet := newRPC(t, e.Locker, byHeader, func(c *RPCConfig) {
		c.SetWait(0)
		c.SetErrorHandler(func(ctx context.Context, err error) error { told = err; return nil })
	})
	if err := quiet.Unary(context.Background(), rpcSrc{header: held.Name()}, func(context.Context) error { ran = true; return nil }); err == nil || ran || !errors.Is(told, core.ErrTimeout) {
		t.Fatalf("an error handler returning nil: %v, ran %v, told %v", err, ran, told)
	}
}

// TestRPCStream: a key without a message field locks before the handler; one
// with a field locks at the first message, whose context then carries the
// lease; a refusal at the first message is every Receive's error.
func TestRPCStream(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	held := e.Hold(t, "busy")
	src := rpcSrc{header: "h"}.with
	byField := newRPC(t, e.Locker, keyfunc.Field("x"), func(c *RPCConfig) { c.SetWait(0) })

	err := newRPC(t, e.Locker, byHeader).Stream(context.Background(), src, func(ctx context.Context, s *Stream) error {
		if s != nil || core.LeaseFromContext(ctx).Name() != "h" {
			t.Errorf("by header: stream %v, lease %v", s, core.LeaseFromContext(ctx))
		}
		return nil
	})
	if err != nil || e.Exists(t, "h") {
		t.Fatalf("by header: %v, held after: %v", err, e.Exists(t, "h"))
	}

	msgs := []string{"m1", "m2"}
	err = byField.Stream(context.Background(), src, func(ctx context.Context, s *Stream) error {
		if s == nil || ctx != s.Context() || core.LeaseFromContext(ctx) != nil {
			t.Fatal("by field: no lazy stream, or a lease before the first message")
		}
		for _, m := range msgs {
			if err := s.Receive(m, func() error { return nil }); err != nil {
				return err
			}
			if l := core.LeaseFromContext(ctx); l == nil || l.Name() != "m1" {
				t.Errorf("after %s: lease %v", m, l)
			}
		}
		return nil
	})
	if err != nil || e.Exists(t, "m1") {
		t.Fatalf("by field: %v, held after: %v", err, e.Exists(t, "m1"))
	}

	err = byField.Stream(context.Background(), src, func(ctx context.Context, s *Stream) error {
		for range 2 {
			if err := s.Receive(held.Name(), func() error { return nil }); err == nil || !strings.Contains(err.Error(), "busy") {
				t.Errorf("refused at the first message: %v", err)
			}
		}
		return errors.New("the handler's")
	})
	if err == nil || err.Error() != "the handler's" {
		t.Fatalf("the handler's error is the stream's: %v", err)
	}

	// A receive error comes first, and the lock waits for a message.
	err = byField.Stream(context.Background(), src, func(ctx context.Context, s *Stream) error {
		return s.Receive(nil, func() error { return context.Canceled })
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("receive error: %v", err)
	}
	// A missing header refuses the stream before its handler runs.
	both, err := keyfunc.Template("{header.x}:{field.x}")
	if err != nil {
		t.Fatal(err)
	}
	err = newRPC(t, e.Locker, both).Stream(context.Background(), rpcSrc{}.with,
		func(context.Context, *Stream) error { t.Error("ran"); return nil })
	if err == nil || err.Error() != "refused: bad_request" {
		t.Fatalf("missing header: %v", err)
	}
}

// TestRPCStreamLostLease: the context of a stream locked at its first
// message is cancelled with ErrLost when the lease is lost.
func TestRPCStreamLostLease(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	r := newRPC(t, e.Locker, keyfunc.Field("x"), func(c *RPCConfig) { c.SetTTL(50 * time.Millisecond) })
	err := r.Stream(context.Background(), rpcSrc{}.with, func(ctx context.Context, s *Stream) error {
		if err := s.Receive(adaptertest.Uniq(t), func() error { return nil }); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil
		}
	})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("got %v, want ErrLost", err)
	}
}
