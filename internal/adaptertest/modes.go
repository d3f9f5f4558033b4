package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/keyfunc"
)

// Route is one route of the lock-mode scenarios (RunModes), which an HTTP
// adapter's test registers behind its middleware.
type Route struct {
	// Methods are the HTTP methods the route serves, all behind one
	// middleware.
	Methods []string
	// Path is the route's path as ServeMux writes it, "/orders/{id}";
	// ColonPath gives the "/orders/:id" of gin and Echo.
	Path string
	// Key is the middleware's key.
	Key keyfunc.Func
	// Mode is how the route locks: the middleware's options.
	Mode Mode
	// Handle is the handler's work, given the request the handler sees
	// (whose context carries the lease); the handler then answers 200.
	Handle func(r *http.Request)
}

// Mode is a route's lock options, which the adapter's test turns into its
// own: every option that is set is given, so that a Mode that sets two
// modes makes the set-up fail.
type Mode struct {
	Wait        time.Duration // WithWait(Wait), always given
	Shared      bool          // WithShared()
	SharedReads bool          // WithSharedReads()
	Permits     int           // WithPermits(Permits), when not 0
	MaxNames    int           // WithMaxNames(MaxNames), when not 0
	// RequestIDHeader gives WithRequestIDHeader(RequestIDHeader), when
	// not "".
	RequestIDHeader string
}

// Serve builds an adapter's handler of routes on the Locker l, or returns
// the set-up error of the adapter's Check.
type Serve func(t *testing.T, l *core.Locker, routes []Route) (http.Handler, error)

// ColonPath turns a ServeMux path ("/orders/{id}") into gin's and Echo's
// ("/orders/:id").
func ColonPath(p string) string {
	return strings.NewReplacer("{", ":", "}", "").Replace(p)
}

// wait is the wait budget of the scenarios' routes: long, so that a
// request waits for its names however loaded the machine is. A request
// that deadlocks holds out for all of it and is answered 409.
const wait = 20 * time.Second

// patience bounds every wait of the scenarios for an event that must come.
const patience = 10 * time.Second

// RunModes runs the lock-mode scenarios on a real redis-server (Shared)
// against the handler that serve builds: shared reads beside exclusive
// writes, numbered permits, keys of several names, crossing orders, and
// the options' checks, and the holder record of a request's lock (its
// route and request id). Each adapter's tests call it with their Serve.
func RunModes(t *testing.T, serve Serve) {
	t.Run("SharedReads", func(t *testing.T) { sharedReads(t, serve) })
	t.Run("Permits", func(t *testing.T) { permits(t, serve) })
	t.Run("SeveralNames", func(t *testing.T) { severalNames(t, serve) })
	t.Run("CrossingOrders", func(t *testing.T) { crossingOrders(t, serve) })
	t.Run("BadOptions", func(t *testing.T) { badOptions(t, serve) })
	t.Run("NameBounds", func(t *testing.T) { nameBounds(t, serve) })
	t.Run("HolderIdentity", func(t *testing.T) { holderIdentity(t, serve) })
}

// modeEnv builds a Locker that tells when Acquires begin, and the handler
// of routes on it.
func modeEnv(t *testing.T, serve Serve, routes ...Route) (*Starts, http.Handler) {
	t.Helper()
	LeakCheck(t)
	starts := NewStarts()
	env := NewEnv(t, nil, core.WithTTL(10*time.Second), core.WithObservers(starts))
	h, err := serve(t, env.Locker, routes)
	if err != nil {
		t.Fatal(err)
	}
	return starts, h
}

// Call sends a request to h, with the headers of header (name, value,
// ...), and returns the response.
func Call(h http.Handler, method, target, body string, header ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// request is a request of the scenarios: its method, target and body, and
// the names it must hold (sent in the header X-Names, comma-separated, for
// the handler to check).
type request struct {
	method, target, body string
	names                []string
}

// call sends r to h.
func (r request) call(h http.Handler) int {
	return Call(h, r.method, r.target, r.body, "X-Names", strings.Join(r.names, ",")).Code
}

// calls sends the requests at once and returns the answers' statuses in
// their order.
func calls(h http.Handler, reqs ...request) []int {
	codes := make([]int, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { codes[i] = r.call(h) })
	}
	wg.Wait()
	return codes
}

// allOK fails the test for every status that is not 200.
func allOK(t *testing.T, what string, codes []int) {
	t.Helper()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("%s: request %d answered %d, want 200", what, i, c)
		}
	}
}

// await waits for ch, failing the test after patience.
func await(t *testing.T, ch <-chan struct{}, what string) bool {
	t.Helper()
	select {
	case <-ch:
		return true
	case <-time.After(patience):
		t.Errorf("%s did not happen within %v", what, patience)
		return false
	}
}

// RW detects overlaps of readers and writers of one resource: a writer
// that enters beside anyone, a reader beside a writer. It also records the
// most readers inside at once.
type RW struct {
	mu         sync.Mutex
	readers    int
	writers    int
	maxReaders int
	entries    int
	violations []string
}

// Enter marks the start of a critical section, a write or a read, and
// returns its end.
func (d *RW) Enter(write bool) (exit func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.entries++
	switch {
	case write && (d.readers > 0 || d.writers > 0):
		d.violations = append(d.violations, fmt.Sprintf("a writer entered beside %d readers and %d writers", d.readers, d.writers))
	case !write && d.writers > 0:
		d.violations = append(d.violations, fmt.Sprintf("a reader entered beside %d writers", d.writers))
	}
	if write {
		d.writers++
	} else {
		d.readers++
		d.maxReaders = max(d.maxReaders, d.readers)
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if write {
			d.writers--
		} else {
			d.readers--
		}
	}
}

// Check fails the test for every overlap seen.
func (d *RW) Check(t *testing.T, what string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, v := range d.violations {
		t.Errorf("%s: %s", what, v)
	}
}

// MaxReaders returns the most readers that were inside at once.
func (d *RW) MaxReaders() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxReaders
}

// sharedReads: under WithSharedReads, GET requests of one name run
// together (they meet at a barrier, which needs all of them inside at
// once), a POST that comes while they hold the name waits until they have
// left, and under load no writer ever overlaps anyone.
func sharedReads(t *testing.T, serve Serve) {
	var d RW
	readers := 3
	meet := NewBarrier(readers)
	var gate chan struct{} // while not nil, readers hold on until it closes
	var gateMu sync.Mutex
	var bad []string
	var badMu sync.Mutex
	note := func(format string, args ...any) {
		badMu.Lock()
		defer badMu.Unlock()
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	starts, h := modeEnv(t, serve, Route{
		Methods: []string{http.MethodGet, http.MethodHead, http.MethodPost},
		Path:    "/orders/{id}",
		Key:     mustTemplate("order:{param.id}"),
		Mode:    Mode{Wait: wait, SharedReads: true},
		Handle: func(r *http.Request) {
			write := r.Method != http.MethodGet && r.Method != http.MethodHead
			want := core.ModeShared
			if write {
				want = core.ModeExclusive
			}
			if mode := core.LeaseFromContext(r.Context()).Mode(); mode != want {
				note("a %s request holds its name in mode %v", r.Method, mode)
			}
			defer d.Enter(write)()
			gateMu.Lock()
			g := gate
			gateMu.Unlock()
			if !write && g != nil {
				if !meet.Arrive(patience) {
					note("the readers did not hold the name together")
					return
				}
				select {
				case <-g:
				case <-time.After(patience):
					note("the writer did not begin its Acquire while the readers held the name")
				}
			}
			time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
		},
	})
	id := idOf(t)
	name, target := "order:"+id, "/orders/"+id

	// Readers hold the name together; a writer comes and waits.
	gate = make(chan struct{})
	var wg sync.WaitGroup
	codes := make([]int, readers+1)
	for i := range readers {
		wg.Go(func() { codes[i] = Call(h, http.MethodGet, target, "").Code })
	}
	if await(t, meet.all, "the readers' meeting") {
		wg.Go(func() { codes[readers] = Call(h, http.MethodPost, target, "").Code })
		if await(t, starts.Reached(name, core.ModeExclusive, 1), "the writer's Acquire") {
			close(gate)
		}
	}
	wg.Wait()
	allOK(t, "readers and a writer", codes)
	if d.MaxReaders() < readers {
		t.Errorf("at most %d readers held the name at once, want %d", d.MaxReaders(), readers)
	}
	gateMu.Lock()
	gate = nil
	gateMu.Unlock()

	// Under load: readers may overlap, a writer overlaps none.
	var reqs []request
	for i := range 16 {
		m := http.MethodGet
		switch i % 4 {
		case 1:
			m = http.MethodPost
		case 3:
			m = http.MethodHead
		}
		reqs = append(reqs, request{method: m, target: target})
	}
	allOK(t, "mixed reads and writes", calls(h, reqs...))
	d.Check(t, "shared reads")
	for _, b := range bad {
		t.Error(b)
	}
}

// permits: under WithPermits(n), n requests hold the name at once, each in
// its own slot, 0 to n-1, that the handler reads from its lease; one more
// waits until one of them leaves; under load there are never more than n
// inside, and no two of them in one slot.
func permits(t *testing.T, serve Serve) {
	const n = 3
	var mu sync.Mutex
	inside, most := 0, 0
	busy := make([]bool, n)
	var bad []string
	meet := NewBarrier(n)
	var gate chan struct{}
	starts, h := modeEnv(t, serve, Route{
		Methods: []string{http.MethodPost},
		Path:    "/stock/{id}",
		Key:     mustTemplate("stock:{param.id}"),
		Mode:    Mode{Wait: wait, Permits: n},
		Handle: func(r *http.Request) {
			lease := core.LeaseFromContext(r.Context())
			slot := lease.Slot()
			mu.Lock()
			switch {
			case lease.Mode() != core.ModePermits || lease.Permits() != n:
				bad = append(bad, fmt.Sprintf("a lease in mode %v with %d permits", lease.Mode(), lease.Permits()))
			case slot < 0 || slot >= n:
				bad = append(bad, fmt.Sprintf("slot %d out of 0..%d", slot, n-1))
			case busy[slot]:
				bad = append(bad, fmt.Sprintf("two requests in slot %d at once", slot))
			default:
				busy[slot] = true
			}
			inside++
			most = max(most, inside)
			if inside > n {
				bad = append(bad, fmt.Sprintf("%d requests inside at once, more than %d permits", inside, n))
			}
			g := gate
			mu.Unlock()
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				inside--
				if slot >= 0 && slot < n {
					busy[slot] = false
				}
			}()
			if g != nil && meet.Arrive(patience) {
				select {
				case <-g:
				case <-time.After(patience):
					mu.Lock()
					bad = append(bad, "one more request did not begin its Acquire while the permits were held")
					mu.Unlock()
				}
			}
			time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
		},
	})
	id := idOf(t)
	target, name := "/stock/"+id, "stock:"+id

	// n requests hold the name at once, in n slots; one more waits.
	g := make(chan struct{})
	gate = g
	var wg sync.WaitGroup
	codes := make([]int, n+1)
	for i := range n {
		wg.Go(func() { codes[i] = Call(h, http.MethodPost, target, "").Code })
	}
	if await(t, meet.all, "the meeting of the permits' holders") {
		wg.Go(func() { codes[n] = Call(h, http.MethodPost, target, "").Code })
		if await(t, starts.Reached(name, core.ModePermits, n+1), "the Acquire of one more request") {
			mu.Lock()
			gate = nil // for the one more request, which enters once a holder leaves
			mu.Unlock()
			close(g)
		}
	}
	wg.Wait()
	allOK(t, "n holders and one more", codes)
	if most != n {
		t.Errorf("at most %d requests held the name at once, want %d", most, n)
	}

	// Under load.
	var reqs []request
	for range 4 * n {
		reqs = append(reqs, request{method: http.MethodPost, target: target})
	}
	allOK(t, "permits under load", calls(h, reqs...))
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
}

// severalNames: a key of two names (a transfer's two path parameters, a
// body's array of ids) takes both: while such a request holds them, a
// request for either name waits, and enters only once the names are
// released; the handler's lease names both.
func severalNames(t *testing.T, serve Serve) {
	a, b := idOf(t), idOf(t)
	names := []string{"order:" + a, "order:" + b}
	slices.Sort(names)
	per := map[string]*redistest.Overlap{names[0]: {}, names[1]: {}}
	var gate chan struct{}
	var mu sync.Mutex
	var bad []string
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	entered := make(chan struct{}, 1)
	handle := func(r *http.Request) {
		want := holds(r, note)
		for _, n := range want {
			defer per[n].Enter()()
		}
		mu.Lock()
		g := gate
		mu.Unlock()
		if len(want) > 1 && g != nil {
			entered <- struct{}{}
			select {
			case <-g:
			case <-time.After(patience):
				note("the requests for one name did not begin their Acquires while the names were held")
			}
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
	}
	starts, h := modeEnv(t, serve,
		Route{Methods: []string{http.MethodPost}, Path: "/transfer/{from}/{to}", Key: mustTemplates("order:{param.from}", "order:{param.to}"), Mode: Mode{Wait: wait}, Handle: handle},
		Route{Methods: []string{http.MethodPost}, Path: "/batch", Key: mustTemplates("order:{field.ids[*]}"), Mode: Mode{Wait: wait}, Handle: handle},
		Route{Methods: []string{http.MethodPost}, Path: "/orders/{id}", Key: mustTemplates("order:{param.id}"), Mode: Mode{Wait: wait}, Handle: handle},
	)
	ids, _ := json.Marshal(map[string][]string{"ids": {b, a}})
	for round, multi := range []request{
		{http.MethodPost, "/transfer/" + a + "/" + b, "", names},
		{http.MethodPost, "/batch", string(ids), names},
	} {
		g := make(chan struct{})
		mu.Lock()
		gate = g
		mu.Unlock()
		var wg sync.WaitGroup
		codes := make([]int, 3)
		wg.Go(func() { codes[0] = multi.call(h) })
		select {
		case <-entered:
			mu.Lock()
			gate = nil // for the requests for one name, which enter once the names are released
			mu.Unlock()
			wg.Go(func() { codes[1] = request{http.MethodPost, "/orders/" + a, "", []string{"order:" + a}}.call(h) })
			wg.Go(func() { codes[2] = request{http.MethodPost, "/orders/" + b, "", []string{"order:" + b}}.call(h) })
			// Each name: the request of two names began one Acquire, then
			// the request for that name one, in each round.
			if await(t, starts.Reached(names[0], core.ModeExclusive, 2*(round+1)), "the Acquire of "+names[0]) &&
				await(t, starts.Reached(names[1], core.ModeExclusive, 2*(round+1)), "the Acquire of "+names[1]) {
				close(g)
			}
		case <-time.After(patience):
			t.Errorf("%s: the request of two names did not enter", multi.target)
		}
		wg.Wait()
		allOK(t, multi.target+" and a request for each of its names", codes)
	}
	for n, o := range per {
		if o.Entries() != 4 || o.Overlaps() != 0 {
			t.Errorf("%s: %d requests, %d overlapped; want 4 without overlaps", n, o.Entries(), o.Overlaps())
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// crossingOrders: requests that list the same two names in opposite
// orders (/transfer/a/b and /transfer/b/a, bodies [a, b] and [b, a]) all
// get through, none beside another: were the names taken one by one in
// the order given, two of them would hold one name each and wait for the
// other's until their wait ran out (409).
func crossingOrders(t *testing.T, serve Serve) {
	a, b := idOf(t), idOf(t)
	names := []string{"order:" + a, "order:" + b}
	slices.Sort(names)
	per := map[string]*redistest.Overlap{names[0]: {}, names[1]: {}}
	var mu sync.Mutex
	var bad []string
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		bad = append(bad, fmt.Sprintf(format, args...))
	}
	handle := func(r *http.Request) {
		for _, n := range holds(r, note) {
			defer per[n].Enter()()
		}
		time.Sleep(time.Millisecond) // room for an overlap, were the lock broken
	}
	_, h := modeEnv(t, serve,
		Route{Methods: []string{http.MethodPost}, Path: "/transfer/{from}/{to}", Key: mustTemplates("order:{param.from}", "order:{param.to}"), Mode: Mode{Wait: wait}, Handle: handle},
		Route{Methods: []string{http.MethodPost}, Path: "/batch", Key: mustTemplates("order:{field.ids[*]}"), Mode: Mode{Wait: wait}, Handle: handle},
	)
	ab, _ := json.Marshal(map[string][]string{"ids": {a, b}})
	ba, _ := json.Marshal(map[string][]string{"ids": {b, a}})
	var reqs []request
	for range 8 {
		reqs = append(reqs,
			request{http.MethodPost, "/transfer/" + a + "/" + b, "", names},
			request{http.MethodPost, "/transfer/" + b + "/" + a, "", names},
			request{http.MethodPost, "/batch", string(ab), names},
			request{http.MethodPost, "/batch", string(ba), names})
	}
	allOK(t, "crossing orders", calls(h, reqs...))
	for n, o := range per {
		if o.Entries() != int64(len(reqs)) || o.Overlaps() != 0 {
			t.Errorf("%s: %d requests, %d overlapped; want %d without overlaps", n, o.Entries(), o.Overlaps(), len(reqs))
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// holds returns the names r must hold (its X-Names), and notes when its
// lease does not cover exactly them.
func holds(r *http.Request, note func(format string, args ...any)) []string {
	want := strings.Split(r.Header.Get("X-Names"), ",")
	slices.Sort(want)
	got := slices.Sorted(slices.Values(core.LeaseFromContext(r.Context()).Names()))
	if !slices.Equal(got, want) {
		note("%s %s: the lease names %q, want %q", r.Method, r.URL.Path, got, want)
	}
	return want
}

// badOptions: a bad n of WithPermits, two modes on one route and a bad
// WithMaxNames are set-up errors that name the option.
func badOptions(t *testing.T, serve Serve) {
	env := NewEnv(t, nil)
	for _, tc := range []struct {
		mode Mode
		want string
	}{
		{Mode{Permits: -1}, "WithPermits(-1): n must be between 1 and"},
		{Mode{Permits: core.MaxPermits + 1}, fmt.Sprintf("WithPermits(%d)", core.MaxPermits+1)},
		{Mode{Shared: true, Permits: 2}, "WithPermits(2): the route's lock mode is already chosen by WithShared"},
		{Mode{Shared: true, SharedReads: true}, "WithSharedReads: the route's lock mode is already chosen by WithShared"},
		{Mode{MaxNames: -1}, "WithMaxNames(-1): must be between 1 and"},
		{Mode{RequestIDHeader: "X Request"}, `WithRequestIDHeader("X Request"): not a valid header name`},
	} {
		h, err := serve(t, env.Locker, []Route{{Methods: []string{http.MethodPost}, Path: "/x/{id}", Key: keyfunc.Param("id"), Mode: tc.mode, Handle: func(*http.Request) {}}})
		if h != nil || !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an ErrInvalidOption saying %q", tc.mode, err, tc.want)
		}
	}
}

// nameBounds: a key's names are bounded (WithMaxNames), an empty item or
// array is missing (400, as a missing part), and repeats collapse into one
// name, which is then taken alone.
func nameBounds(t *testing.T, serve Serve) {
	a, b := idOf(t), idOf(t)
	var mu sync.Mutex
	var got [][]string
	_, h := modeEnv(t, serve, Route{
		Methods: []string{http.MethodPost}, Path: "/batch", Key: mustTemplates("order:{field.ids[*]}"), Mode: Mode{Wait: wait, MaxNames: 2},
		Handle: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, core.LeaseFromContext(r.Context()).Names())
		},
	})
	for _, tc := range []struct {
		ids  []string
		code int
		want string
	}{
		{[]string{a, b, "c"}, http.StatusBadRequest, "more than 2 names"},
		{[]string{a, ""}, http.StatusBadRequest, `field \"ids[*]\": item 1 is empty`},
		{[]string{}, http.StatusBadRequest, "no items"},
		{[]string{a, a}, http.StatusOK, ""},
	} {
		body, _ := json.Marshal(map[string][]string{"ids": tc.ids})
		w := Call(h, http.MethodPost, "/batch", string(body))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("ids %q: %d %s; want %d saying %s", tc.ids, w.Code, w.Body, tc.code, tc.want)
		}
	}
	if len(got) != 1 || !slices.Equal(got[0], []string{"order:" + a}) {
		t.Errorf("the handler's leases named %q; want one lease of order:%s", got, a)
	}
}

// Starts is a core.StartObserver that counts the Acquires begun per name and
// mode, so that a test can wait until a request waits for a name (it began
// its Acquire) without timing assertions.
type Starts struct {
	mu    sync.Mutex
	n     map[string]int
	waits []startWait
}

type startWait struct {
	key string
	n   int
	ch  chan struct{}
}

// NewStarts returns an empty Starts.
func NewStarts() *Starts { return &Starts{n: map[string]int{}} }

func startKey(name string, mode core.Mode) string { return mode.String() + " " + name }

// ObserveStart counts an Acquire that begins.
func (s *Starts) ObserveStart(_ context.Context, e core.StartEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := startKey(e.Name, e.Mode)
	s.n[k]++
	kept := s.waits[:0]
	for _, w := range s.waits {
		if w.key == k && s.n[k] >= w.n {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	s.waits = kept
}

// ObserveAcquire is told of the end of an Acquire; it has nothing to do.
func (s *Starts) ObserveAcquire(context.Context, core.AcquireEvent) core.LeaseObserver { return nil }

// Reached returns a channel closed once n Acquires of name in mode have
// begun.
func (s *Starts) Reached(name string, mode core.Mode, n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	k := startKey(name, mode)
	if s.n[k] >= n {
		close(ch)
		return ch
	}
	s.waits = append(s.waits, startWait{k, n, ch})
	return ch
}

// idOf returns a fresh id for the test's names, fit for a URL path: no
// other test holds it.
func idOf(*testing.T) string {
	return fmt.Sprintf("o%d", seq.Add(1))
}

func mustTemplate(t string) keyfunc.Func { return mustTemplates(t) }

func mustTemplates(ts ...string) keyfunc.Func {
	k, err := keyfunc.Templates(ts...)
	if err != nil {
		panic(err)
	}
	return k
}
