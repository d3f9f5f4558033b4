package kratoslock_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kerrors "github.com/go-kratos/kratos/v2/errors"
	"google.golang.org/grpc/metadata"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/kratoslock"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

// transports are the two Kratos transports every test of this file runs on.
var transports = []string{"http", "grpc"}

// doOp is the operation of the test service's Do on both transports.
const doOp = "/reqlock.kratoslock.testsvc.Test/Do"

// caller calls Do for the order id, with headers (name, value pairs), and
// returns the reply's lock; a refused call's error is a Kratos error on
// both transports (kerrors.FromError).
type caller func(ctx context.Context, id string, header ...string) (string, error)

// serveVia serves do with the middleware lock on the transport via.
func serveVia(t *testing.T, via string, do doFunc, opts ...kratoslock.Option) (caller, *adaptertest.Env) {
	t.Helper()
	e := adaptertest.NewEnv(t, nil, core.WithWait(20*time.Second), core.WithSpin(time.Millisecond, time.Millisecond))
	return serveOn(t, via, e, orderKey, do, opts...), e
}

// serveOn serves do on the transport via with the middleware of e's Locker
// and key.
func serveOn(t *testing.T, via string, e *adaptertest.Env, key keyfunc.Func, do doFunc, opts ...kratoslock.Option) caller {
	t.Helper()
	lock := mws(kratoslock.Server(e.Locker, key, opts...))
	if via == "http" {
		c := serveHTTP(t, do, lock)
		return func(ctx context.Context, id string, header ...string) (string, error) {
			a, err := c.do(ctx, "1", id, "", header...)
			if err == nil && a.Status != http.StatusOK {
				err = kerrors.New(a.Status, a.Reason, "")
			}
			return a.Lock, err
		}
	}
	c := serveGRPC(t, do, lock)
	return func(ctx context.Context, id string, header ...string) (string, error) {
		reply, err := c.Do(metadata.AppendToOutgoingContext(ctx, header...), order(id))
		if err != nil {
			return "", err
		}
		return reply.Lock, nil
	}
}

// reason returns the reason of a Kratos error, "" for nil.
func reason(err error) string {
	if err == nil {
		return ""
	}
	return kerrors.FromError(err).Reason
}

// describe answers how the request is locked: the names of its lease, its
// mode and its slot ("a,b|shared|0"), "<none>" unlocked.
func describe(ctx context.Context, _ *testsvc.Request) (*testsvc.Reply, error) {
	l := kratoslock.LeaseFromContext(ctx)
	if l == nil {
		return &testsvc.Reply{Lock: "<none>"}, nil
	}
	return &testsvc.Reply{Lock: fmt.Sprintf("%s|%s|%d", strings.Join(l.Names(), ","), l.Mode(), l.Slot())}, nil
}

// readWrite watches the critical sections of the readers and writers of one
// name: a writer beside anyone, or a reader beside a writer, is a
// violation. Each side counts itself in before it looks at the other, so
// that of two sections that overlap, at least one sees the other.
type readWrite struct {
	readers, writers atomic.Int64
	violations       atomic.Int64
}

func (rw *readWrite) read() {
	rw.readers.Add(1)
	defer rw.readers.Add(-1)
	for range 2 {
		if rw.writers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
	}
}

func (rw *readWrite) write() {
	if rw.writers.Add(1) > 1 {
		rw.violations.Add(1)
	}
	defer rw.writers.Add(-1)
	for range 2 {
		if rw.readers.Load() > 0 {
			rw.violations.Add(1)
		}
		time.Sleep(time.Millisecond)
	}
}

// concurrently runs f(i) for i in [0, n) at once and returns the errors.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// TestSharedReadersOverlapWriterAlone: requests of a middleware WithShared
// run together (three meet at a barrier inside their handlers), and a
// request of an exclusive middleware on the same names never runs beside
// any of them nor beside another writer.
func TestSharedReadersOverlapWriterAlone(t *testing.T) {
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			id := adaptertest.Uniq(t)
			var rw readWrite
			var meet atomic.Pointer[adaptertest.Barrier]
			readers, e := serveVia(t, via, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
					return nil, kerrors.New(http.StatusPreconditionFailed, "APART", "the readers did not run together")
				}
				rw.read()
				return describe(ctx, req)
			}, kratoslock.WithShared())
			writers := serveOn(t, via, e, orderKey, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				rw.write()
				return describe(ctx, req)
			})

			meet.Store(adaptertest.NewBarrier(3))
			for _, err := range concurrently(3, func(int) error {
				got, err := readers(context.Background(), id)
				if err == nil && !strings.HasSuffix(got, "|shared|0") {
					err = fmt.Errorf("the reader's lease is %q, want a shared one", got)
				}
				return err
			}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			meet.Store(nil)

			for _, err := range concurrently(12, func(i int) error {
				call := readers
				if i%3 == 0 {
					call = writers
				}
				_, err := call(context.Background(), id)
				return err
			}) {
				if err != nil {
					t.Error(err)
				}
			}
			if n := rw.violations.Load(); n != 0 {
				t.Fatalf("%d times a writer ran beside another holder", n)
			}
		})
	}
}

// TestSharedMethods: requests of the operations WithSharedMethods names
// take the names shared, the other operations' requests exclusively.
func TestSharedMethods(t *testing.T) {
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			id := adaptertest.Uniq(t)
			name := "order:" + keyfunc.Escape(id)
			reads, e := serveVia(t, via, describe, kratoslock.WithSharedMethods(doOp), kratoslock.WithWait(20*time.Millisecond))
			if got, err := reads(context.Background(), id); err != nil || got != name+"|shared|0" {
				t.Errorf("read operation: %q, %v; want a shared lease", got, err)
			}
			writes := serveOn(t, via, e, orderKey, describe, kratoslock.WithSharedMethods("/reqlock.kratoslock.testsvc.Test/Get"))
			if got, err := writes(context.Background(), id); err != nil || got != name+"|exclusive|0" {
				t.Errorf("write operation: %q, %v; want an exclusive lease", got, err)
			}

			// A writer elsewhere keeps the reads out; readers elsewhere do not.
			held := e.Hold(t, name)
			if _, err := reads(context.Background(), id); reason(err) != "REQLOCK_BUSY" {
				t.Errorf("read beside a writer: %v, want REQLOCK_BUSY", err)
			}
			if err := held.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			share, err := e.Locker.Acquire(context.Background(), name, core.Shared())
			if err != nil {
				t.Fatal(err)
			}
			defer share.Release(context.Background())
			if got, err := reads(context.Background(), id); err != nil || got != name+"|shared|0" {
				t.Errorf("read beside a reader: %q, %v; want a shared lease", got, err)
			}
		})
	}
	e := adaptertest.NewEnv(t, nil)
	for _, opts := range [][]kratoslock.Option{
		{kratoslock.WithSharedMethods()},
		{kratoslock.WithSharedMethods("")},
		{kratoslock.WithSharedIf(nil)},
		{kratoslock.WithShared(), kratoslock.WithPermits(2)},
		{kratoslock.WithPermits(0)},
		{kratoslock.WithMaxNames(0)},
	} {
		if err := kratoslock.Check(e.Locker, orderKey, opts...); err == nil || !strings.HasPrefix(err.Error(), "kratoslock: ") {
			t.Errorf("%d options: Check = %v, want a kratoslock error", len(opts), err)
		}
	}
}

// TestPermits: with WithPermits(3), three requests hold the name at once,
// in slots 0, 1 and 2; never more than three, never two in one slot; a
// fourth beside three holders elsewhere is busy.
func TestPermits(t *testing.T) {
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			id := adaptertest.Uniq(t)
			var (
				meet       atomic.Pointer[adaptertest.Barrier]
				mu         sync.Mutex
				inside     = map[int]bool{}
				violations int
			)
			call, e := serveVia(t, via, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				slot := kratoslock.LeaseFromContext(ctx).Slot()
				mu.Lock()
				if inside[slot] || len(inside) >= 3 {
					violations++
				}
				inside[slot] = true
				mu.Unlock()
				defer func() {
					mu.Lock()
					delete(inside, slot)
					mu.Unlock()
				}()
				if b := meet.Load(); b != nil && !b.Arrive(10*time.Second) {
					return nil, kerrors.New(http.StatusPreconditionFailed, "APART", "the permit holders did not run together")
				}
				time.Sleep(time.Millisecond)
				return describe(ctx, req)
			}, kratoslock.WithPermits(3))

			meet.Store(adaptertest.NewBarrier(3))
			var slots []string
			var smu sync.Mutex
			for _, err := range concurrently(3, func(int) error {
				got, err := call(context.Background(), id)
				if err == nil {
					smu.Lock()
					slots = append(slots, got[strings.LastIndexByte(got, '|')+1:])
					smu.Unlock()
				}
				return err
			}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if slices.Sort(slots); !slices.Equal(slots, []string{"0", "1", "2"}) {
				t.Errorf("slots of three holders at once: %q, want 0, 1 and 2", slots)
			}
			meet.Store(nil)

			for _, err := range concurrently(12, func(int) error {
				_, err := call(context.Background(), id)
				return err
			}) {
				if err != nil {
					t.Error(err)
				}
			}
			mu.Lock()
			n := violations
			mu.Unlock()
			if n != 0 {
				t.Fatalf("%d times a holder entered a slot in use or beside 3 others", n)
			}

			name := "order:" + keyfunc.Escape(id)
			for range 3 {
				lease, err := e.Locker.Acquire(context.Background(), name, core.Permits(3))
				if err != nil {
					t.Fatal(err)
				}
				defer lease.Release(context.Background())
			}
			busy := serveOn(t, via, e, orderKey, describe, kratoslock.WithPermits(3), kratoslock.WithWait(20*time.Millisecond))
			if _, err := busy(context.Background(), id); reason(err) != "REQLOCK_BUSY" {
				t.Fatalf("a fourth holder: %v, want REQLOCK_BUSY", err)
			}
			other := serveOn(t, via, e, orderKey, describe, kratoslock.WithPermits(5))
			if _, err := other(context.Background(), id); kerrors.FromError(err).Code != http.StatusInternalServerError {
				t.Fatalf("another n: %v, want 500 (a mode mismatch)", err)
			}
		})
	}
}

// TestSeveralNames: a key of a message field and a header (metadata, for
// gRPC) locks both names at once, all or none.
func TestSeveralNames(t *testing.T) {
	key := must(keyfunc.Templates("order:{field.order.id}", "tenant:{header.x-tenant}"))
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			adaptertest.LeakCheck(t)
			e := adaptertest.NewEnv(t, nil, core.WithWait(10*time.Second))
			id := adaptertest.Uniq(t)
			tenant := "t" + id
			names := []string{"order:" + keyfunc.Escape(id), "tenant:" + keyfunc.Escape(tenant)}
			var heldInside []bool
			call := serveOn(t, via, e, key, func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
				for _, n := range names {
					heldInside = append(heldInside, e.Exists(t, n))
				}
				return describe(ctx, req)
			}, kratoslock.WithWait(20*time.Millisecond))
			got, err := call(context.Background(), id, "x-tenant", tenant)
			if want := strings.Join(names, ",") + "|exclusive|0"; err != nil || got != want || slices.Contains(heldInside, false) || len(heldInside) != 2 {
				t.Errorf("got %q, %v (held inside: %v); want %q, both held", got, err, heldInside, want)
			}
			for _, n := range names {
				if e.Exists(t, n) {
					t.Errorf("%s still held after the request", n)
				}
			}

			// One name busy: the request fails and holds none of them.
			held := e.Hold(t, names[1])
			if _, err := call(context.Background(), id, "x-tenant", tenant); reason(err) != "REQLOCK_BUSY" {
				t.Errorf("one name busy: %v, want REQLOCK_BUSY", err)
			}
			if e.Exists(t, names[0]) {
				t.Errorf("%s left held by a request that failed", names[0])
			}
			_ = held.Release(context.Background())

			if _, err := call(context.Background(), id); reason(err) != "REQLOCK_BAD_REQUEST" {
				t.Errorf("no header: %v, want REQLOCK_BAD_REQUEST", err)
			}
			tooMany := serveOn(t, via, e, key, describe, kratoslock.WithMaxNames(1))
			if _, err := tooMany(context.Background(), id, "x-tenant", tenant); reason(err) != "REQLOCK_BAD_REQUEST" {
				t.Errorf("more names than WithMaxNames: %v, want REQLOCK_BAD_REQUEST", err)
			}
		})
	}
}
