package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/reqlock/reqlock/core"
)

// The property of the Inspect group that goes through a core.Locker built
// on the store, as an operator's tools (the reqlock command, the debug
// page) do: names instead of keys, holders identified by the record their
// tokens carry (core.ParseHolder), and ForceRelease.

// lockerRoute is the route label the property's Acquires carry.
const lockerRoute = "/storetest/:id"

// awaitState inspects name through op until ready reports true for its
// state, and returns that state; it fails the subtest if that takes more
// than 20 seconds.
func (s *suite) awaitState(op *core.Locker, name, what string, ready func(core.LockState) bool) core.LockState {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := call()
		st, err := op.Inspect(ctx, name)
		cancel()
		if err != nil {
			s.t.Fatalf("storetest: Locker.Inspect(%q): %v", name, err)
		}
		if ready(st) {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("storetest: Locker.Inspect(%q) did not show %s in 20s: last %+v", name, what, st)
		}
		time.Sleep(s.poll)
	}
}

// lockerList follows Locker.List's cursor under prefix in pages of limit
// and returns the names it listed, sorted, each once.
func (s *suite) lockerList(op *core.Locker, prefix string, limit int) []string {
	s.t.Helper()
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == maxListPages {
			s.t.Fatalf("storetest: Locker.List(%q, limit %d) handed out %d pages without a last one", prefix, limit, pages)
		}
		ctx, cancel := call()
		page, next, err := op.List(ctx, prefix, cursor, limit)
		cancel()
		if err != nil {
			s.t.Fatalf("storetest: Locker.List(%q, cursor %q, limit %d): %v", prefix, cursor, limit, err)
		}
		names = append(names, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// checkIdentified fails the subtest unless who, the holder record Inspect
// read from the token of what, is this process's, with the request id,
// route and mode the Acquire had, taken no earlier than start.
func (s *suite) checkIdentified(what string, who core.Holder, identified bool, requestID string, mode core.Mode, permits int, start time.Time) {
	s.t.Helper()
	host, _ := os.Hostname()
	switch {
	case !identified:
		s.t.Errorf("storetest: Locker.Inspect reported %s as not Identified: want it identified by the holder record its token carries (its token, as the Locker drew it, not another)", what)
	case who.Host != host || who.PID != os.Getpid() || who.RequestID != requestID || who.Route != lockerRoute || who.Mode != mode || who.Permits != permits:
		s.t.Errorf("storetest: Locker.Inspect identified %s as %q: want host %q, pid %d, request %q, route %q, %v with %d permits (the Acquire's)",
			what, who.String(), host, os.Getpid(), requestID, lockerRoute, mode, permits)
	case who.Since.Before(start.Truncate(time.Millisecond)) || who.Since.After(time.Now()):
		s.t.Errorf("storetest: Locker.Inspect reported %s as taken since %v: want a time after %v, when its Acquire began, and not in the future", what, who.Since, start)
	}
}

// lockerInspectIdentifiesHolders: through a core.Locker on the store (its
// own prefix, WithFencing), with a request id and a route on the context:
// List under a name prefix returns exactly the names held under it, and
// under "" the hashed form ("sha256:…") of a name longer than
// core.MaxNameLen too; Inspect of an exclusive hold reports one holder,
// exclusive, with the lease's token, identified as this process with the
// request id and route, a TTL left, the lease's fence (or 0) and the name's
// fence at least that; a shared hold's and a permit's holders likewise
// (core.Sharer), with their slots; the waiting writer (core.Sharer) and the
// fair queue's waiter (core.Queuer) are identified too. ForceRelease with
// a token that does not hold a name changes nothing and reports false;
// with the holder's it releases that hold alone (a share leaves the
// others), lets in who waited, and the lease's own Release then fails with
// core.ErrNotHeld. The hashed name is inspected and force-released by its
// listed form.
func lockerInspectIdentifiesHolders(s *suite) {
	sts := s.inspectors(3)
	prefix := "storetest:" + s.lockName() + ":"
	opts := []core.Option{core.WithPrefix(prefix), core.WithFencing()}
	l := s.locker(sts[0], opts...)
	w := s.locker(sts[1], opts...)
	op := s.locker(sts[2], opts...)
	_, sharer := sts[0].(core.Sharer)

	requestID := "storetest-" + random()[:8]
	base, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx := core.ContextWithRoute(core.ContextWithRequestID(base, requestID), lockerRoute)
	start := time.Now()
	take := func(l *core.Locker, name string, opts ...core.CallOption) *core.Lease {
		s.t.Helper()
		lease, err := l.Acquire(ctx, name, append([]core.CallOption{core.Wait(0)}, opts...)...)
		if err != nil {
			s.t.Fatalf("storetest: Locker.Acquire(%q) of a free name: %v", name, err)
		}
		s.t.Cleanup(func() { _ = lease.Release(context.Background()) })
		return lease
	}
	inspect := func(name string) core.LockState {
		s.t.Helper()
		return s.awaitState(op, name, "a state", func(core.LockState) bool { return true })
	}
	forceRelease := func(name, tok string) bool {
		s.t.Helper()
		ctx, cancel := call()
		defer cancel()
		ok, err := op.ForceRelease(ctx, name, tok)
		if err != nil {
			s.t.Fatalf("storetest: Locker.ForceRelease(%q): %v", name, err)
		}
		return ok
	}
	released := func(lease *core.Lease, what string) {
		s.t.Helper()
		ctx, cancel := call()
		defer cancel()
		if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
			s.t.Errorf("storetest: Release of %s, force-released by its token: %v; want core.ErrNotHeld", what, err)
		}
	}

	ex := take(l, "order:1")
	want := []string{"order:1"}
	var shares []*core.Lease
	var permit *core.Lease
	if sharer {
		shares = []*core.Lease{take(l, "order:2", core.Shared()), take(w, "order:2", core.Shared())}
		permit = take(l, "order:3", core.Permits(3))
		want = append(want, "order:2", "order:3")
	}
	take(l, "other:1")
	long := strings.Repeat("n", core.MaxNameLen+1)
	hx := take(l, long)
	hkey, err := l.Key(long)
	if err != nil {
		s.t.Fatalf("storetest: Locker.Key of a name of %d bytes: %v", len(long), err)
	}
	hashed := strings.TrimSuffix(strings.TrimPrefix(hkey, prefix+"{"), "}")

	// Listing.
	for _, limit := range []int{1, core.MaxListLimit} {
		if got := s.lockerList(op, "order:", limit); !slices.Equal(got, want) {
			s.t.Errorf("storetest: Locker.List(\"order:\") in pages of %d listed %q: want exactly the names held under it, %q", limit, got, want)
		}
	}
	all := slices.Sorted(slices.Values(append([]string{"other:1", hashed}, want...)))
	if got := s.lockerList(op, "", 2); !slices.Equal(got, all) {
		s.t.Errorf("storetest: Locker.List(\"\") in pages of 2 listed %q: want every name held, a name longer than core.MaxNameLen in its hashed form: %q", got, all)
	}

	// The exclusive holder.
	st := inspect("order:1")
	if st.Name != "order:1" || len(st.Holders) != 1 || st.Holders[0].Token != ex.Token() || !st.Holders[0].Exclusive {
		s.t.Fatalf("storetest: Locker.Inspect(\"order:1\"), held exclusively, returned %+v: want one holder, exclusive, with the lease's token %q", st, ex.Token())
	}
	h := st.Holders[0]
	s.checkIdentified("the exclusive holder of order:1", h.Holder, h.Identified, requestID, core.ModeExclusive, 0, start)
	if h.TTL <= 0 || h.TTL > storeTTL(sts[0], s.long)+s.res {
		s.t.Errorf("storetest: Locker.Inspect(\"order:1\") reported a TTL left of %v for its holder, taken with %v: want more than 0 and no more than that", h.TTL, s.long)
	}
	if h.Fence != 0 && h.Fence != ex.Fence() {
		s.t.Errorf("storetest: Locker.Inspect(\"order:1\") reported the fence %d for its holder, whose lease has the fence %d: want that fence (or 0 if the store cannot tell)", h.Fence, ex.Fence())
	}
	if st.Fence != 0 && st.Fence < ex.Fence() {
		s.t.Errorf("storetest: Locker.Inspect(\"order:1\") reported the name's last fence as %d, below its lease's %d", st.Fence, ex.Fence())
	}

	// Shares and permits.
	if sharer {
		st = inspect("order:2")
		toks := []string{shares[0].Token(), shares[1].Token()}
		if len(st.Holders) != 2 || !slices.ContainsFunc(st.Holders, func(h core.HolderInfo) bool { return h.Token == toks[0] }) ||
			!slices.ContainsFunc(st.Holders, func(h core.HolderInfo) bool { return h.Token == toks[1] }) {
			s.t.Fatalf("storetest: Locker.Inspect(\"order:2\"), held by two shared leases, returned the holders %+v: want those two, with the tokens %q", st.Holders, toks)
		}
		for _, h := range st.Holders {
			if h.Exclusive || h.Hold != (core.Hold{}) {
				s.t.Errorf("storetest: Locker.Inspect(\"order:2\") reported the shared holder %+v: want a share of the hold shared", h.HolderState)
			}
			s.checkIdentified(fmt.Sprintf("the shared holder %q of order:2", h.Token), h.Holder, h.Identified, requestID, core.ModeShared, 0, start)
		}
		st = inspect("order:3")
		if len(st.Holders) != 1 || st.Holders[0].Token != permit.Token() || st.Holders[0].Hold != (core.Hold{N: 3}) || st.Holders[0].Slot != permit.Slot() {
			s.t.Fatalf("storetest: Locker.Inspect(\"order:3\"), held by a lease of 3 permits in slot %d, returned the holders %+v: want that one, with the token %q", permit.Slot(), st.Holders, permit.Token())
		}
		h := st.Holders[0]
		s.checkIdentified("the permit holder of order:3", h.Holder, h.Identified, requestID, core.ModePermits, 3, start)
	}

	// ForceRelease of the exclusive hold.
	if forceRelease("order:1", token()) {
		s.t.Errorf("storetest: Locker.ForceRelease(\"order:1\") with a token that does not hold it reported true")
	}
	if st = inspect("order:1"); len(st.Holders) != 1 || st.Holders[0].Token != ex.Token() {
		s.t.Fatalf("storetest: after a ForceRelease with another token, Locker.Inspect(\"order:1\") returned the holders %+v: want its holder %q still", st.Holders, ex.Token())
	}
	if !forceRelease("order:1", ex.Token()) {
		s.t.Errorf("storetest: Locker.ForceRelease(\"order:1\") with its holder's token reported false")
	}
	if st = inspect("order:1"); st.Held() {
		s.t.Errorf("storetest: after a ForceRelease with its holder's token, Locker.Inspect(\"order:1\") returned the holders %+v: want none", st.Holders)
	}
	released(ex, "order:1")

	// The hashed name, by its listed form.
	if st = inspect(hashed); st.Name != hashed || len(st.Holders) != 1 || st.Holders[0].Token != hx.Token() || !st.Holders[0].Identified {
		s.t.Errorf("storetest: Locker.Inspect(%q), the listed form of a name of %d bytes, returned %+v: want its holder %q, identified", hashed, len(long), st, hx.Token())
	}
	if !forceRelease(hashed, hx.Token()) {
		s.t.Errorf("storetest: Locker.ForceRelease(%q), the listed form of a held name, with its holder's token reported false", hashed)
	}
	released(hx, "a name longer than core.MaxNameLen")
	if got := s.lockerList(op, "", core.MaxListLimit); slices.Contains(got, hashed) {
		s.t.Errorf("storetest: Locker.List(\"\") listed %q after it was force-released: %q", hashed, got)
	}

	if sharer {
		// ForceRelease of one share, then the writer waiting for the other.
		if !forceRelease("order:2", shares[0].Token()) {
			s.t.Errorf("storetest: Locker.ForceRelease(\"order:2\") with a share's token reported false")
		}
		if st = inspect("order:2"); len(st.Holders) != 1 || st.Holders[0].Token != shares[1].Token() {
			s.t.Fatalf("storetest: after a ForceRelease of one of two shares, Locker.Inspect(\"order:2\") returned the holders %+v: want the other, %q, alone", st.Holders, shares[1].Token())
		}
		released(shares[0], "a share of order:2")
		wid := "storetest-writer-" + random()[:8]
		got := s.waitFor(func(ctx context.Context) (*core.Lease, error) {
			return l.Acquire(core.ContextWithRoute(core.ContextWithRequestID(ctx, wid), lockerRoute), "order:2", core.Wait(s.long))
		})
		wstart := time.Now()
		st = s.awaitState(op, "order:2", "a waiting writer", func(st core.LockState) bool { return st.Writer != nil })
		s.checkIdentified("the writer waiting for order:2", st.Writer.Holder, st.Writer.Identified, wid, core.ModeExclusive, 0, start)
		if !forceRelease("order:2", shares[1].Token()) {
			s.t.Errorf("storetest: Locker.ForceRelease(\"order:2\") with its last share's token reported false")
		}
		s.waited(got, "the writer of order:2, after its last share was force-released", wstart)
		released(shares[1], "the last share of order:2")
	}

	if _, ok := sts[0].(core.Queuer); ok {
		fl := s.locker(sts[0], append(opts, core.WithFair())...)
		fw := s.locker(sts[1], append(opts, core.WithFair())...)
		holder := take(fl, "fair:1")
		wid := "storetest-waiter-" + random()[:8]
		got := s.waitFor(func(ctx context.Context) (*core.Lease, error) {
			return fw.Acquire(core.ContextWithRoute(core.ContextWithRequestID(ctx, wid), lockerRoute), "fair:1", core.Wait(s.long))
		})
		wstart := time.Now()
		st = s.awaitState(op, "fair:1", "a waiter in its fair queue", func(st core.LockState) bool { return len(st.Waiters) > 0 })
		if len(st.Holders) != 1 || st.Holders[0].Token != holder.Token() {
			s.t.Errorf("storetest: Locker.Inspect(\"fair:1\") with a waiter returned the holders %+v: want its holder %q", st.Holders, holder.Token())
		}
		wi := st.Waiters[0]
		s.checkIdentified("the waiter of fair:1", wi.Holder, wi.Identified, wid, core.ModeExclusive, 0, start)
		if !forceRelease("fair:1", holder.Token()) {
			s.t.Errorf("storetest: Locker.ForceRelease(\"fair:1\") with its holder's token reported false")
		}
		s.waited(got, "the waiter of fair:1, after its holder was force-released", wstart)
		released(holder, "fair:1")
	}
}

// acquired is the outcome of an Acquire run by waitFor.
type acquired struct {
	lease *core.Lease
	err   error
}

// waitFor runs acquire on a goroutine of its own, with a context cancelled
// when the subtest ends (the goroutine is waited for then), and returns
// where its outcome comes; a lease it takes is released when the subtest
// ends.
func (s *suite) waitFor(acquire func(ctx context.Context) (*core.Lease, error)) <-chan acquired {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan acquired, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lease, err := acquire(ctx)
		out <- acquired{lease, err}
	}()
	s.t.Cleanup(func() {
		cancel()
		<-done
		select {
		case a := <-out: // not taken by waited: the subtest failed before
			if a.lease != nil {
				_ = a.lease.Release(context.Background())
			}
		default:
		}
	})
	return out
}

// waited fails the subtest unless the Acquire of what (waitFor) takes its
// name within 20 seconds of since.
func (s *suite) waited(got <-chan acquired, what string, since time.Time) {
	s.t.Helper()
	select {
	case a := <-got:
		if a.err != nil {
			s.t.Fatalf("storetest: the Acquire of %s: %v", what, a.err)
		}
		ctx, cancel := call()
		defer cancel()
		if err := a.lease.Release(ctx); err != nil {
			s.t.Errorf("storetest: Release of the lease of %s: %v", what, err)
		}
	case <-time.After(time.Until(since.Add(20 * time.Second))):
		s.t.Fatalf("storetest: the Acquire of %s did not take it in 20s", what)
	}
}
