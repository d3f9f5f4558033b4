package redistest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redistest"
)

func TestStartStopRestart(t *testing.T) {
	defer noLeaks(t)
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

func TestFreezeThaw(t *testing.T) {
	defer noLeaks(t)
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Freeze(t)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.Set(tctx, "late", "v", 0).Err() // reaches the frozen server, unanswered
	cancel()
	if err == nil {
		t.Fatal("SET on a frozen server got a reply")
	}
	srv.Thaw(t)
	deadline := time.Now().Add(10 * time.Second)
	for c.Get(ctx, "late").Val() != "v" { // executed once thawed, though its client gave up
		if time.Now().After(deadline) {
			t.Fatal("the SET sent while the server was frozen was not executed after Thaw")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = c.Close()
	srv.Close()
}
