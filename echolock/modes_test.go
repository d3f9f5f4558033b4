package echolock_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echolock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// TestModes runs the lock-mode scenarios (shared reads, permits, keys of
// several names, crossing orders) on an Echo router.
func TestModes(t *testing.T) { adaptertest.RunModes(t, serveModes) }

func serveModes(_ *testing.T, l *core.Locker, routes []adaptertest.Route) (http.Handler, error) {
	e := echo.New()
	for _, r := range routes {
		opts := modeOptions(r.Mode)
		if err := echolock.Check(l, r.Key, opts...); err != nil {
			return nil, err
		}
		e.Match(r.Methods, adaptertest.ColonPath(r.Path), func(c echo.Context) error {
			r.Handle(c.Request())
			return c.NoContent(http.StatusOK)
		}, echolock.New(l, r.Key, opts...))
	}
	return e, nil
}

func modeOptions(m adaptertest.Mode) []echolock.Option {
	opts := []echolock.Option{echolock.WithWait(m.Wait)}
	if m.Shared {
		opts = append(opts, echolock.WithShared())
	}
	if m.SharedReads {
		opts = append(opts, echolock.WithSharedReads())
	}
	if m.Permits != 0 {
		opts = append(opts, echolock.WithPermits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, echolock.WithMaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, echolock.WithRequestIDHeader(m.RequestIDHeader))
	}
	return opts
}
