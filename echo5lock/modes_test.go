package echo5lock_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/echo5lock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// TestModes runs the lock-mode scenarios (shared reads, permits, keys of
// several names, crossing orders) on an Echo router.
func TestModes(t *testing.T) { adaptertest.RunModes(t, serveModes) }

func serveModes(_ *testing.T, l *core.Locker, routes []adaptertest.Route) (http.Handler, error) {
	e := echo.New()
	for _, r := range routes {
		opts := modeOptions(r.Mode)
		if err := echo5lock.Check(l, r.Key, opts...); err != nil {
			return nil, err
		}
		e.Match(r.Methods, adaptertest.ColonPath(r.Path), func(c *echo.Context) error {
			r.Handle(c.Request())
			return c.NoContent(http.StatusOK)
		}, echo5lock.New(l, r.Key, opts...))
	}
	return e, nil
}

func modeOptions(m adaptertest.Mode) []echo5lock.Option {
	opts := []echo5lock.Option{echo5lock.WithWait(m.Wait)}
	if m.Shared {
		opts = append(opts, echo5lock.WithShared())
	}
	if m.SharedReads {
		opts = append(opts, echo5lock.WithSharedReads())
	}
	if m.Permits != 0 {
		opts = append(opts, echo5lock.WithPermits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, echo5lock.WithMaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, echo5lock.WithRequestIDHeader(m.RequestIDHeader))
	}
	return opts
}
