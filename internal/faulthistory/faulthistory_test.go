//go:build linux

package faulthistory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
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
	ttl        = 2 * time.Second
	ioTimeout  = 250 * time.Millisecond
	window     = 15 * time.Millisecond   // between a check of Done and its write
	work       = 30 * time.Millisecond   // between the two writes
	gap        = 700 * time.Millisecond  // quiet time between two faults
	tail       = 1500 * time.Millisecond // quiet time after the last fault
	maxRun     = 60 * time.Second        // the workers stop by then whatever happens
)

// enableEnv turns TestFaultHistory on.
const enableEnv = "REQLOCK_FAULTHISTORY"

// The figures asserted.
const (
	// maxOrphan bounds the longest orphan after a stall: the clean-up sends
	// its compare-and-delete every 250 ms (internal/undo), so about half a
	// second, with room for a busy machine (a round woken late, a reply
	// slow after the thaw). Without the clean-up the orphan lasts its whole
	// TTL from the stall's end (2 s): the bound stays below that.
	maxOrphan = 1500 * time.Millisecond
	// reliabilityFixes says whether this branch has the core fixes of the
	// orphan lock left after a stall (an acquire that Redis runs late, when
	// it resumes) and of Done behind the clock after a process pause. Until
	// it does, the longest orphan and the writes after Done are reported,
	// not asserted.
	reliabilityFixes = true
)

// variant is one configuration of the Lockers.
type variant struct {
	name              string
	watchdog, fencing bool
}

// TestFaultHistory runs the fault-history test (see the package
// documentation) once without the watchdog and fencing and once with both,
// prints the figures of both as a table and asserts the hard ones.
//
// It is heavy on a small machine (five processes under fault for about 35 s)
// and its figures are timings, so it runs only when REQLOCK_FAULTHISTORY=1:
// ./scripts/test.sh runs it on its own, after the modules' tests.
func TestFaultHistory(t *testing.T) {
	if os.Getenv(enableEnv) != "1" {
		t.Skipf("set %s=1 to run it (./scripts/test.sh does, on its own after the modules' tests)", enableEnv)
	}
	testmain.LeakCheck(t)
	variants := []variant{{name: "plain"}, {name: "watchdog+fencing", watchdog: true, fencing: true}}
	var names []string
	var as []*analysis
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			h := record1(t, v)
			a := h.analyse()
			names, as = append(names, v.name), append(as, a)
			for _, n := range a.notes {
				t.Log(n)
			}
			for _, e := range h.otherErrors {
				t.Log("failed acquires of kind other:", e)
			}
			for _, o := range a.orphans {
				t.Logf("orphan after %s (healed at %s): %v", o.fault.kind, h.ms(o.fault.end), o.d.Round(time.Millisecond))
			}
			check(t, v, a)
		})
	}
	if len(as) > 0 {
		t.Logf("fault history, %d processes × %d goroutines on one name, TTL %v:\n%s",
			procs, goroutines, ttl, table(names, as))
	}
	if !reliabilityFixes {
		t.Logf("NOTE: the longest orphan after a stall (bound %v) and the writes after Done are reported, not asserted: "+
			"they need the core fixes of the orphan lock left by a late acquire after a stall and of Done behind the clock after a pause",
			maxOrphan)
	}
}

// check asserts the hard figures of one variant.
func check(t *testing.T, v variant, a *analysis) {
	t.Helper()
	if a.overlapsUnexplained != 0 {
		t.Errorf("%d unexplained overlaps", a.overlapsUnexplained)
	}
	if a.staleAcceptedUnexplained != 0 {
		t.Errorf("%d unexplained stale writes accepted", a.staleAcceptedUnexplained)
	}
	if v.fencing && a.staleAcceptedFrozen != 0 {
		t.Errorf("with fencing, %d stale writes of frozen holders were accepted", a.staleAcceptedFrozen)
	}
	if reliabilityFixes {
		if a.writesAfterDone != 0 {
			t.Errorf("%d writes after Done", a.writesAfterDone)
		}
		if o := a.longestOrphan(); o.d > maxOrphan {
			t.Errorf("an orphan lock of %v after %s (bound %v)", o.d, o.fault.kind, maxOrphan)
		}
	}
	// The run did what it is for: every fault, and locks taken around them.
	for _, k := range faultKinds {
		if a.faults[k] == 0 {
			t.Errorf("no fault of kind %q was injected", k)
		}
	}
	if a.sections < 30 || a.accepted == 0 {
		t.Errorf("only %d critical sections, %d writes accepted", a.sections, a.accepted)
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
func (w *worker) signal(sig syscall.Signal) {
	select {
	case <-w.done:
	default:
		_ = w.cmd.Process.Signal(sig)
	}
}

// record1 runs the workers of variant v while it injects the faults, one
// after the other, and returns the history.
func record1(t *testing.T, v variant) *history {
	lockSrv := redistest.Start(t)
	resSrv := redistest.Start(t)
	admin := redis.NewClient(lockSrv.Options())
	defer admin.Close()
	res := resSrv.Client(t)

	h := newHistory()
	var hmu sync.Mutex
	acqs := make(chan record, 4096)
	start := time.Now()
	h.start, h.ttl = start.UnixNano(), ttl
	lockKey, err := core.New(admin).Key(name)
	if err != nil {
		t.Fatal(err)
	}
	var polls sync.WaitGroup
	defer polls.Wait()

	var workers []*worker
	var proxies []*redistest.Proxy
	t.Cleanup(func() { // whatever happened: no process outlives the test, none stays frozen
		for _, w := range workers {
			w.signal(syscall.SIGCONT)
			w.signal(syscall.SIGKILL)
			<-w.done
			w.reader.Wait()
		}
	})
	for p := range procs {
		proxy := redistest.NewProxy(t, lockSrv.Addr())
		proxies = append(proxies, proxy)
		spec, _ := json.Marshal(job{Proc: p, LockAddr: proxy.Addr(), Resource: resSrv.Addr(), Name: name,
			Goroutines: goroutines, TTL: ttl, IOTimeout: ioTimeout, Watchdog: v.watchdog, Fencing: v.fencing,
			End: start.Add(maxRun).UnixNano(), Window: window, Work: work})
		w, err := startWorker(p, spec)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
		w.reader.Add(1)
		go readHistory(t, w, h, &hmu, acqs)
	}

	// The faults.
	var faults []fault
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
	nextHolder := func() (record, bool) { // the next acquire from now on
		for len(acqs) > 0 {
			<-acqs
		}
		select {
		case r := <-acqs:
			return r, true
		case <-time.After(5 * time.Second):
			return record{}, false
		}
	}
	now := func() int64 { return time.Now().UnixNano() }
	// watch samples the lock's key after a stall healed, for the orphans.
	watch := func() {
		polls.Add(1)
		go func() {
			defer polls.Done()
			samples := pollKey(admin, lockKey, ttl+500*time.Millisecond)
			hmu.Lock()
			h.samples = append(h.samples, samples...)
			hmu.Unlock()
		}()
	}
	freezeHolder := func() {
		r, ok := nextHolder()
		if !ok {
			t.Error("no acquire to freeze a holder at")
			return
		}
		w := workers[r.Proc]
		f := fault{kind: holderFreeze, proc: r.Proc, start: now()}
		w.signal(syscall.SIGSTOP)
		time.Sleep(ttl + 500*time.Millisecond)
		w.signal(syscall.SIGCONT)
		f.end = now()
		faults = append(faults, f)
		watch()
	}

	at(time.Second)
	freezeHolder()
	time.Sleep(gap)

	f := fault{kind: redisFreeze, proc: -1, start: now()}
	lockSrv.Freeze(t)
	time.Sleep(ttl + 300*time.Millisecond)
	lockSrv.Thaw(t)
	f.end = now()
	faults = append(faults, f)
	watch()
	time.Sleep(gap)

	if r, ok := nextHolder(); ok {
		f := fault{kind: blackhole, proc: r.Proc, start: now()}
		proxies[r.Proc].Blackhole()
		time.Sleep(ttl + 300*time.Millisecond)
		proxies[r.Proc].Restore()
		f.end = now()
		faults = append(faults, f)
		watch()
	} else {
		t.Error("no acquire to black-hole a holder's link at")
	}
	time.Sleep(gap)

	f = fault{kind: restart, proc: -1, start: now()}
	lockSrv.Stop()
	time.Sleep(300 * time.Millisecond)
	if err := lockSrv.Relaunch(); err != nil {
		t.Fatal(err)
	}
	f.end = now()
	faults = append(faults, f)
	time.Sleep(gap + 300*time.Millisecond)

	f = fault{kind: flushall, proc: -1, start: now()}
	if err := admin.FlushAll(context.Background()).Err(); err != nil {
		t.Error("FLUSHALL:", err)
	}
	f.end = now()
	faults = append(faults, f)

	// The end: the workers stop acquiring when their standard input closes
	// and exit; one that does not within 15 s is killed, and the test fails.
	time.Sleep(tail)
	polls.Wait() // the samples end before the run does
	h.end = now()
	for _, w := range workers {
		_ = w.stdin.Close()
	}
	for _, w := range workers {
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			w.signal(syscall.SIGKILL)
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
	hmu.Lock()
	defer hmu.Unlock()
	h.order, h.faults = log, faults
	return h
}

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
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
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

// pollKey samples the token in the lock's key every 10 ms for d.
func pollKey(c *redis.Client, key string, d time.Duration) []sample {
	var out []sample
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		at := time.Now().UnixNano()
		token, err := c.Get(ctx, key).Result()
		cancel()
		switch {
		case err == redis.Nil:
			out = append(out, sample{at: at})
		case err == nil:
			out = append(out, sample{at: at, token: token})
		}
	}
	return out
}

// readHistory reads worker w's records into h until the pipe closes, and
// passes on its acquires (dropped when nobody waits for them).
func readHistory(t *testing.T, w *worker, h *history, mu *sync.Mutex, acqs chan<- record) {
	defer w.reader.Done()
	defer w.pipe.Close()
	sc := bufio.NewScanner(w.pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mu.Lock()
		r, err := h.addLine(sc.Bytes())
		mu.Unlock()
		if err != nil {
			t.Errorf("worker %d: %v", w.proc, err)
			continue
		}
		if r.Kind == "acq" {
			select {
			case acqs <- r:
			default:
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("worker %d: reading its history: %v", w.proc, err)
	}
}
