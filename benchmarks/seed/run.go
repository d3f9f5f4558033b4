package seed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
)

// Result is one implementation's row of the table: the sums over its worker
// processes.
type Result struct {
	Impl          string
	Attempts      int
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	SETs          int64 // SET commands Redis executed (INFO commandstats)
	RoundTrips    int64 // Redis round trips of the lock clients
	Wall          time.Duration
	WaitP50       time.Duration // of the successful acquires
	WaitP99       time.Duration
	Counters      map[string]int64
	Errors        []string
}

// Report is a whole run: its shape, the server and the results.
type Report struct {
	Params  Params
	Redis   string // server version
	Results []Result
}

// Run starts a redis-server and runs the experiment for each implementation
// in turn on it, logging progress to log.
func Run(ctx context.Context, p Params, impls []Impl, log io.Writer) (*Report, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	srv, err := redistest.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	version, err := serverVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	rep := &Report{Params: p, Redis: version}
	for _, impl := range impls {
		fmt.Fprintf(log, "seed: %s: %d processes × %d attempts in rounds of %d...\n", impl.Name, p.Procs, p.Attempts, p.Goroutines)
		res, err := runImpl(ctx, admin, srv.Addr(), p, impl)
		if err != nil {
			return nil, fmt.Errorf("seed: %s: %w", impl.Name, err)
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// worker is a running worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// runImpl starts the worker processes for impl, waits until all are warmed
// up, clears the data and the command statistics, starts them together and
// collects their reports.
func runImpl(ctx context.Context, admin *redis.Client, addr string, p Params, impl Impl) (res Result, err error) {
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	var workers []*worker
	defer func() {
		for _, w := range workers {
			_ = w.stdin.Close()
			if err != nil {
				_ = w.cmd.Process.Kill()
			}
			_ = w.cmd.Wait()
		}
	}()
	for i := range p.Procs {
		spec, _ := json.Marshal(job{Impl: impl.Name, Addr: addr, Params: p, Proc: i})
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return res, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		workers = append(workers, &worker{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)})
	}
	for i, w := range workers {
		if line, err := w.out.ReadString('\n'); err != nil || line != "ready\n" {
			return res, fmt.Errorf("worker %d did not get ready: %q, %v", i, line, err)
		}
	}
	if err := admin.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return res, err
	}

	start := time.Now()
	for _, w := range workers {
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			return res, err
		}
	}
	reports := make([]*report, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i] = new(report)
			if err := json.NewDecoder(w.out).Decode(reports[i]); err != nil {
				errs[i] = fmt.Errorf("worker %d: no report: %w", i, err)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	sets, err := setCalls(ctx, admin)
	if err != nil {
		return res, err
	}
	return merge(impl.Name, p, reports, sets, wall), nil
}

// merge sums the workers' reports into a Result.
func merge(name string, p Params, reports []*report, sets int64, wall time.Duration) Result {
	res := Result{Impl: name, Attempts: p.Procs * p.Attempts, SETs: sets, Wall: wall}
	var waits []time.Duration
	for _, r := range reports {
		res.Succeeded += r.Succeeded
		res.Failed += r.Failed
		res.Overlaps += r.Overlaps
		res.ReleaseErrors += r.ReleaseErrors
		res.RoundTrips += r.RoundTrips
		waits = append(waits, r.Waits...)
		for k, v := range r.Counters {
			if res.Counters == nil {
				res.Counters = make(map[string]int64)
			}
			res.Counters[k] += v
		}
		for _, e := range r.Errors {
			if !slices.Contains(res.Errors, e) {
				res.Errors = append(res.Errors, e)
			}
		}
	}
	slices.Sort(waits)
	res.WaitP50, res.WaitP99 = percentile(waits, 50), percentile(waits, 99)
	return res
}

// percentile returns the nearest-rank q-th percentile of sorted, 0 if empty.
func percentile(sorted []time.Duration, q int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (q*len(sorted) + 99) / 100 // ceil(q/100 × n)
	return sorted[max(rank, 1)-1]
}

// setCalls reads the number of SET commands executed since CONFIG RESETSTAT.
func setCalls(ctx context.Context, admin *redis.Client) (int64, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_set:calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		return strconv.ParseInt(calls, 10, 64)
	}
	return 0, nil // no SET since the reset
}

func serverVersion(ctx context.Context, admin *redis.Client) (string, error) {
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "unknown", nil
}
