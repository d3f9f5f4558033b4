package adapter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/keyfunc"
)

func TestClassify(t *testing.T) {
	for err, want := range map[error]Outcome{
		keyfunc.ErrMissing: BadRequest, keyfunc.ErrUnreadable: BadRequest, core.ErrTimeout: Busy,
		core.ErrStorage: Unavailable, context.Canceled: Canceled, context.DeadlineExceeded: DeadlineOver,
		keyfunc.ErrUnsupported: Internal, core.ErrInvalidOption: Internal,
	} {
		if got := Classify(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 30 * time.Second: 30} {
		if got := (&Config{RetryAfter: d}).RetryAfterSeconds(); got != want {
			t.Errorf("%v: %d, want %d", d, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	c := &Config{TTL: -1, Wait: -1, RetryAfter: -1}
	err := c.Check("x", nil, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Locker is nil", "key Func is nil", "WithTTL", "WithWait", "WithRetryAfter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
