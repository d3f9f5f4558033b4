package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// rwOverlap detects a broken read-write exclusion directly: a writer that
// enters while anyone is inside, or a reader that enters while a writer is,
// counts as an overlap. It also records how many readers were inside at
// once, which shows that shared holds do run together.
type rwOverlap struct {
	mu         sync.Mutex
	readers    int
	writers    int
	maxReaders int
	overlaps   int
}

func (o *rwOverlap) enter(write bool) (exit func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writers > 0 || (write && o.readers > 0) {
		o.overlaps++
	}
	if write {
		o.writers++
		return func() { o.mu.Lock(); o.writers--; o.mu.Unlock() }
	}
	o.readers++
	o.maxReaders = max(o.maxReaders, o.readers)
	return func() { o.mu.Lock(); o.readers--; o.mu.Unlock() }
}

// countingSharer counts the exclusive attempts that record a waiting
// writer, and signals the first one.
type countingSharer struct {
	core.Sharer
	waiting     atomic.Int64
	firstWaited chan struct{}
	once        sync.Once
}

func (s *countingSharer) TryAcquireWaiting(ctx context.Context, key, token string, ttl, patience time.Duration, fenced bool) (bool, int64, error) {
	ok, fence, err := s.Sharer.TryAcquireWaiting(ctx, key, token, ttl, patience, fenced)
	if s.waiting.Add(1) == 1 {
		s.once.Do(func() { close(s.firstWaited) })
	}
	return ok, fence, err
}

// heldCountingSharer is a countingSharer that is also a HeldAcquirer (the
// Redis store's TryAcquireHeld), and counts its calls.
type heldCountingSharer struct {
	*countingSharer
	held  core.HeldAcquirer
	calls atomic.Int64
}

func (s *heldCountingSharer) TryAcquireHeld(ctx context.Context, key, token string, ttl time.Duration, fenced bool) (bool, bool, int64, error) {
	s.calls.Add(1)
	return s.held.TryAcquireHeld(ctx, key, token, ttl, fenced)
}

// sharerOf returns the Redis store of a Locker built on the shared server.
func sharerOf(t *testing.T) core.Sharer {
	t.Helper()
	s, ok := core.NewRedisStore(shared.Client(t)).(core.Sharer)
	if !ok {
		t.Fatal("the Redis store is not a core.Sharer")
	}
	return s
}

func TestSharedHoldsRunTogetherAndExcludeWriters(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	e := newEnv(t, nil)
	name := uniq(t)
	var readers []*core.Lease
	for i := range 4 {
		lease, err := e.locker.Acquire(ctx, name, core.Shared(), core.Wait(0))
		if err != nil {
			t.Fatalf("shared hold %d beside %d others: %v", i, i, err)
		}
		if lease.Mode() != core.ModeShared || lease.Slot() != 0 {
			t.Fatalf("mode %v slot %d, want shared, 0", lease.Mode(), lease.Slot())
		}
		readers = append(readers, lease)
	}
	if _, err := e.locker.Acquire(ctx, name, core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("exclusive beside shared holders: %v, want ErrTimeout", err)
	}
	for _, r := range readers {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w, err := e.locker.Acquire(ctx, name, core.Wait(0))
	if err != nil {
		t.Fatalf("exclusive once the shares left: %v", err)
	}
	if _, err := e.locker.Acquire(ctx, name, core.Shared(), core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("shared beside an exclusive holder: %v, want ErrTimeout", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSharedAndExclusiveUnderContention mixes readers and writers of one
// name from two Lockers (two processes) and checks every critical section
// for overlaps.
func TestSharedAndExclusiveUnderContention(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	name := uniq(t)
	var o rwOverlap
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := range 2 {
		e := newEnv(t, nil, core.WithNotify())
		for g := range 4 {
			write := g == 0
			wg.Go(func() {
				for range 15 {
					var opts []core.CallOption
					if !write {
						opts = append(opts, core.Shared())
					}
					lease, err := e.locker.Acquire(ctx, name, append(opts, core.Wait(20*time.Second))...)
					if err != nil {
						errs <- fmt.Errorf("process %d, goroutine %d: %w", p, g, err)
						return
					}
					exit := o.enter(write)
					time.Sleep(2 * time.Millisecond)
					exit()
					if err := lease.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o.overlaps != 0 {
		t.Fatalf("%d overlaps of a writer with another holder", o.overlaps)
	}
	t.Logf("at most %d readers at once", o.maxReaders)
}

// TestWriterIsNotStarved: once an exclusive Acquire waits behind shared
// holders, a new shared Acquire waits behind it, and the writer takes the
// name when the shares it waited for leave; once it released the name, a
// shared hold is taken at once (the writer's record went with its
// success). On a store that is a HeldAcquirer too, the writer's later
// attempts go through TryAcquireHeld, and once one saw shares, through
// TryAcquireWaiting for the rest of the Acquire: else its record would
// outlive it (a native success does not clear it), and the last shared
// hold would be refused.
func TestWriterIsNotStarved(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "Sharer", true: "HeldAcquirer"}[held], func(t *testing.T) {
			leakCheck(t)
			ctx := context.Background()
			cs := &countingSharer{Sharer: sharerOf(t), firstWaited: make(chan struct{})}
			var s core.Store = cs
			var hs *heldCountingSharer
			if held {
				hs = &heldCountingSharer{countingSharer: cs, held: cs.Sharer.(core.HeldAcquirer)}
				s = hs
			}
			l := core.NewWithStore(s)
			name := uniq(t)
			reader, err := l.Acquire(ctx, name, core.Shared())
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				lease *core.Lease
				err   error
			}
			writer := make(chan result, 1)
			go func() {
				lease, err := l.Acquire(ctx, name, core.Wait(30*time.Second))
				writer <- result{lease, err}
			}()
			select { // the writer failed twice: it is recorded as waiting
			case <-cs.firstWaited:
			case r := <-writer:
				t.Fatalf("the writer ended before it waited: %v", r.err)
			case <-time.After(20 * time.Second):
				t.Fatal("the writer never made a second attempt (TryAcquireWaiting)")
			}
			if _, err := l.Acquire(ctx, name, core.Shared(), core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
				t.Fatalf("a new shared hold while a writer waits: %v, want ErrTimeout", err)
			}
			if err := reader.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-writer
			if r.err != nil {
				t.Fatalf("the writer: %v", r.err)
			}
			if err := r.lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := l.Acquire(ctx, name, core.Shared(), core.Wait(0))
			if err != nil {
				t.Fatalf("a shared hold after the writer left: %v", err)
			}
			_ = after.Release(ctx)
			if hs != nil && hs.calls.Load() == 0 {
				t.Fatal("the writer never called TryAcquireHeld")
			}
		})
	}
}

func TestPermitsGiveDistinctSlots(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	e := newEnv(t, nil)
	name := uniq(t)
	var held []*core.Lease
	for i := range 3 {
		lease, err := e.locker.Acquire(ctx, name, core.Permits(3), core.Wait(0))
		if err != nil {
			t.Fatalf("permit %d of 3: %v", i, err)
		}
		if lease.Slot() != i || lease.Mode() != core.ModePermits || lease.Permits() != 3 {
			t.Fatalf("permit %d: slot %d, mode %v, permits %d", i, lease.Slot(), lease.Mode(), lease.Permits())
		}
		held = append(held, lease)
	}
	if _, err := e.locker.Acquire(ctx, name, core.Permits(3), core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("a fourth permit of 3: %v, want ErrTimeout", err)
	}
	for _, opt := range []core.CallOption{core.Permits(2), core.Permits(4), core.Shared()} {
		_, err := e.locker.Acquire(ctx, name, opt, core.Wait(0))
		if !errors.Is(err, core.ErrModeMismatch) || !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("another mode while Permits(3) hold the name: %v, want ErrModeMismatch and ErrInvalidOption", err)
		}
	}
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := e.locker.Acquire(ctx, name, core.Permits(3), core.Wait(0))
	if err != nil || again.Slot() != 1 {
		t.Fatalf("the freed slot: %v, slot %d, want slot 1", err, again.Slot())
	}
	for _, l := range []*core.Lease{held[0], again, held[2]} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPermitsUnderContention(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	name := uniq(t)
	const n = 3
	var mu sync.Mutex
	inside := map[int]bool{}
	most, bad := 0, ""
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		e := newEnv(t, nil)
		for range 4 {
			wg.Go(func() {
				for range 15 {
					lease, err := e.locker.Acquire(ctx, name, core.Permits(n), core.Wait(20*time.Second))
					if err != nil {
						errs <- err
						return
					}
					slot := lease.Slot()
					mu.Lock()
					if inside[slot] || slot < 0 || slot >= n {
						bad = fmt.Sprintf("slot %d taken twice or out of range", slot)
					}
					inside[slot] = true
					most = max(most, len(inside))
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					mu.Lock()
					delete(inside, slot)
					mu.Unlock()
					if err := lease.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if bad != "" || most > n {
		t.Fatalf("%s; at most %d holders at once (n=%d)", bad, most, n)
	}
}

func TestModesRefusedWithAClearError(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	name := uniq(t)
	for _, n := range []int{0, -1, core.MaxPermits + 1} {
		if err := core.CheckCallOptions(core.Permits(n)); !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("Permits(%d): %v, want ErrInvalidOption", n, err)
		}
	}
	type plain struct{ core.Store } // hides the Sharer
	l := core.NewWithStore(plain{sharerOf(t)})
	if _, err := l.Acquire(ctx, name, core.Shared()); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Shared on a store that is no Sharer: %v, want ErrInvalidOption", err)
	}
	fair := newEnv(t, nil, core.WithFair())
	if _, err := fair.locker.Acquire(ctx, name, core.Permits(2)); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Permits WithFair: %v, want ErrInvalidOption", err)
	}
	if n := fair.rt.N.Load(); n != 0 {
		t.Fatalf("%d round trips for refused calls", n)
	}
}

func TestReentrancyKeepsTheMode(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	e := newEnv(t, nil)
	name := uniq(t)
	w, err := e.locker.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	in := core.ContextWithLease(ctx, w)
	if n, err := e.locker.Acquire(in, name, core.Shared()); err != nil || n.Token() != w.Token() {
		t.Fatalf("shared inside exclusive: %v", err)
	}
	_ = w.Release(ctx)
	r, err := e.locker.Acquire(ctx, name, core.Shared())
	if err != nil {
		t.Fatal(err)
	}
	in = core.ContextWithLease(ctx, r)
	if n, err := e.locker.Acquire(in, name, core.Shared()); err != nil || n.Token() != r.Token() {
		t.Fatalf("shared inside shared: %v", err)
	}
	if _, err := e.locker.Acquire(in, name); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("exclusive inside shared (an upgrade): %v, want ErrInvalidOption", err)
	}
	_ = r.Release(ctx)
}

func TestSharedLeaseIsRenewedAndLostOnItsOwn(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	e := newEnv(t, nil, core.WithWatchdog())
	name := uniq(t)
	short, err := e.locker.Acquire(ctx, name, core.Shared(), core.TTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.locker.Acquire(ctx, name, core.Shared(), core.TTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Steal nothing, but remove short's share behind its back: its
	// watchdog must find it gone and close Done, while other stays.
	if ok, err := sharerOf(t).ReleaseShare(ctx, short.Key(), short.Token()); err != nil || !ok {
		t.Fatalf("removing the share: %v %v", ok, err)
	}
	select {
	case <-short.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the watchdog did not notice its share was gone")
	}
	if !short.Lost() {
		t.Fatal("short not lost")
	}
	if other.Lost() {
		t.Fatal("the other share was lost with it")
	}
	if err := other.Extend(ctx, 3*time.Second); err != nil {
		t.Fatalf("extending the other share: %v", err)
	}
	_ = other.Release(ctx)
	_ = short.Release(ctx)
}

// TestAcquireAllCrossingOrders: two processes take the same names in
// opposite orders, over and over; none deadlocks, and no name is ever held
// twice at once. Both paths run: one step on a MultiAcquirer (Redis), and
// one name at a time in canonical order where the store cannot.
func TestAcquireAllCrossingOrders(t *testing.T) {
	for _, atomicStore := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomicStore), func(t *testing.T) {
			leakCheck(t)
			ctx := context.Background()
			names := []string{uniq(t) + "a", uniq(t) + "b", uniq(t) + "c"}
			overlaps := make([]rwOverlap, len(names))
			var failed atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			fail := func(err error) {
				failed.Store(true)
				select {
				case errs <- err:
				default: // enough errors to fail
				}
			}
			for p := range 2 {
				var l *core.Locker
				if atomicStore {
					l = newEnv(t, nil).locker
				} else {
					type oneByOne struct{ core.Store } // hides the MultiAcquirer
					l = core.NewWithStore(oneByOne{sharerOf(t)})
				}
				for g := range 2 {
					order := slices.Clone(names)
					if (p+g)%2 == 1 {
						slices.Reverse(order)
					}
					wg.Go(func() {
						for range 15 {
							if failed.Load() {
								return // one deadlock is enough to fail; do not wait out more
							}
							lease, err := l.AcquireAll(ctx, order, core.Wait(10*time.Second))
							if err != nil {
								fail(err)
								return
							}
							if got := lease.Names(); !slices.IsSorted(got) || len(got) != len(names) {
								fail(fmt.Errorf("Names() = %q, want the names in canonical order", got))
							}
							var exits []func()
							for i := range names {
								exits = append(exits, overlaps[i].enter(true))
							}
							time.Sleep(time.Millisecond)
							for _, exit := range exits {
								exit()
							}
							if err := lease.Release(ctx); err != nil {
								fail(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i := range overlaps {
				if overlaps[i].overlaps != 0 {
					t.Fatalf("name %d held twice at once %d times", i, overlaps[i].overlaps)
				}
			}
		})
	}
}

// TestAcquireAllIsAllOrNone: with one name held elsewhere, AcquireAll fails
// and leaves the others free; once free, it holds them all, with a fence
// each, and one Release frees them all.
func TestAcquireAllIsAllOrNone(t *testing.T) {
	for _, atomicStore := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomicStore), func(t *testing.T) {
			leakCheck(t)
			ctx := context.Background()
			var l *core.Locker
			if atomicStore {
				l = newEnv(t, nil, core.WithFencing()).locker
			} else {
				type oneByOne struct{ core.Store }
				l = core.NewWithStore(oneByOne{sharerOf(t)}, core.WithFencing())
			}
			other := newEnv(t, nil).locker
			a, b, c := uniq(t)+"a", uniq(t)+"b", uniq(t)+"c"
			busy, err := other.Acquire(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.AcquireAll(ctx, []string{a, b, c}, core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
				t.Fatalf("AcquireAll with %q held: %v, want ErrTimeout", c, err)
			}
			for _, n := range []string{a, b} {
				probe, err := other.Acquire(ctx, n, core.Wait(0))
				if err != nil {
					t.Fatalf("%q stayed held after the failed AcquireAll: %v", n, err)
				}
				_ = probe.Release(ctx)
			}
			_ = busy.Release(ctx)
			all, err := l.AcquireAll(ctx, []string{c, a, b, a}, core.Wait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if got := all.Names(); !slices.Equal(got, []string{a, b, c}) {
				t.Fatalf("Names() = %q, want %q", got, []string{a, b, c})
			}
			for _, n := range []string{a, b, c} {
				if all.FenceOf(n) <= 0 {
					t.Fatalf("no fence for %q", n)
				}
				if _, err := other.Acquire(ctx, n, core.Wait(0)); !errors.Is(err, core.ErrTimeout) {
					t.Fatalf("%q not held by AcquireAll: %v", n, err)
				}
			}
			select {
			case <-all.Done():
				t.Fatal("Done closed while held")
			default:
			}
			if err := all.Release(ctx); err != nil {
				t.Fatal(err)
			}
			<-all.Done()
			for _, n := range []string{a, b, c} {
				probe, err := other.Acquire(ctx, n, core.Wait(0))
				if err != nil {
					t.Fatalf("%q still held after Release: %v", n, err)
				}
				_ = probe.Release(ctx)
			}
		})
	}
}
