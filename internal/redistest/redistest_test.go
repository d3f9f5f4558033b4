package redistest_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reqlock/reqlock/internal/redistest"
)

func TestStartStopRestart(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := c.ConfigGet(ctx, "save").Val()["save"]; got != "" {
		t.Fatalf("persistence is on: save = %q", got)
	}
	srv.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded on a stopped server")
	}
	srv.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("data survived a restart without persistence")
	}
	_ = c.Close()
	srv.Close()
}

func TestOverlap(t *testing.T) {
	var o redistest.Overlap
	exit := o.Enter()
	o.Enter()() // enters while the first is inside
	exit()
	o.Enter()()
	if o.Entries() != 3 || o.Overlaps() != 1 {
		t.Fatalf("entries=%d overlaps=%d, want 3 and 1", o.Entries(), o.Overlaps())
	}

	var free redistest.Overlap
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				mu.Lock()
				free.Enter()()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if free.Overlaps() != 0 || free.Entries() != 800 {
		t.Fatalf("a mutex-guarded section: entries=%d overlaps=%d", free.Entries(), free.Overlaps())
	}
}

// TestPauseResume: a paused server keeps its connections but answers
// nothing (a timeout, not a refused connection); resumed, it answers again
// with its data, and the command sent while it was paused has run.
func TestPauseResume(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if srv.PID() == 0 {
		t.Fatal("no PID for a running server")
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Incr(short, "n").Err()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("INCR on a paused server: %v, want a timeout", err)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(ctx).Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("PING after Resume: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := c.Get(ctx, "k").Val(); v != "v" {
		t.Fatalf("k = %q after a pause", v)
	}
	// The INCR reached the frozen server and ran when it resumed.
	if n := c.Get(ctx, "n").Val(); n != "1" {
		t.Fatalf("n = %q: the command sent during the pause did not run on resume", n)
	}
	if err := srv.Pause(); err != nil { // Stop kills a paused server too
		t.Fatal(err)
	}
	srv.Stop()
	if err := srv.Pause(); err == nil {
		t.Fatal("Pause of a stopped server succeeded")
	}
	_ = c.Close()
	srv.Close()
}
