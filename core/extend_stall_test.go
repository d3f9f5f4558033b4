package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// A shortening Extend whose reply is lost may still run on the server, late
// (a frozen server executes it when it resumes): the lease must then count on
// the shorter TTL, not keep the validity it had, or it would report itself
// valid after the store has freed the name.
func TestShorteningExtendWithoutReplyShortensValidity(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	e := newEnv(t, srv, core.WithTTL(10*time.Second), core.WithIOTimeout(200*time.Millisecond))
	lease := hold(t, e, uniq(t))
	done := lease.Done() // taken before: its timer must follow the shorter validity

	const short = 300 * time.Millisecond
	srv.Freeze(t)
	before := time.Now()
	err := lease.Extend(context.Background(), short)
	srv.Thaw(t)
	if !errors.Is(err, core.ErrStorage) {
		t.Fatalf("Extend on a frozen server = %v, want ErrStorage", err)
	}
	if v := lease.ValidUntil(); v.After(before.Add(short)) {
		t.Fatalf("after a shortening Extend without a reply the lease is valid %v past the Extend, want at most %v", v.Sub(before).Round(time.Millisecond), short)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second): // the old validity ran 10 s
		t.Fatal("Done did not close after the shorter validity passed")
	}
	if !lease.Lost() {
		t.Fatal("the lease is not lost after its shorter validity passed")
	}
}
