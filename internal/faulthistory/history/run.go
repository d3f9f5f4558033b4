package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// The run's shape: 3 processes × 4 goroutines on one name.
const (
	name       = "order:1"
	procs      = 3
	goroutines = 4
	// TTL is the TTL of the workers' locks.
	TTL       = 2 * time.Second
	wait      = 3 * time.Second
	ioTimeout = 250 * time.Millisecond
	window    = 15 * time.Millisecond   // between a check of Done and its write
	work      = 30 * time.Millisecond   // between the two writes
	warmUp    = time.Second             // before the first fault
	gap       = 700 * time.Millisecond  // quiet time after a fault, once the name was taken again
	tail      = 1500 * time.Millisecond // quiet time after the last fault
	// settle bounds the wait, after a fault healed, for the name to be
	// taken again before the next fault: a name still free after it is a
	// failure (a generous bound, far above any clean-up or reconnection).
	settle = 30 * time.Second
	maxRun = 5 * time.Minute // the workers stop by then whatever happens
)

// FreezeHolder stops the process of the next holder (SIGSTOP) right after
// it acquired, past the store's hold, then resumes it.
func FreezeHolder() Step {
	return Step{Fault: Fault{Kind: KindHolderFreeze, Frozen: true, Stall: true}, Inject: func(r *Run, f *Fault) error {
		rec, ok := r.NextHolder()
		if !ok {
			return errors.New("no acquire to freeze a holder at")
		}
		w := r.workers[rec.Proc]
		f.Proc, f.Start = rec.Proc, now()
		w.signal(sigStop)
		time.Sleep(r.hold + 500*time.Millisecond)
		w.signal(sigCont)
		return nil
	}}
}

// FreezeStore stops the store (freeze) past its hold, then resumes it
// (thaw).
func FreezeStore(freeze, thaw func() error) Step {
	return Step{Fault: Fault{Kind: KindStoreFreeze, Stall: true}, Inject: func(r *Run, f *Fault) error {
		err := freeze()
		if err == nil {
			time.Sleep(r.hold + 300*time.Millisecond)
		}
		return errors.Join(err, thaw())
	}}
}

// BreakLink black-holes (or, with cut, cuts) the links of the next
// holder's process to every server of the store, past the store's hold,
// then restores them.
func BreakLink(cut bool) Step {
	kind := KindBlackhole
	if cut {
		kind = KindCut
	}
	return Step{Fault: Fault{Kind: kind, Stall: true}, Inject: func(r *Run, f *Fault) error {
		rec, ok := r.NextHolder()
		if !ok {
			return fmt.Errorf("no acquire to break a holder's link at")
		}
		f.Proc, f.Start = rec.Proc, now()
		for _, p := range r.proxies[rec.Proc] {
			if cut {
				p.Cut()
			} else {
				p.Blackhole()
			}
		}
		time.Sleep(r.hold + 300*time.Millisecond)
		for _, p := range r.proxies[rec.Proc] {
			p.Restore()
		}
		return nil
	}}
}

// RestartStore kills the store (stop), and starts it again 300 ms later
// (start, which returns once it serves); reset says that it comes back
// without its locks.
func RestartStore(reset bool, stop func(), start func() error) Step {
	kind := KindRestart
	if reset {
		kind = KindRestartEmpty
	}
	return Step{Fault: Fault{Kind: kind, Reset: reset}, Inject: func(r *Run, f *Fault) error {
		stop()
		time.Sleep(300 * time.Millisecond)
		return start()
	}}
}

// FlushAll empties the store (flush), which forgets its locks.
func FlushAll(flush func() error) Step {
	return Step{Fault: Fault{Kind: KindFlushAll, Reset: true}, Inject: func(r *Run, f *Fault) error {
		return flush()
	}}
}

// KillLeader kills the leader of a cluster (leader returns how to kill it,
// how to wait for the election of another, and how to restart it). The
// fault heals by itself, with the election: its End is when the surviving
// members have a new leader, so that the time the name is then held by
// nobody is the clients' (their failover to a serving member, reqlock's
// retries), not the store's; the election's own time is logged. The old
// leader is restarted a hold after the kill, within the fault's time.
func KillLeader(leader func() (kill func(), elected func() error, restart func() error, err error)) Step {
	return Step{Fault: Fault{Kind: KindLeaderKill}, Inject: func(r *Run, f *Fault) error {
		kill, elected, restart, err := leader()
		if err != nil {
			return err
		}
		f.Start = now()
		kill()
		if err := elected(); err != nil {
			return err
		}
		f.End = now()
		r.t.Logf("leader killed at %s; a new leader %v later", r.h.ms(f.Start), time.Duration(f.End-f.Start).Round(time.Millisecond))
		time.Sleep(r.hold - time.Duration(f.End-f.Start))
		return restart()
	}}
}

func now() int64 { return time.Now().UnixNano() }

// Run is a run in progress, for the Steps.
type Run struct {
	t       *testing.T
	hold    time.Duration
	h       *History
	hmu     sync.Mutex
	acqs    chan Record
	lastAcq atomic.Int64 // when the latest acquire returned
	ready   chan int
	workers []*worker
	proxies [][]*redistest.Proxy // by process, then by server
	polls   sync.WaitGroup
}

// T returns the test of the run.
func (r *Run) T() *testing.T { return r.t }

// Hold returns how long the store holds a lock at most: the faults that
// stall last past it.
func (r *Run) Hold() time.Duration { return r.hold }

// NextHolder waits for the next acquire from now on (the store's hold and
// 5 s at most: a section may outlast its TTL).
func (r *Run) NextHolder() (Record, bool) {
	for len(r.acqs) > 0 {
		<-r.acqs
	}
	select {
	case rec := <-r.acqs:
		return rec, true
	case <-time.After(r.hold + 5*time.Second):
		return Record{}, false
	}
}

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{} // closed when the process has been waited for
	proc   int
	pipe   *os.File       // the parent's end of the history pipe
	stdin  io.WriteCloser // closed to tell the worker to stop
	reader sync.WaitGroup // readHistory
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 64<<10 {
		return len(p), nil
	}
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// signal sends sig to the worker's process unless it has ended.
func (w *worker) signal(sig os.Signal) {
	if sig == nil {
		return
	}
	select {
	case <-w.done:
	default:
		_ = w.cmd.Process.Signal(sig)
	}
}

// Suite runs the cases, one subtest each (the store's servers start and
// stop within it), analyses each history, logs its figures and notes,
// asserts the hard figures, and logs a summary of all the cases (Summary).
// It skips unless REQLOCK_FAULTHISTORY is set (Enabled).
func Suite(t *testing.T, cases []Case) []Result {
	Enabled(t)
	if sigStop == nil {
		t.Skip("the fault history freezes processes (SIGSTOP): Linux only")
	}
	testmain.LeakCheck(t)
	var results []Result
	for _, c := range cases {
		t.Run(c.Store+"/"+c.Variant.Name, func(t *testing.T) {
			i := len(results)
			results = append(results, Result{Case: c})
			tg := c.Start(t)
			h := record(t, c, tg)
			a := h.analyse()
			results[i].Analysis = a
			for _, n := range a.notes {
				t.Log(n)
			}
			for _, e := range h.otherErrors {
				t.Log("failed acquires of kind other:", e)
			}
			for _, o := range a.orphans {
				t.Logf("orphan after %s (healed at %s): %v", o.fault.Kind, h.ms(o.fault.End), ms(o.d))
			}
			for i, f := range a.faults {
				t.Logf("%s at %s–%s (process %d): held by nobody for %v after it", f.Kind, h.ms(f.Start), h.ms(f.End), f.Proc, ms(a.unheld[i]))
			}
			t.Logf("fault history of %s, %s: %d processes × %d goroutines on one name, TTL %v:\n%s",
				c.Store, c.Variant.Name, procs, goroutines, TTL, table([]string{c.Variant.Name}, []*Analysis{a}))
			check(t, c, tg, a)
		})
	}
	if len(results) > 0 {
		t.Logf("fault history, %d processes × %d goroutines on one name, TTL %v, by store and fault:\n%s",
			procs, goroutines, TTL, Summary(results))
		t.Logf("the same, one row per store (cells: overlaps explained / UNEXPLAINED · held by nobody after the fault healed):\n%s",
			Matrix(results))
	}
	return results
}

// check asserts the hard figures of one run.
func check(t *testing.T, c Case, tg *Target, a *Analysis) {
	t.Helper()
	if a.overlapsUnexplained != 0 {
		t.Errorf("%d unexplained overlaps", a.overlapsUnexplained)
	}
	if a.staleAcceptedUnexplained != 0 {
		t.Errorf("%d unexplained stale writes accepted", a.staleAcceptedUnexplained)
	}
	if c.Variant.Fencing && a.staleAccepted() != 0 {
		t.Errorf("with fencing, %d stale writes were accepted (%d of frozen holders, %d across a reset of the store)",
			a.staleAccepted(), a.staleAcceptedFrozen, a.staleAcceptedReset)
	}
	if a.writesAfterDone != 0 {
		t.Errorf("%d writes after Done", a.writesAfterDone)
	}
	if o := a.longestOrphan(); tg.MaxOrphan > 0 && !c.Variant.Fair && o.d > tg.MaxOrphan {
		t.Errorf("an orphan lock of %v after %s (bound %v)", o.d, o.fault.Kind, tg.MaxOrphan)
	}
	// The run did what it is for: every fault, and locks taken around them.
	for _, s := range tg.Faults {
		if a.faultCount[s.Fault.Kind] == 0 {
			t.Errorf("no fault of kind %q was injected", s.Fault.Kind)
		}
	}
	if a.sections < 30 || a.accepted == 0 {
		t.Errorf("only %d critical sections, %d writes accepted", a.sections, a.accepted)
	}
}

// record runs the workers of case c on target tg while it injects the
// target's faults, one after the other, and returns the history.
func record(t *testing.T, c Case, tg *Target) *History {
	resSrv := redistest.Start(t)
	res := resSrv.Client(t)
	hold := max(TTL, tg.Hold)
	r := &Run{t: t, hold: hold, acqs: make(chan Record, 4096), ready: make(chan int, procs)}
	t.Cleanup(func() { // whatever happened: no process outlives the test, none stays frozen
		for _, w := range r.workers {
			w.signal(sigCont)
			w.signal(sigKill)
			<-w.done
			w.reader.Wait()
		}
	})
	defer r.polls.Wait()

	end := time.Now().Add(maxRun)
	for p := range procs {
		var addrs []string
		var proxies []*redistest.Proxy
		for _, a := range tg.Addrs {
			proxy := redistest.NewProxy(t, a)
			proxies, addrs = append(proxies, proxy), append(addrs, proxy.Addr())
		}
		r.proxies = append(r.proxies, proxies)
		spec, _ := json.Marshal(Job{Proc: p, Store: tg.URL(addrs), Resource: resSrv.Addr(), Name: name,
			Goroutines: goroutines, TTL: TTL, Wait: wait, IOTimeout: ioTimeout, Variant: c.Variant,
			End: end.UnixNano(), Window: window, Work: work})
		w, err := startWorker(p, spec)
		if err != nil {
			t.Fatal(err)
		}
		r.workers = append(r.workers, w)
	}
	// The history starts once every worker has its Locker (a JVM store's
	// session, a database's pool may take a while on a busy machine).
	start := time.Now()
	r.h = newHistory(start, hold)
	for _, w := range r.workers {
		w.reader.Add(1)
		go r.readHistory(w)
	}
	for range procs {
		select {
		case <-r.ready:
		case <-time.After(60 * time.Second):
			for _, w := range r.workers {
				t.Logf("worker %d's output:\n%s", w.proc, w.out.String())
			}
			t.Fatal("the workers were not ready within 60 s")
		}
	}
	r.hmu.Lock()
	start = time.Now()
	r.h.start = start.UnixNano()
	r.hmu.Unlock()

	time.Sleep(warmUp)
	var faults []Fault
	for _, s := range tg.Faults {
		f := s.Fault
		f.Proc, f.Start = -1, now()
		if err := s.Inject(r, &f); err != nil {
			t.Errorf("%s: %v", f.Kind, err)
			continue
		}
		if f.End == 0 {
			f.End = now()
		}
		faults = append(faults, f)
		if f.Stall && tg.Sample != nil {
			r.watch(tg.Sample)
		}
		// The next fault waits until the name was taken again after this
		// one healed, and a quiet gap.
		deadline := time.Now().Add(settle)
		for r.lastAcq.Load() <= f.End && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if r.lastAcq.Load() <= f.End {
			t.Errorf("nobody took the name within %v after %s healed", settle, f.Kind)
		}
		time.Sleep(gap)
	}

	// The end: the workers stop acquiring when their standard input closes
	// and exit; one that does not within 15 s is killed, and the test fails.
	time.Sleep(tail)
	r.polls.Wait() // the samples end before the run does
	r.hmu.Lock()
	r.h.end = now()
	r.hmu.Unlock()
	for _, w := range r.workers {
		_ = w.stdin.Close()
	}
	for _, w := range r.workers {
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			w.signal(sigKill)
			<-w.done
			t.Errorf("worker %d did not end on time; its output:\n%s", w.proc, w.out.String())
		}
		if err := w.cmd.ProcessState; err != nil && !err.Success() {
			t.Errorf("worker %d: %v; its output:\n%s", w.proc, err, w.out.String())
		}
		w.reader.Wait()
	}
	log, err := res.LRange(context.Background(), resourceLog, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	r.h.order, r.h.faults = log, faults
	if dir := os.Getenv(dumpEnv); dir != "" {
		if err := r.h.dump(dir, c); err != nil {
			t.Error(err)
		}
	}
	return r.h
}

// dumpEnv names a directory where each run leaves its history, for a
// closer look: the workers' records (JSON lines, times in Unix
// nanoseconds), then the faults, the samples of the lock's key and the
// resource's log, one JSON line each.
const dumpEnv = "REQLOCK_FAULTHISTORY_DUMP"

// dump writes the history of case c into dir.
func (h *History) dump(dir string, c Case) error {
	var b bytes.Buffer
	b.Write(h.raw)
	for _, f := range h.faults {
		line, _ := json.Marshal(map[string]any{"fault": f})
		b.Write(append(line, '\n'))
	}
	for _, x := range h.samples {
		line, _ := json.Marshal(map[string]any{"sample": x.at, "token": x.token})
		b.Write(append(line, '\n'))
	}
	line, _ := json.Marshal(map[string]any{"start": h.start, "end": h.end, "resource": h.order})
	b.Write(append(line, '\n'))
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ',' || r == '(' || r == ')' {
			return '_'
		}
		return r
	}, c.Store+"-"+c.Variant.Name) + ".jsonl"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
}

// watch samples the lock's key after a stall healed, for the orphans.
func (r *Run) watch(read func(ctx context.Context) (string, error)) {
	r.polls.Add(1)
	go func() {
		defer r.polls.Done()
		var out []sample
		for end := time.Now().Add(r.hold + 500*time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			at := now()
			token, err := read(ctx)
			cancel()
			if err == nil {
				out = append(out, sample{at: at, token: token})
			}
		}
		r.hmu.Lock()
		r.h.samples = append(r.h.samples, out...)
		r.hmu.Unlock()
	}()
}

// RedisTarget starts a redis-server without persistence for a run, which
// workers reach by URLs of scheme ("redis" for go-redis, "rueidis"): its
// faults are a holder frozen, Redis frozen, a black-holed link (and a cut
// one, in the long run), Redis killed and restarted empty, and FLUSHALL;
// the lock's key is sampled for orphans.
func RedisTarget(t *testing.T, scheme string) *Target {
	srv := redistest.Start(t)
	admin := redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = admin.Close() })
	key, err := core.New(admin).Key(Name())
	if err != nil {
		t.Fatal(err)
	}
	steps := []Step{
		FreezeHolder(),
		FreezeStore(func() error { srv.Freeze(t); return nil }, func() error { srv.Thaw(t); return nil }),
		BreakLink(false),
	}
	if Long() {
		steps = append(steps, BreakLink(true))
	}
	steps = append(steps,
		RestartStore(true, srv.Stop, srv.Relaunch),
		FlushAll(func() error { return admin.FlushAll(context.Background()).Err() }),
	)
	return &Target{
		Addrs:  []string{srv.Addr()},
		URL:    func(addrs []string) string { return scheme + "://" + addrs[0] },
		Faults: steps,
		Sample: RedisSample(admin, key),
	}
}

// RedisSample returns a Target.Sample that reads the lock's key with GET.
func RedisSample(c *redis.Client, key string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		token, err := c.Get(ctx, key).Result()
		if err == redis.Nil {
			return "", nil
		}
		return token, err
	}
}

// Name returns the name the workers lock.
func Name() string { return name }

// startWorker starts worker process p with its job, and a pipe for its
// history on its file descriptor 3.
func startWorker(p int, spec []byte) (*worker, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{wr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.Close()
		wr.Close()
		return nil, err
	}
	cmd.SysProcAttr = procAttr() // dies with the test binary
	if err := cmd.Start(); err != nil {
		r.Close()
		wr.Close()
		return nil, fmt.Errorf("start worker %d: %w", p, err)
	}
	wr.Close()
	w := &worker{cmd: cmd, out: out, done: make(chan struct{}), proc: p, pipe: r, stdin: stdin}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// readHistory reads worker w's records into the history until the pipe
// closes, and passes on its acquires (dropped when nobody waits for them).
func (r *Run) readHistory(w *worker) {
	defer w.reader.Done()
	defer w.pipe.Close()
	sc := bufio.NewScanner(w.pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r.hmu.Lock()
		rec, err := r.h.addLine(sc.Bytes())
		r.hmu.Unlock()
		if err != nil {
			r.t.Errorf("worker %d: %v", w.proc, err)
			continue
		}
		switch rec.Kind {
		case "ready":
			r.ready <- rec.Proc
		case "acq":
			for last := r.lastAcq.Load(); rec.At > last && !r.lastAcq.CompareAndSwap(last, rec.At); last = r.lastAcq.Load() {
			}
			select {
			case r.acqs <- rec:
			default:
			}
		}
	}
	if err := sc.Err(); err != nil {
		r.t.Errorf("worker %d: reading its history: %v", w.proc, err)
	}
}
