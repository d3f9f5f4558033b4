package connectlock_test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/connectlock"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
)

// TestModes runs the RPC adapters' lock-mode scenarios (shared readers and
// procedures, permits, several names, on unary calls and streams) through
// connectlock's interceptor.
func TestModes(t *testing.T) {
	adaptertest.RunRPCModes(t, adaptertest.RPC{Serve: serveModes, Code: codeOf, Streams: true})
}

// serveModes is connectlock's adaptertest.RPC.Serve: the interceptor of
// mode around a service whose Do and Chat (its first message) run handle.
func serveModes(t *testing.T, e *adaptertest.Env, key keyfunc.Func, mode adaptertest.RPCMode, handle func(*core.Lease) error) adaptertest.RPCCall {
	t.Helper()
	opts := options.Of(mode)
	answer := func(ctx context.Context) (*testsvc.Reply, error) {
		l := connectlock.LeaseFromContext(ctx)
		if handle != nil {
			if err := handle(l); err != nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, err)
			}
		}
		return &testsvc.Reply{Lock: adaptertest.Describe(l)}, nil
	}
	client := serve(t, &service{
		do: func(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) { return answer(ctx) },
		chat: func(ctx context.Context, s *bidi) error {
			if _, err := s.Receive(); err != nil {
				return err
			}
			reply, err := answer(ctx)
			if err != nil {
				return err
			}
			return s.Send(reply)
		},
	}, with(connectlock.NewInterceptor(e.Locker, key, opts...)))
	return func(ctx context.Context, req adaptertest.RPCRequest) (string, error) {
		if req.Tenant != "" || req.Tags != nil {
			return "", fmt.Errorf("connectlock's test message has no tenant nor tags: %+v", req)
		}
		if !req.Stream {
			return call(client, ctx, order(req.ID), req.Header...)
		}
		got, err := chatOnce(client, ctx, req.Header, order(req.ID))
		if err == nil && len(got) != 1 {
			err = fmt.Errorf("the stream answered %q, want one reply", got)
		}
		if err != nil {
			return "", err
		}
		return got[0], nil
	}
}

// codeOf is connectlock's adaptertest.RPC.Code.
func codeOf(err error) adaptertest.RPCCode {
	switch connect.CodeOf(err) {
	case connect.CodeAborted:
		return adaptertest.RPCBusy
	case connect.CodeInvalidArgument:
		return adaptertest.RPCBadRequest
	case connect.CodeInternal:
		return adaptertest.RPCInternal
	}
	return adaptertest.RPCOther
}

// TestBadOptions: options that contradict each other, or are empty, are
// set-up errors that name the package.
func TestBadOptions(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	options.CheckBadOptions(t, "connectlock", func(opts ...connectlock.Option) error { return connectlock.Check(e.Locker, orderKey, opts...) })
}

// options are connectlock's option constructors for the shared scenarios.
var options = adaptertest.RPCOptions[connectlock.Option]{
	Wait:            connectlock.WithWait,
	Shared:          connectlock.WithShared,
	SharedMethods:   connectlock.WithSharedMethods,
	SharedIfNil:     connectlock.WithSharedIf(nil),
	Permits:         connectlock.WithPermits,
	MaxNames:        connectlock.WithMaxNames,
	RequestIDHeader: connectlock.WithRequestIDHeader,
	DoMethod:        testsvcconnect.TestDoProcedure,
	OtherMethod:     "/reqlock.connectlock.testsvc.Test/Other",
}
