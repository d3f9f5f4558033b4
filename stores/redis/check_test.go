package redisstore_test

import (
	"errors"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/lockstore"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// The capabilities each store offers (see the package documentation).
var (
	_ lockstore.Queuer       = (*redisstore.Store)(nil)
	_ lockstore.Notifier     = (*redisstore.Store)(nil)
	_ lockstore.FenceRaiser  = (*redisstore.Store)(nil)
	_ lockstore.Undoer       = (*redisstore.Store)(nil)
	_ lockstore.FreeAcquirer = (*redisstore.Store)(nil)
	_ lockstore.HeldAcquirer = (*redisstore.Store)(nil)
	_ lockstore.Tuner        = (*redisstore.Store)(nil)
	_ lockstore.Checker      = (*redisstore.Store)(nil)
	_ io.Closer              = (*redisstore.Store)(nil)

	_ lockstore.Store    = (*redisstore.Redlock)(nil)
	_ lockstore.Notifier = (*redisstore.Redlock)(nil)
	_ lockstore.Undoer   = (*redisstore.Redlock)(nil)
	_ lockstore.Tuner    = (*redisstore.Redlock)(nil)
	_ lockstore.Checker  = (*redisstore.Redlock)(nil)
	_ io.Closer          = (*redisstore.Redlock)(nil)
)

// TestCheck: what a store cannot serve is an invalid option of the Locker
// built on it, through NewWithStore as through New: a nil client, a quorum
// of no stores or of a nil one, and WithFair on a quorum. The error is
// core.ErrInvalidOption, which is lockstore.ErrInvalidOption.
func TestCheck(t *testing.T) {
	if core.ErrInvalidOption != lockstore.ErrInvalidOption {
		t.Fatal("core.ErrInvalidOption is not lockstore.ErrInvalidOption")
	}
	var typedNil *redis.Client
	for name, s := range map[string]core.Store{
		"nil client":       redisstore.New(nil),
		"typed nil client": redisstore.New(typedNil),
		"no stores":        redisstore.NewQuorum(),
		"a nil store":      redisstore.NewQuorum(redisstore.New(shared.Client(t)), nil),
		"a nil client":     redisstore.NewRedlock([]redis.UniversalClient{shared.Client(t), nil}),
	} {
		if err := core.NewWithStore(s).Err(); !errors.Is(err, lockstore.ErrInvalidOption) {
			t.Errorf("%s: Err = %v, want ErrInvalidOption", name, err)
		}
	}
	quorum := redisstore.NewRedlock([]redis.UniversalClient{shared.Client(t), shared.Client(t), shared.Client(t)})
	if err := core.NewWithStore(quorum).Err(); err != nil {
		t.Fatalf("a quorum of three: %v", err)
	}
	if err := core.NewWithStore(quorum, core.WithFair()).Err(); !errors.Is(err, core.ErrInvalidOption) {
		t.Errorf("WithFair on a quorum: Err = %v, want ErrInvalidOption", err)
	}
	if err := core.NewWithStore(redisstore.New(shared.Client(t)), core.WithFair(), core.WithFencing()).Err(); err != nil {
		t.Errorf("WithFair and WithFencing on one deployment: %v", err)
	}
	_ = quorum.Close()
}
