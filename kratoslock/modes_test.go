package kratoslock_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"google.golang.org/grpc/metadata"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/kratoslock"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

// TestModes runs the RPC adapters' lock-mode scenarios (shared readers and
// operations, permits, several names) through kratoslock's middleware, on
// both of Kratos's transports. The test service has no streams.
func TestModes(t *testing.T) {
	for _, via := range []string{"http", "grpc"} {
		t.Run(via, func(t *testing.T) {
			adaptertest.RunRPCModes(t, adaptertest.RPC{Serve: serveModes(via), Code: codeOf})
		})
	}
}

// serveModes returns kratoslock's adaptertest.RPC.Serve on the transport
// via: the middleware of mode around a Do that runs handle.
func serveModes(via string) func(*testing.T, *adaptertest.Env, keyfunc.Func, adaptertest.RPCMode, func(*core.Lease) error) adaptertest.RPCCall {
	return func(t *testing.T, e *adaptertest.Env, key keyfunc.Func, mode adaptertest.RPCMode, handle func(*core.Lease) error) adaptertest.RPCCall {
		t.Helper()
		opts := options.Of(mode)
		do := func(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
			l := kratoslock.LeaseFromContext(ctx)
			if handle != nil {
				if err := handle(l); err != nil {
					return nil, kerrors.New(http.StatusPreconditionFailed, "APART", err.Error())
				}
			}
			return &testsvc.Reply{Lock: adaptertest.Describe(l)}, nil
		}
		lock := mws(kratoslock.Server(e.Locker, key, opts...))
		check := func(req adaptertest.RPCRequest) error {
			if req.Stream || req.Tenant != "" || req.Tags != nil {
				return fmt.Errorf("kratoslock's test service has no streams, and its message no tenant nor tags: %+v", req)
			}
			return nil
		}
		if via == "http" {
			c := serveHTTP(t, do, lock)
			return func(ctx context.Context, req adaptertest.RPCRequest) (string, error) {
				if err := check(req); err != nil {
					return "", err
				}
				a, err := c.do(ctx, "1", req.ID, "", req.Header...)
				if err == nil && a.Status != http.StatusOK {
					err = kerrors.New(a.Status, a.Reason, "")
				}
				return a.Lock, err
			}
		}
		c := serveGRPC(t, do, lock)
		return func(ctx context.Context, req adaptertest.RPCRequest) (string, error) {
			if err := check(req); err != nil {
				return "", err
			}
			reply, err := c.Do(metadata.AppendToOutgoingContext(ctx, req.Header...), order(req.ID))
			if err != nil {
				return "", err
			}
			return reply.Lock, nil
		}
	}
}

// codeOf is kratoslock's adaptertest.RPC.Code: a refused call's error is a
// Kratos error on both transports (kerrors.FromError).
func codeOf(err error) adaptertest.RPCCode {
	if err == nil {
		return adaptertest.RPCOther
	}
	switch ke := kerrors.FromError(err); {
	case ke.Reason == "REQLOCK_BUSY":
		return adaptertest.RPCBusy
	case ke.Reason == "REQLOCK_BAD_REQUEST":
		return adaptertest.RPCBadRequest
	case ke.Code == http.StatusInternalServerError:
		return adaptertest.RPCInternal
	}
	return adaptertest.RPCOther
}

// TestBadOptions: options that contradict each other, or are empty, are
// set-up errors that name the package.
func TestBadOptions(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil)
	options.CheckBadOptions(t, "kratoslock", func(opts ...kratoslock.Option) error { return kratoslock.Check(e.Locker, orderKey, opts...) })
}

// options are kratoslock's option constructors for the shared scenarios.
var options = adaptertest.RPCOptions[kratoslock.Option]{
	Wait:            kratoslock.WithWait,
	Shared:          kratoslock.WithShared,
	SharedMethods:   kratoslock.WithSharedMethods,
	SharedIfNil:     kratoslock.WithSharedIf(nil),
	Permits:         kratoslock.WithPermits,
	MaxNames:        kratoslock.WithMaxNames,
	RequestIDHeader: kratoslock.WithRequestIDHeader,
	DoMethod:        "/reqlock.kratoslock.testsvc.Test/Do",
	OtherMethod:     "/reqlock.kratoslock.testsvc.Test/Get",
}
