package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redisscript"
)

// rwCheck detects a broken read-write exclusion directly: a writer that
// enters while anyone is inside, or a reader that enters while a writer
// is, counts as an overlap; so does a permit holder beyond n, or in a slot
// another holder is in.
type rwCheck struct {
	mu               sync.Mutex
	readers, writers int
	slots            map[int]bool
	overlaps         []string
	entries          atomic.Int64
}

func (c *rwCheck) enter(mode core.Mode, slot, n int) (exit func()) {
	c.entries.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch mode {
	case core.ModeExclusive:
		if c.readers > 0 || c.writers > 0 {
			c.overlaps = append(c.overlaps, "a writer entered beside another holder")
		}
		c.writers++
	default:
		if c.writers > 0 {
			c.overlaps = append(c.overlaps, "a shared holder entered beside a writer")
		}
		if mode == core.ModePermits {
			if c.slots[slot] || slot < 0 || slot >= n {
				c.overlaps = append(c.overlaps, "a permit holder entered a slot in use or out of range")
			}
			c.slots[slot] = true
		}
		c.readers++
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if mode == core.ModeExclusive {
			c.writers--
		} else {
			c.readers--
			delete(c.slots, slot)
		}
	}
}

// Shared holders, permit holders and writers of two Lockers contend on one
// name: no writer is ever inside beside anyone, no permit holder beside
// more than n-1 others or in a slot in use. Each critical section takes a
// round trip to Redis.
func TestLockerModesExclusion(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	var lockers []*core.Locker
	for range 2 {
		l := core.New(c, core.WithTTL(10*time.Second), core.WithWait(time.Minute), core.WithSpin(time.Millisecond, 4*time.Millisecond), core.WithFencing())
		defer l.Close()
		lockers = append(lockers, l)
	}
	for _, tc := range []struct {
		name string
		opt  core.CallOption
		n    int
	}{{"shared", core.Shared(), 0}, {"permits", core.Permits(2), 2}} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniq(t)
			check := &rwCheck{slots: map[int]bool{}}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lockers[i%2]
					opts := []core.CallOption{tc.opt}
					if i%3 == 0 {
						opts = nil // a writer
					}
					for range 15 {
						lease, err := l.Acquire(ctx, name, opts...)
						if err != nil {
							t.Errorf("acquire: %v", err)
							return
						}
						exit := check.enter(lease.Mode(), lease.Slot(), tc.n)
						c.Get(ctx, "x") // a round trip inside
						exit()
						if err := lease.Release(ctx); err != nil {
							t.Errorf("release: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if len(check.overlaps) > 0 {
				t.Fatalf("%d overlaps in %d critical sections, first: %s", len(check.overlaps), check.entries.Load(), check.overlaps[0])
			}
			t.Logf("%d critical sections, no overlap", check.entries.Load())
		})
	}
}

// Two shared holds at once, then a writer waits: a later shared Acquire
// waits behind it (writers do not starve), and gets the name after the
// writer.
func TestLockerWriterFirst(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	l := core.New(c, core.WithTTL(time.Minute), core.WithWait(time.Minute), core.WithSpin(time.Millisecond, 4*time.Millisecond))
	defer l.Close()
	name := uniq(t)
	r1, err := l.Acquire(ctx, name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire(ctx, name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	go func() {
		w, err := l.Acquire(ctx, name)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	key := keyOf(t, l, name)
	for deadline := time.Now().Add(30 * time.Second); c.Exists(ctx, redisscript.WriterKey(key)).Val() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer left no record in 30 s")
		}
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = l.Acquire(short, name, core.Shared())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a shared Acquire behind a waiting writer: %v, want a timeout", err)
	}
	for _, r := range []*core.Lease{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r3, err := l.Acquire(ctx, name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	_ = r3.Release(ctx)
}

// AcquireAll on the store takes its names in one script: all or none, and
// a name held by a share keeps the whole set out.
func TestLockerAcquireAll(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	c := shared.Client(t)
	l := core.New(c, core.WithTTL(time.Minute), core.WithWait(time.Second), core.WithFencing())
	defer l.Close()
	a, b := uniq(t), uniq(t)
	r, err := l.Acquire(ctx, b, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireAll(ctx, []string{a, b}); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("AcquireAll while a share holds %s: %v, want ErrTimeout", b, err)
	}
	if n := c.Exists(ctx, keyOf(t, l, a)).Val(); n != 0 {
		t.Fatalf("a failed AcquireAll left %s set", a)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := l.AcquireAll(ctx, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if lease.FenceOf(a) <= 0 || lease.FenceOf(b) <= 0 {
		t.Fatalf("fences %d and %d, want both drawn", lease.FenceOf(a), lease.FenceOf(b))
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, keyOf(t, l, a), keyOf(t, l, b)).Val(); n != 0 {
		t.Fatalf("%d keys left after the release of AcquireAll's lease", n)
	}
}

// keyOf returns the store key of name on l.
func keyOf(t *testing.T, l *core.Locker, name string) string {
	t.Helper()
	k, err := l.Key(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
