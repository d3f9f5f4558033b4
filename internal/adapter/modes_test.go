package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// TestModeOptionsChecked: a bad n, a second mode on a route, a nil rule
// and a bad bound of names are set-up errors that name the option.
func TestModeOptionsChecked(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	for _, tc := range []struct {
		set  func(c *RPCConfig)
		want string
	}{
		{func(c *RPCConfig) { c.SetPermits(0) }, fmt.Sprintf("WithPermits(0): n must be between 1 and %d", core.MaxPermits)},
		{func(c *RPCConfig) { c.SetPermits(core.MaxPermits + 1) }, fmt.Sprintf("WithPermits(%d)", core.MaxPermits+1)},
		{func(c *RPCConfig) { c.SetShared(); c.SetPermits(2) }, "WithPermits(2): the route's lock mode is already chosen by WithShared"},
		{func(c *RPCConfig) { c.SetPermits(2); c.SetSharedMethods("/a.A/Get") }, "WithSharedMethods: the route's lock mode is already chosen by WithPermits(2)"},
		{func(c *RPCConfig) { c.Config.SetSharedReads(nil) }, "WithSharedReads: nil function"},
		{func(c *RPCConfig) { c.SetSharedIf(nil) }, "WithSharedIf: nil function"},
		{func(c *RPCConfig) { c.SetSharedMethods() }, "WithSharedMethods: no methods"},
		{func(c *RPCConfig) { c.SetSharedMethods("/a.A/Get", "") }, "WithSharedMethods: an empty method"},
		{func(c *RPCConfig) { c.SetMaxNames(0) }, "WithMaxNames(0): must be between 1 and 1024"},
		{func(c *RPCConfig) { c.SetMaxNames(MaxMaxNames + 1) }, "WithMaxNames(1025)"},
	} {
		_, err := NewRPC("rpc", e.Locker, byHeader, []func(*RPCConfig){tc.set}, failure)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v; want an ErrInvalidOption saying %q", err, tc.want)
		}
	}
}

// TestModeOnAFairLockerFailsAtSetUp: a route of shared holds or permits on
// a Locker that cannot take them (WithFair) fails when it is built, not on
// every request.
func TestModeOnAFairLockerFailsAtSetUp(t *testing.T) {
	e := adaptertest.NewEnv(t, nil, core.WithFair())
	for _, set := range []func(c *RPCConfig){
		func(c *RPCConfig) { c.SetShared() },
		func(c *RPCConfig) { c.SetPermits(3) },
		func(c *RPCConfig) { c.SetSharedMethods("/a.A/Get") },
	} {
		_, err := NewRPC("rpc", e.Locker, byHeader, []func(*RPCConfig){set}, failure)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), "WithFair") {
			t.Errorf("%v; want an ErrInvalidOption naming WithFair", err)
		}
	}
	if _, err := NewRPC("rpc", e.Locker, byHeader, []func(*RPCConfig){}, failure); err != nil {
		t.Errorf("an exclusive route on a fair Locker: %v", err)
	}
}

// modeSrc is the Source of a call of a method, named by a header.
type modeSrc struct {
	rpcSrc
	method string
}

func (s modeSrc) Route() string { return s.method }

// TestModeOfEachRequest: the route's mode, or the request's (shared
// methods, a rule), is the mode of the lease the handler sees; a key of
// several names gives one lease of them all.
func TestModeOfEachRequest(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	name := adaptertest.Uniq(t)
	for _, tc := range []struct {
		set     func(c *RPCConfig)
		method  string
		key     keyfunc.Func
		mode    core.Mode
		permits int
		names   []string
	}{
		{nil, "/a.A/Get", byHeader, core.ModeExclusive, 0, []string{name}},
		{func(c *RPCConfig) { c.SetShared() }, "/a.A/Put", byHeader, core.ModeShared, 0, []string{name}},
		{func(c *RPCConfig) { c.SetPermits(3) }, "/a.A/Put", byHeader, core.ModePermits, 3, []string{name}},
		{func(c *RPCConfig) { c.SetSharedMethods("/a.A/Get", "/a.A/List") }, "/a.A/Get", byHeader, core.ModeShared, 0, []string{name}},
		{func(c *RPCConfig) { c.SetSharedMethods("/a.A/Get", "/a.A/List") }, "/a.A/Put", byHeader, core.ModeExclusive, 0, []string{name}},
		{func(c *RPCConfig) {
			c.SetSharedIf(func(ctx context.Context, m string) bool { return strings.HasSuffix(m, "/Put") })
		}, "/a.A/Put", byHeader, core.ModeShared, 0, []string{name}},
		{nil, "/a.A/Put", keyfunc.All(byHeader, keyfunc.Const(name+"-2")), core.ModeExclusive, 0, []string{name, name + "-2"}},
		{func(c *RPCConfig) { c.SetShared() }, "/a.A/Get", keyfunc.All(byHeader, keyfunc.Const(name+"-2")), core.ModeShared, 0, []string{name, name + "-2"}},
	} {
		var opts []func(*RPCConfig)
		if tc.set != nil {
			opts = append(opts, tc.set)
		}
		r := newRPC(t, e.Locker, tc.key, opts...)
		var lease *core.Lease
		err := r.Unary(context.Background(), modeSrc{rpcSrc{header: name}, tc.method}, func(ctx context.Context) error {
			lease = core.LeaseFromContext(ctx)
			return nil
		})
		if err != nil || lease == nil {
			t.Errorf("%s, mode %v: %v", tc.method, tc.mode, err)
			continue
		}
		if got := slices.Sorted(slices.Values(lease.Names())); lease.Mode() != tc.mode || lease.Permits() != tc.permits || !slices.Equal(got, tc.names) {
			t.Errorf("%s: a lease of %q in mode %v with %d permits; want %q, %v, %d", tc.method, got, lease.Mode(), lease.Permits(), tc.names, tc.mode, tc.permits)
		}
	}
}

// TestNameBoundsAreBadRequests: too many names, and an empty item, are the
// client's mistakes; a key of several names called where the adapter
// expects one is the server's.
func TestNameBoundsAreBadRequests(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	three := keyfunc.All(byHeader, keyfunc.Const("b"), keyfunc.Const("c"))
	f := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetMaxNames(2) })
	f.key = three
	x := &req{}
	if _, ok := f.Lock(context.Background(), x, src{header: "a"}); ok || x.failure.Outcome != core.OutcomeBadRequest ||
		x.failure.Status != 400 || !errors.Is(x.failure.Err, keyfunc.ErrTooMany) || !strings.Contains(x.failure.Message, "more than 2 names") {
		t.Fatalf("three names, at most two: %+v", x.failure)
	}
	if o := Classify(fmt.Errorf("w: %w", keyfunc.ErrMultiple)); o != core.OutcomeError {
		t.Fatalf("ErrMultiple: %v", o)
	}
}

// TestExplainSeesTheAdaptersSource: Protocol.Explain gets the Source the
// adapter built (the key runs on one that wraps it) and the key's error,
// also nil, and its error is the request's.
func TestExplainSeesTheAdaptersSource(t *testing.T) {
	e := adaptertest.NewEnv(t, nil)
	var saw []string
	own := src{route: "/own", header: ""}
	p := testProtocol
	p.Explain = func(s keyfunc.Source, err error) error {
		saw = append(saw, fmt.Sprintf("%v %v", s == keyfunc.Source(own), err != nil))
		if err != nil {
			return fmt.Errorf("explained: %w", err)
		}
		return nil
	}
	var c Config[*req]
	f, err := NewFlow("test", e.Locker, byHeader, &c, p)
	if err != nil {
		t.Fatal(err)
	}
	x := &req{}
	if _, ok := f.Lock(context.Background(), x, own); ok || !strings.HasPrefix(x.failure.Err.Error(), "explained: ") || x.failure.Status != 400 {
		t.Fatalf("missing header: %+v", x.failure)
	}
	own.header = adaptertest.Uniq(t)
	lease, ok := f.Lock(context.Background(), &req{}, own)
	if !ok || lease == nil {
		t.Fatal("not locked")
	}
	_ = lease.Release(context.Background())
	if want := []string{"true true", "true false"}; !slices.Equal(saw, want) {
		t.Fatalf("Explain saw %q, want %q", saw, want)
	}
}
