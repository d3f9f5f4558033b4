package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSettle: a Redlock quorum counts only within the lock's validity; a
// late one, or none when the deadline cut nodes off, is a storage failure
// (errSlowQuorum), never "held by another".
func TestSettle(t *testing.T) {
	live := context.Background()
	expired, cancel := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel()
	future, past := time.Now().Add(time.Minute), time.Now().Add(-time.Millisecond)
	q := &quorumError{failed: 3, need: 3, errs: errors.New("down")}
	for _, tc := range []struct {
		name  string
		vctx  context.Context
		held  bool
		err   error
		valid time.Time
		want  bool
		slow  bool
	}{
		{"quorum in time", live, true, nil, future, true, false},
		{"quorum after the validity", live, true, nil, past, false, true},
		{"deadline cut the nodes off", expired, false, nil, future, false, true},
		{"held by another", live, false, nil, future, false, false},
		{"quorum out of reach", expired, false, q, future, false, false},
	} {
		held, err := settle(tc.vctx, tc.held, tc.err, tc.valid)
		if held != tc.want || errors.Is(err, errSlowQuorum) != tc.slow {
			t.Errorf("%s: settle = %v, %v", tc.name, held, err)
		}
	}
}
