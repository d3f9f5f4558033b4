package ginlock_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// TestModes runs the lock-mode scenarios (shared reads, permits, keys of
// several names, crossing orders) on a gin engine.
func TestModes(t *testing.T) { adaptertest.RunModes(t, serveModes) }

func serveModes(_ *testing.T, l *core.Locker, routes []adaptertest.Route) (http.Handler, error) {
	e := gin.New()
	for _, r := range routes {
		opts := modeOptions(r.Mode)
		if err := ginlock.Check(l, r.Key, opts...); err != nil {
			return nil, err
		}
		e.Match(r.Methods, adaptertest.ColonPath(r.Path), ginlock.New(l, r.Key, opts...), func(c *gin.Context) {
			r.Handle(c.Request)
			c.Status(http.StatusOK)
		})
	}
	return e, nil
}

func modeOptions(m adaptertest.Mode) []ginlock.Option {
	opts := []ginlock.Option{ginlock.WithWait(m.Wait)}
	if m.Shared {
		opts = append(opts, ginlock.WithShared())
	}
	if m.SharedReads {
		opts = append(opts, ginlock.WithSharedReads())
	}
	if m.Permits != 0 {
		opts = append(opts, ginlock.WithPermits(m.Permits))
	}
	if m.MaxNames != 0 {
		opts = append(opts, ginlock.WithMaxNames(m.MaxNames))
	}
	if m.RequestIDHeader != "" {
		opts = append(opts, ginlock.WithRequestIDHeader(m.RequestIDHeader))
	}
	return opts
}
