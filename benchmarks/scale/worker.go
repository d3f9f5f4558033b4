package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// workerEnv carries a worker process's job, as JSON.
const workerEnv = "REQLOCK_SCALE_WORKER"

// The kinds of job a worker process runs.
const (
	jobNames    = "names"
	jobHandover = "handover"
)

// workerJob is what the runner asks of one worker process: one Locker (or
// the floor, or a peer) with a client of its own, on Addrs.
type workerJob struct {
	Kind       string
	Variant    string
	Shape      Shape
	Load       Load // jobNames: this process's share (Lockers is 1)
	Contention Contention
	Addrs      []string
	Cluster    bool
	Index      int // the process's number: its contenders' random streams and its holds' label
}

// workerReport is what a worker process sends back, as one line of JSON.
type workerReport struct {
	Cycles   Cycles     // jobNames
	Holds    [][2]int64 // jobHandover: each critical section's start and finish, Unix nanoseconds
	Attempts int64      // jobHandover
	Failed   int64      // jobHandover
	Overlaps int64      // jobHandover
	Errors   []string   // jobHandover
	Guard    map[string]int64
}

// RunWorkerIfChild runs a worker and exits when the process was started by
// the runner as one; otherwise it returns at once. Call it first in main,
// and in TestMain of the tests that run the harness.
func RunWorkerIfChild() {
	spec, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	if err := runWorker(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scale worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func newClient(addrs []string, cluster bool) redis.UniversalClient {
	if cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	}
	return redis.NewClient(&redis.Options{Addr: addrs[0], ContextTimeoutEnabled: true})
}

// runWorker opens its lock, warms it up, says "ready", waits for a line on
// in, runs its job and writes its report to out.
func runWorker(spec string, in io.Reader, out io.Writer) (err error) {
	var j workerJob
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	v, err := LookupVariant(j.Variant)
	if err != nil {
		return err
	}
	ctx := context.Background()
	client := newClient(j.Addrs, j.Cluster)
	defer client.Close()
	lock, err := v.open(client, j.Shape)
	if err != nil {
		return err
	}
	if c, ok := lock.(io.Closer); ok {
		defer func() { err = errors.Join(err, c.Close()) }()
	}
	locks := []Lock{lock}
	var critical *redis.Client
	switch j.Kind {
	case jobNames:
		err = warm(ctx, locks, j.Load.Goroutines, fmt.Sprintf("w%d:", j.Index))
	case jobHandover:
		err = warm(ctx, locks, j.Contention.Goroutines, fmt.Sprintf("w%d:", j.Index))
		critical = redis.NewClient(&redis.Options{Addr: j.Addrs[0], PoolSize: j.Contention.Goroutines})
		defer critical.Close()
		if err == nil {
			err = critical.Ping(ctx).Err()
		}
	default:
		return fmt.Errorf("unknown job %q", j.Kind)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	var r workerReport
	switch j.Kind {
	case jobNames:
		cpu := processCPU()
		r.Cycles = runLoad(ctx, locks, j.Load, "n:", j.Index)
		r.Cycles.ClientCPU = processCPU() - cpu
	case jobHandover:
		c := contend(ctx, locks, critical, j.Contention, j.Index)
		r.Attempts, r.Failed, r.Overlaps, r.Errors = c.attempts, c.failed, c.overlaps, c.errs
		for _, h := range c.holds {
			r.Holds = append(r.Holds, [2]int64{h.start.UnixNano(), h.finish.UnixNano()})
		}
	}
	if rl, ok := lock.(*reqLock); ok {
		r.Guard = rl.stats()
	}
	return json.NewEncoder(out).Encode(r)
}

// procs are running worker processes.
type procs struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
	outs   []*bufio.Reader
}

// startProcs starts one worker process per job (this executable again)
// and waits until every one is warmed up.
func startProcs(ctx context.Context, jobs []workerJob) (*procs, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &procs{}
	for _, j := range jobs {
		spec, _ := json.Marshal(j)
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			p.close(true)
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			p.close(true)
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			p.close(true)
			return nil, err
		}
		p.cmds, p.stdins, p.outs = append(p.cmds, cmd), append(p.stdins, stdin), append(p.outs, bufio.NewReader(stdout))
	}
	for i, out := range p.outs {
		if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
			p.close(true)
			return nil, fmt.Errorf("scale: worker %d did not get ready: %q, %v", i, line, err)
		}
	}
	return p, nil
}

// run starts the workers together and returns their reports and the time
// from the start to the last report.
func (p *procs) run() ([]workerReport, time.Duration, error) {
	start := time.Now()
	for _, in := range p.stdins {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			return nil, 0, err
		}
	}
	reps := make([]workerReport, len(p.outs))
	errs := make([]error, len(p.outs))
	var wg sync.WaitGroup
	for i, out := range p.outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := json.NewDecoder(out).Decode(&reps[i]); err != nil {
				errs[i] = fmt.Errorf("scale: worker %d: no report: %w", i, err)
			}
		}()
	}
	wg.Wait()
	return reps, time.Since(start), errors.Join(errs...)
}

// close ends the workers: it closes their input and waits for them,
// killing them first if kill.
func (p *procs) close(kill bool) {
	for i, cmd := range p.cmds {
		_ = p.stdins[i].Close()
		if kill {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}
}
