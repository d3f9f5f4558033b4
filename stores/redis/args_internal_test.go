package redisstore

import (
	"context"
	"encoding"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
)

// An argument list holds its arguments in order, the constant ones as
// given and the variable ones as bytes that go-redis writes
// (encoding.BinaryMarshaler) and prints (fmt.Stringer) as the strings they
// were made of, whether they fit in the list's own buffer or not, in a small
// or a large list.
func TestCmdArgs(t *testing.T) {
	long := strings.Repeat("k", 300)
	for _, tc := range []struct {
		name        string
		args, bulks int
		key         string
	}{
		{"small", 7, 3, "reqlock:{a}"},
		{"small, a buffer of its own", 7, 3, long},
		{"large", 13, 8, "reqlock:{a}"},
		{"large, a buffer of its own", 13, 8, long},
	} {
		size := 2*len(tc.key) + len(":fence") + len("token") + decLen(-1234)
		a := newCmdArgs(tc.args, tc.bulks, size)
		a.add("evalsha", "sha")
		a.put(tc.key)
		a.put(tc.key, ":fence")
		a.add("1")
		a.put("token")
		a.putInt(-1234)
		want := []string{"evalsha", "sha", tc.key, tc.key + ":fence", "1", "token", "-1234"}
		if len(a.list) != len(want) {
			t.Fatalf("%s: %d arguments, want %d", tc.name, len(a.list), len(want))
		}
		for i, v := range a.list {
			var got string
			switch v := v.(type) {
			case string:
				got = v
			case encoding.BinaryMarshaler:
				b, err := v.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
				if s := fmt.Sprint(v); s != got {
					t.Errorf("%s: argument %d prints as %q, want %q", tc.name, i, s, got)
				}
			default:
				t.Fatalf("%s: argument %d is a %T", tc.name, i, v)
			}
			if got != want[i] {
				t.Errorf("%s: argument %d is %q, want %q", tc.name, i, got, want[i])
			}
		}
	}
}

// commandLog is a go-redis hook that records the commands sent, as
// go-redis prints them.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (h *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		h.cmds = append(h.cmds, cmd.String())
		h.mu.Unlock()
		return err
	}
}

func (h *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the commands recorded since the last call.
func (h *commandLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds := h.cmds
	h.cmds = nil
	return cmds
}

// The scripts of the hot path run as the others do (run): EVAL the first
// time, EVALSHA afterwards, EVAL again after a NOSCRIPT (a restarted server
// that lost its scripts); and a hook prints their arguments as text.
func TestScriptCall(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	log := &commandLog{}
	client.AddHook(log)
	s := New(client)
	s.noSetGet.Store(true) // attempts by acquire.lua
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil { // the connection's own set-up commands pass the hook too
		t.Fatal(err)
	}
	log.take()
	key, token := "reqlock:{call}", "t1"
	cycle := func() []string {
		t.Helper()
		if ok, _, err := s.TryAcquire(ctx, key, token, time.Second, false); !ok || err != nil {
			t.Fatalf("acquire: %v, %v", ok, err)
		}
		if ok, err := s.Release(ctx, key, token); !ok || err != nil {
			t.Fatalf("release: %v, %v", ok, err)
		}
		var names []string
		for _, c := range log.take() {
			names = append(names, strings.Fields(c)[0])
		}
		return names
	}
	if got := fmt.Sprint(cycle()); got != "[eval eval]" {
		t.Errorf("the first run of each script sent %s, want EVAL", got)
	}
	if got := fmt.Sprint(cycle()); got != "[evalsha evalsha]" {
		t.Errorf("later runs sent %s, want EVALSHA", got)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	log.take()
	if got := fmt.Sprint(cycle()); got != "[evalsha eval evalsha eval]" {
		t.Errorf("the runs after a SCRIPT FLUSH sent %s, want EVALSHA, then EVAL", got)
	}
	if _, _, err := s.TryAcquire(ctx, key, token, time.Second, false); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("evalsha %s 1 %s %s 1000: 1", acquireScript.Hash(), key, token)
	if got := log.take(); len(got) != 1 || got[0] != want {
		t.Errorf("the acquire prints as %q, want %q", got, want)
	}
}
