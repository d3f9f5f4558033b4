package httplock_test

import (
	"net/http"
	"testing"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// TestModes runs the lock-mode scenarios (shared reads, permits, keys of
// several names, crossing orders) on a ServeMux.
func TestModes(t *testing.T) { adaptertest.RunModes(t, serveModes) }

func serveModes(_ *testing.T, l *core.Locker, routes []adaptertest.Route) (http.Handler, error) {
	mux := http.NewServeMux()
	for _, r := range routes {
		opts := modeOptions(r.Mode)
		if err := httplock.Check(l, r.Key, opts...); err != nil {
			return nil, err
		}
		h := httplock.New(l, r.Key, opts...)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.Handle(req)
			w.WriteHeader(http.StatusOK)
		}))
		for _, m := range r.Methods {
			mux.Handle(m+" "+r.Path, h)
		}
	}
	return mux, nil
}

func modeOptions(m adaptertest.Mode) []httplock.Option {
	opts := []httplock.Option{httplock.WithWait(m.Wait)}
	if m.Shared {
		opts = append(opts, httplock.WithShared())
	}
	if m.SharedReads {
		opts = append(opts, httplock.WithSharedReads())
	}
	if m.Permits != 0 {
		opts = append(opts, httplock.WithPermits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, httplock.WithMaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, httplock.WithRequestIDHeader(m.RequestIDHeader))
	}
	return opts
}
