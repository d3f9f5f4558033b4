package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// TestCommandsOnEveryStore takes locks with a real Locker on each store —
// an exclusive one (with a waiter in the fair queue where the store is a
// Queuer), two shared holds and a permit — and runs ls, show, watch and
// release on them as an operator would, checking what each prints (text
// and --json) and that release --force releases only the token it showed:
// never after a refused confirmation, never another holder's.
func TestCommandsOnEveryStore(t *testing.T) {
	for _, sc := range storeCases {
		t.Run(sc.name, func(t *testing.T) {
			sc.launch(t)
			testmain.LeakCheck(t)
			url, store := sc.setup(t)
			if _, ok := store.(core.Inspector); !ok {
				t.Fatalf("the %s store is not a core.Inspector", sc.name)
			}
			commandsOn(t, url, store)
		})
	}
}

// fixture is the locks a test holds, and how it runs the command on them.
type fixture struct {
	t      *testing.T
	url    string
	locker *core.Locker // shared holds and permits
	excl   *core.Locker // exclusive holds: WithFair where the store is a Queuer
	audit  string
	mu     sync.Mutex
	leases []*core.Lease
}

// cmd runs reqlock with the store's URL.
func (f *fixture) cmd(stdin string, args ...string) result {
	f.t.Helper()
	return reqlock(f.t, strings.NewReader(stdin), nil, append(args, "--store", f.url, "--timeout", "20s")...)
}

// acquire takes name with l and releases it, if still held, when the test
// ends.
func (f *fixture) acquire(ctx context.Context, l *core.Locker, name string, opts ...core.CallOption) *core.Lease {
	f.t.Helper()
	lease, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		f.t.Fatalf("acquire %s: %v", name, err)
	}
	f.keep(lease)
	return lease
}

func (f *fixture) keep(l *core.Lease) {
	f.mu.Lock()
	f.leases = append(f.leases, l)
	f.mu.Unlock()
}

// state inspects name through the test's own Locker.
func (f *fixture) state(name string) core.LockState {
	f.t.Helper()
	st, err := f.locker.Inspect(context.Background(), name)
	if err != nil {
		f.t.Fatalf("inspect %s: %v", name, err)
	}
	return st
}

// tokens returns the tokens of name's holders, sorted.
func (f *fixture) tokens(name string) []string {
	f.t.Helper()
	var out []string
	for _, h := range f.state(name).Holders {
		out = append(out, h.Token)
	}
	slices.Sort(out)
	return out
}

// auditLines returns the records of the audit log.
func (f *fixture) auditLines() []auditJSON {
	f.t.Helper()
	data, err := os.ReadFile(f.audit)
	if err != nil {
		f.t.Fatalf("the audit log: %v", err)
	}
	var recs []auditJSON
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		var r auditJSON
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			f.t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// readerFunc is an io.Reader that runs a function at its first read: a
// test's way to act between the command's question and its answer.
type readerFunc struct {
	once   sync.Once
	before func()
	r      *strings.Reader
}

func (r *readerFunc) Read(p []byte) (int, error) {
	r.once.Do(r.before)
	return r.r.Read(p)
}

// commandsOn runs the scenario of TestCommandsOnEveryStore on one store.
func commandsOn(t *testing.T, url string, store core.Store) {
	ctx := context.Background()
	_, fair := store.(core.Queuer)
	opts := []core.Option{core.WithTTL(30 * time.Second), core.WithWait(30 * time.Second), core.WithFencing()}
	f := &fixture{t: t, url: url, locker: core.NewWithStore(store, opts...), audit: filepath.Join(t.TempDir(), "audit.log")}
	f.excl = f.locker
	if fair {
		f.excl = core.NewWithStore(store, append(opts, core.WithFair())...)
	}
	for _, l := range []*core.Locker{f.locker, f.excl} {
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, l := range f.leases {
			_ = l.Release(context.Background())
		}
		_ = f.locker.Close()
		_ = f.excl.Close()
	})
	p := uniq(t)
	order, stock, pool := p+"order:42", p+"stock:7", p+"pool"
	before := time.Now().Add(-time.Second)
	held := f.acquire(ctx, f.excl, order, core.Route("/orders/:id"), core.RequestID("req-42"))
	shareA := f.acquire(ctx, f.locker, stock, core.Shared(), core.Route("/stock/:sku"), core.RequestID("read-1"))
	shareB := f.acquire(ctx, f.locker, stock, core.Shared(), core.Route("/stock/:sku"), core.RequestID("read-2"))
	permit := f.acquire(ctx, f.locker, pool, core.Permits(3), core.RequestID("buy-1"))
	host, _ := os.Hostname()

	// A waiter in the fair queue, where the store keeps one.
	waiter := make(chan *core.Lease, 1)
	if fair {
		go func() {
			l, err := f.excl.Acquire(ctx, order, core.Route("/orders/:id/pay"), core.RequestID("req-43"))
			if err != nil {
				t.Errorf("the fair waiter: %v", err)
				close(waiter)
				return
			}
			f.keep(l)
			waiter <- l
		}()
		deadline := time.Now().Add(20 * time.Second)
		for len(f.state(order).Waiters) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the fair waiter is not in the queue after 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// ls: the names under the prefix, sorted; in pages of one too.
	want := []string{order, pool, stock}
	for _, limit := range []string{"100", "1"} {
		r := f.cmd("", "ls", p, "--limit", limit)
		if r.code != 0 || strings.Fields(r.stdout) == nil || !slices.Equal(strings.Fields(r.stdout), want) {
			t.Fatalf("ls %s --limit %s: want %q\n%v", p, limit, want, r)
		}
	}
	r := f.cmd("", "ls", p, "--json")
	var ls lsJSON
	if err := json.Unmarshal([]byte(r.stdout), &ls); r.code != 0 || err != nil || !slices.Equal(ls.Names, want) || !ls.Complete || ls.Next != "" || ls.Prefix != p {
		t.Fatalf("ls --json: %+v (%v)\n%v", ls, err, r)
	}
	// Stopped by --max, a listing goes on from the cursor it printed; the
	// two cover every name.
	r = f.cmd("", "ls", p, "--limit", "1", "--max", "1", "--json")
	ls = lsJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &ls); r.code != 0 || err != nil || len(ls.Names) == 0 || ls.Complete != (ls.Next == "") {
		t.Fatalf("ls --limit 1 --max 1 --json: %+v (%v)\n%v", ls, err, r)
	}
	seen := slices.Clone(ls.Names)
	t.Logf("ls --limit 1 --max 1: %d names, cursor %q", len(ls.Names), ls.Next)
	if ls.Next != "" {
		if !strings.Contains(r.stderr, "--cursor "+ls.Next) {
			t.Errorf("ls stopped by --max does not say how to go on:\n%v", r)
		}
		r = f.cmd("", "ls", p, "--cursor", ls.Next, "--json")
		ls = lsJSON{}
		if err := json.Unmarshal([]byte(r.stdout), &ls); r.code != 0 || err != nil || !ls.Complete {
			t.Fatalf("ls --cursor: %+v (%v)\n%v", ls, err, r)
		}
		seen = append(seen, ls.Names...)
	}
	slices.Sort(seen)
	if seen = slices.Compact(seen); !slices.Equal(seen, want) {
		t.Errorf("ls --max 1, then from its cursor: %q, want %q", seen, want)
	}
	if r := f.cmd("", "ls", p+"nothing"); r.code != 0 || r.stdout != "" {
		t.Fatalf("ls of a prefix nothing holds:\n%v", r)
	}
	r = f.cmd("", "ls", "-l", p)
	t.Logf("ls -l %s:\n%s", p, r.stdout)
	for _, s := range []string{"NAME", order, stock, pool, "exclusive", "shared", "permits(3)", host, "/orders/:id", "req-42"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("ls -l does not show %q:\n%v", s, r)
		}
	}

	// show: the holder, who it is, its TTL and fence; the fair queue.
	r = f.cmd("", "show", order)
	t.Logf("show %s:\n%s", order, r.stdout)
	for _, s := range []string{held.Token(), host, "/orders/:id", "req-42", "exclusive"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("show %s does not show %q:\n%v", order, s, r)
		}
	}
	if fair && !strings.Contains(r.stdout, "req-43") {
		t.Errorf("show %s does not show the fair waiter req-43:\n%v", order, r)
	}
	r = f.cmd("", "show", order, "--json")
	var doc lockJSON
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != 0 || err != nil {
		t.Fatalf("show --json: %v\n%v", err, r)
	}
	if !doc.Held || doc.Name != order || doc.Key != "reqlock:{"+order+"}" || len(doc.Holders) != 1 {
		t.Fatalf("show --json: %+v", doc)
	}
	h := doc.Holders[0]
	// The TTL left, if the store tells it, is about the lease's 30 s
	// (memcached counts whole seconds, rounded up).
	if h.Token != held.Token() || h.Mode != "exclusive" || h.TTLms < 0 || h.TTLms > 35000 || h.Identity == nil {
		t.Fatalf("show --json: holder %+v", h)
	}
	id := h.Identity
	if id.Host != host || id.PID != os.Getpid() || id.Route != "/orders/:id" || id.RequestID != "req-42" || id.Mode != "exclusive" ||
		id.Since.Before(before) || id.Since.After(time.Now()) {
		t.Errorf("show --json: identity %+v, want host %s pid %d route /orders/:id request req-42 since after %v", id, host, os.Getpid(), before)
	}
	if doc.Fence != 0 && doc.Fence < held.Fence() { // 0: the store cannot tell
		t.Errorf("show --json: fence %d, the holder's is %d", doc.Fence, held.Fence())
	}
	if fair {
		if len(doc.Waiters) != 1 || doc.Waiters[0].Position != 1 || doc.Waiters[0].Identity == nil || doc.Waiters[0].Identity.RequestID != "req-43" {
			t.Errorf("show --json: waiters %+v, want the fair waiter req-43", doc.Waiters)
		}
	}
	r = f.cmd("", "show", stock, "--json")
	doc = lockJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Holders) != 2 {
		t.Fatalf("show %s --json: %v\n%v", stock, err, r)
	}
	got := []string{doc.Holders[0].Token, doc.Holders[1].Token}
	slices.Sort(got)
	wantShares := []string{shareA.Token(), shareB.Token()}
	slices.Sort(wantShares)
	if !slices.Equal(got, wantShares) || doc.Holders[0].Mode != "shared" || doc.Holders[1].Mode != "shared" {
		t.Errorf("show %s --json: holders %+v, want the two shares", stock, doc.Holders)
	}
	r = f.cmd("", "show", pool, "--json")
	doc = lockJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Holders) != 1 {
		t.Fatalf("show %s --json: %v\n%v", pool, err, r)
	}
	if ph := doc.Holders[0]; ph.Token != permit.Token() || ph.Mode != "permits" || ph.Permits != 3 || ph.Slot != permit.Slot() ||
		ph.Identity == nil || ph.Identity.Mode != "permits" || ph.Identity.Permits != 3 {
		t.Errorf("show %s --json: holder %+v, want the permit of 3 in slot %d", pool, ph, permit.Slot())
	}
	if r := f.cmd("", "show", p+"free"); r.code != 0 || !strings.Contains(r.stdout, "none") {
		t.Errorf("show of a free name:\n%v", r)
	}

	// watch: two frames, the same locks in each.
	r = f.cmd("", "watch", p, "--count", "2", "--interval", "100ms", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("watch --count 2 --json: want 2 lines\n%v", r)
	}
	for _, line := range lines {
		var fr frameJSON
		if err := json.Unmarshal([]byte(line), &fr); err != nil || fr.Error != "" || !fr.Complete {
			t.Fatalf("watch frame %s: %v", line, err)
		}
		var names []string
		for _, l := range fr.Locks {
			names = append(names, l.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("watch frame: locks %q, want %q", names, want)
		}
	}
	r = f.cmd("", "watch", p, "--count", "2", "--interval", "100ms")
	if r.code != 0 || strings.Count(r.stdout, "3 held") != 2 || strings.Count(r.stdout, order) != 2 || strings.Contains(r.stdout, "\x1b[2J") {
		t.Errorf("watch --count 2: want two frames of 3 locks, no screen clearing off a terminal\n%v", r)
	}

	// release: refused without --force, after "n", and with several
	// holders but no --token; the holders keep their locks.
	if r := f.cmd("y\n", "release", order); r.code != 2 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("release without --force: want exit 2 saying --force\n%v", r)
	}
	r = f.cmd("n\n", "release", "--force", order, "--audit-log", f.audit)
	if r.code != 1 || !strings.Contains(r.stderr, held.Token()) || !strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("release --force answered n: want exit 1 after showing the holder\n%v", r)
	}
	if got := f.tokens(order); !slices.Equal(got, []string{held.Token()}) {
		t.Fatalf("after a refused release, %s is held by %q, want its holder %s", order, got, held.Token())
	}
	if r := f.cmd("y\n", "release", "--force", stock, "--audit-log", f.audit); r.code != 2 || !strings.Contains(r.stderr, "--token") {
		t.Errorf("release --force of a lock with two holders, no --token: want exit 2 asking for --token\n%v", r)
	}
	if got := f.tokens(stock); !slices.Equal(got, wantShares) {
		t.Fatalf("after a release without --token, %s is held by %q, want both shares", stock, got)
	}
	if _, err := os.Stat(f.audit); err == nil {
		t.Errorf("a release that did not happen wrote the audit log")
	}

	// One share of two, by its token: the other stays.
	r = f.cmd("", "release", "--force", "--yes", "--token", shareA.Token(), stock, "--reason", "share test", "--audit-log", f.audit, "--json")
	var rel releaseJSON
	if err := json.Unmarshal([]byte(r.stdout), &rel); r.code != 0 || err != nil || !rel.Released || rel.Token != shareA.Token() || rel.AuditLog != f.audit {
		t.Fatalf("release --force --token of a share: %+v (%v)\n%v", rel, err, r)
	}
	if got := f.tokens(stock); !slices.Equal(got, []string{shareB.Token()}) {
		t.Fatalf("after the release of one share, %s is held by %q, want only %s", stock, got, shareB.Token())
	}

	// The holder goes and another takes the lock while the operator reads
	// the question: "y" releases nothing, the new holder keeps the lock.
	var next *core.Lease
	stdin := &readerFunc{r: strings.NewReader("y\n"), before: func() {
		if err := held.Release(ctx); err != nil {
			t.Errorf("the holder's release: %v", err)
		}
		if fair {
			next = <-waiter
		} else {
			next = f.acquire(ctx, f.excl, order, core.RequestID("req-44"))
		}
	}}
	r = reqlock(t, stdin, nil, "release", "--force", order, "--store", url, "--timeout", "20s", "--audit-log", f.audit, "--reason", "race")
	if next == nil {
		t.Fatalf("no new holder:\n%v", r)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "no longer holds") {
		t.Errorf("release --force of a holder gone meanwhile: want exit 1, no longer held\n%v", r)
	}
	if got := f.tokens(order); !slices.Equal(got, []string{next.Token()}) {
		t.Fatalf("after a release of a holder gone meanwhile, %s is held by %q, want the new holder %s", order, got, next.Token())
	}

	// A stale --token releases nothing either.
	r = f.cmd("", "release", "--force", "--yes", "--token", held.Token(), order, "--audit-log", f.audit)
	if r.code != 1 || !strings.Contains(r.stderr, "does not hold") {
		t.Errorf("release --force --token of a stale token: want exit 1, does not hold\n%v", r)
	}
	if got := f.tokens(order); !slices.Equal(got, []string{next.Token()}) {
		t.Fatalf("after a release of a stale token, %s is held by %q, want %s", order, got, next.Token())
	}

	// "y": the holder's lock is released, and its lease learns it.
	r = f.cmd("y\n", "release", "--force", order, "--audit-log", f.audit, "--reason", "stuck")
	t.Logf("release --force %s:\n%s%s", order, r.stderr, r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "released") || !strings.Contains(r.stderr, `"operator":"`+testOperator+`"`) {
		t.Fatalf("release --force answered y: want exit 0, released, the audit line on stderr\n%v", r)
	}
	if st := f.state(order); st.Held() {
		t.Fatalf("after release --force, %s is held: %+v", order, st.Holders)
	}
	if err := next.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Errorf("the released holder's own release: %v, want ErrNotHeld", err)
	}
	if r := f.cmd("y\n", "release", "--force", order, "--audit-log", f.audit); r.code != 1 || !strings.Contains(r.stderr, "not held") {
		t.Errorf("release --force of a free lock: want exit 1, not held\n%v", r)
	}

	// A name too long to be kept verbatim is listed in its hashed form,
	// and shown and released in it.
	long := p + strings.Repeat("x", core.MaxNameLen)
	sum := sha256.Sum256([]byte(long))
	hashed := "sha256:" + hex.EncodeToString(sum[:])
	longLease := f.acquire(ctx, f.locker, long, core.RequestID("long-1"))
	if r := f.cmd("", "ls", "sha256:"); r.code != 0 || !slices.Contains(strings.Fields(r.stdout), hashed) {
		t.Errorf("ls sha256: does not list %s\n%v", hashed, r)
	}
	r = f.cmd("", "show", hashed, "--json")
	doc = lockJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Holders) != 1 || doc.Holders[0].Token != longLease.Token() {
		t.Errorf("show %s: want its holder %s\n%v", hashed, longLease.Token(), r)
	}
	if r := f.cmd("", "release", "--force", "--yes", hashed, "--audit-log", f.audit, "--reason", "long"); r.code != 0 {
		t.Errorf("release --force %s:\n%v", hashed, r)
	}
	if st := f.state(long); st.Held() {
		t.Errorf("after release --force %s, %s is held by %+v", hashed, long, st.Holders)
	}

	// The audit log: one line per forced release that reached the store.
	recs := f.auditLines()
	if len(recs) != 4 {
		t.Fatalf("the audit log has %d records, want 4: %+v", len(recs), recs)
	}
	for i, w := range []struct {
		name, token, reason string
		released            bool
	}{
		{stock, shareA.Token(), "share test", true},
		{order, held.Token(), "race", false},
		{order, next.Token(), "stuck", true},
		{hashed, longLease.Token(), "long", true},
	} {
		rec := recs[i]
		if rec.Name != w.name || rec.Token != w.token || rec.Reason != w.reason || rec.Released != w.released ||
			rec.Operator != testOperator || rec.Holder == nil || rec.Holder.Token != w.token || rec.Time.IsZero() || rec.Store == "" {
			t.Errorf("audit record %d: %+v, want name %s token %s reason %q released %v", i, rec, w.name, w.token, w.reason, w.released)
		}
	}
	if recs[0].Holder.Identity == nil || recs[0].Holder.Identity.RequestID != "read-1" {
		t.Errorf("audit record 0: holder %+v, want the identity of read-1", recs[0].Holder)
	}
}

// TestReleaseWhenTheStoreStalls: a store that stops answering after the
// question fails the release within --timeout; the attempt is recorded
// with its error, and the lock stays held.
func TestReleaseWhenTheStoreStalls(t *testing.T) {
	srv := redisServer(t)
	testmain.LeakCheck(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(srv.Options())
	defer client.Close()
	store := redisStore(t, client)
	l := core.NewWithStore(store, core.WithTTL(30*time.Second))
	defer l.Close()
	ctx := context.Background()
	name := uniq(t) + "stall"
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	audit := filepath.Join(t.TempDir(), "audit.log")
	stdin := &readerFunc{r: strings.NewReader("y\n"), before: proxy.Blackhole}
	r := reqlock(t, stdin, nil, "release", "--force", name, "--store", "redis://"+proxy.Addr(), "--timeout", "2s", "--audit-log", audit)
	proxy.Restore()
	if r.code != exitError || !strings.Contains(r.stderr, "timeout of 2s") {
		t.Errorf("release --force with the store stalled: want exit 1, the timeout\n%v", r)
	}
	data, err := os.ReadFile(audit)
	var rec auditJSON
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.Released || rec.Error == "" || rec.Token != lease.Token() {
		t.Errorf("the audit record of a release that failed: %s (%v), want released false with the error", data, err)
	}
	if st, err := l.Inspect(ctx, name); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != lease.Token() {
		t.Errorf("after a release that failed, %s: %+v %v, want held by %s", name, st.Holders, err, lease.Token())
	}
}

// TestCommandsOnRedlock: on Redlock's independent masters (core.NewRedlock;
// no shared holds, no fair queue) the commands see a lock held on a quorum
// and release only the token shown, on every master.
func TestCommandsOnRedlock(t *testing.T) {
	ns := redlockServers(t)
	testmain.LeakCheck(t)
	clients := make([]redis.UniversalClient, len(ns))
	for i, n := range ns {
		c := redis.NewClient(n.Options())
		defer c.Close()
		clients[i] = c
	}
	l := core.NewRedlock(clients, core.WithTTL(30*time.Second))
	defer l.Close()
	ctx := context.Background()
	p := uniq(t)
	name := p + "order:7"
	lease, err := l.Acquire(ctx, name, core.Route("/orders/:id"), core.RequestID("rl-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	url := "redlock://" + strings.Join(ns.Addrs(), ",")
	cmd := func(stdin string, args ...string) result {
		return reqlock(t, strings.NewReader(stdin), nil, append(args, "--store", url, "--timeout", "20s")...)
	}
	if r := cmd("", "ls", p); r.code != 0 || strings.TrimSpace(r.stdout) != name {
		t.Fatalf("ls %s on Redlock: want %s\n%v", p, name, r)
	}
	r := cmd("", "show", name, "--json")
	var doc lockJSON
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Holders) != 1 || doc.Holders[0].Token != lease.Token() ||
		doc.Holders[0].Identity == nil || doc.Holders[0].Identity.RequestID != "rl-1" {
		t.Fatalf("show %s --json on Redlock: want the holder rl-1\n%v", name, r)
	}
	audit := filepath.Join(t.TempDir(), "audit.log")
	if r := cmd("n\n", "release", "--force", name, "--audit-log", audit); r.code != 1 {
		t.Errorf("release answered n on Redlock: want exit 1\n%v", r)
	}
	if st, err := l.Inspect(ctx, name); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != lease.Token() {
		t.Fatalf("after a refused release on Redlock: %+v %v", st.Holders, err)
	}
	if r := cmd("y\n", "release", "--force", name, "--audit-log", audit); r.code != 0 {
		t.Fatalf("release answered y on Redlock: want exit 0\n%v", r)
	}
	for i, c := range clients {
		if n, err := c.Exists(ctx, "reqlock:{"+name+"}").Result(); err != nil || n != 0 {
			t.Errorf("master %d still has the lock's key after release --force: %d %v", i, n, err)
		}
	}
	if err := lease.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Errorf("the released holder's own release: %v, want ErrNotHeld", err)
	}
}
