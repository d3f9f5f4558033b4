package lockbench

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

// Scenarios selects what a run measures.
type Scenarios struct {
	Contention bool // the contention experiment: rounds of parallel attempts on one name
	Hot        bool // a continuous hot key for a fixed time
	Solo       bool // uncontended acquires of distinct names
	Scaling    bool // one name, more and more contenders
	// Stores runs reqlock on every store of Params.Stores: uncontended
	// acquires and the contention experiment, each server started by the
	// runner.
	Stores bool
}

// AllScenarios runs everything.
var AllScenarios = Scenarios{Contention: true, Hot: true, Solo: true, Scaling: true, Stores: true}

// ParseScenarios reads a comma-separated list of scenarios (contention,
// hot, solo, scaling, stores); "" or "all" is AllScenarios.
func ParseScenarios(list string) (Scenarios, error) {
	if list == "" || list == "all" {
		return AllScenarios, nil
	}
	var s Scenarios
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "contention":
			s.Contention = true
		case "hot":
			s.Hot = true
		case "solo":
			s.Solo = true
		case "scaling":
			s.Scaling = true
		case "stores":
			s.Stores = true
		default:
			return s, fmt.Errorf("lockbench: unknown scenario %q (contention, hot, solo, scaling, stores)", name)
		}
	}
	return s, nil
}

// Report is a whole run: its shape, the machine, the server and the results
// of each scenario that ran.
type Report struct {
	Params  Params
	Machine Machine
	Redis   string // server version
	Date    time.Time
	// MeasuredRTT is the median PING round trip through the proxy, which
	// can exceed Params.RTT: the proxy's delays are timer sleeps.
	MeasuredRTT time.Duration
	Results     []Result    // the contention experiment
	Hot         []HotResult // the continuous hot key
	Solo        []SoloResult
	Scale       []ScaleResult // the scaling scenario, by level, then implementation (see ScaleRows)
	// StoreSolo and StoreResults are the stores section: per store, the
	// uncontended acquires, and per setting and store, the contention
	// experiment (Result.Impl is the setting).
	StoreSolo    []SoloResult
	StoreResults []Result
	// StoreVersions are the servers' versions, by store name.
	StoreVersions map[string]string
	// Took is how long the run took, from the server's start to the last
	// scenario's end.
	Took time.Duration
}

// Run starts a redis-server and the delaying proxy in front of it and runs
// the chosen scenarios for each implementation in turn, logging progress to
// log. Every client of every implementation reaches Redis through the proxy.
// The stores section runs first, so that a store server that is not
// installed fails the run at once; it starts its servers, each behind a
// proxy of its own with the same delay, and stops them when it is done.
func Run(ctx context.Context, p Params, impls []Impl, only Scenarios, log io.Writer) (*Report, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	srv, err := redistest.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	proxy, err := redistest.StartProxy(srv.Addr())
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.SetDelay(p.RTT / 2) // each way
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	version, err := serverVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	rtt, err := measureRTT(ctx, proxy.Addr())
	if err != nil {
		return nil, err
	}
	b := &bench{p: p, admin: admin, addr: proxy.Addr(), redis: srv.Addr()}
	rep := &Report{Params: p, Machine: ThisMachine(), Redis: version, Date: time.Now(), MeasuredRTT: rtt}
	if only.Stores {
		if err := b.runStores(ctx, rep, log); err != nil {
			return nil, err
		}
	}
	type step struct {
		scenario   string
		procs      int
		goroutines int // the scaling scenario's level
		what       string
		keep       func(name string, run workerRun)
	}
	var steps []step
	if only.Contention {
		steps = append(steps, step{scenarioContention, p.Procs, 0, fmt.Sprintf("%d processes × %d attempts in rounds of %d", p.Procs, p.Attempts, p.Goroutines),
			func(name string, run workerRun) { rep.Results = append(rep.Results, mergeContention(name, p, run)) }})
	}
	if only.Hot {
		steps = append(steps, step{scenarioHot, p.HotProcs, 0, fmt.Sprintf("hot key, %d processes × %d goroutines for %v", p.HotProcs, p.HotGoroutines, p.HotFor),
			func(name string, run workerRun) { rep.Hot = append(rep.Hot, mergeHot(name, p, run)) }})
	}
	if only.Solo {
		steps = append(steps, step{scenarioSolo, 1, 0, fmt.Sprintf("%d uncontended acquires", p.SoloOps),
			func(name string, run workerRun) { rep.Solo = append(rep.Solo, mergeSolo(name, p, run)) }})
	}
	if only.Scaling {
		for _, g := range p.ScaleGoroutines {
			steps = append(steps, step{scenarioScale, p.ScaleProcs, g, fmt.Sprintf("scaling, %d processes × %d goroutines, %d attempts each", p.ScaleProcs, g, p.ScaleQuota(g)),
				func(name string, run workerRun) { rep.Scale = append(rep.Scale, mergeScale(name, p, g, run)) }})
		}
	}
	// Scenario by scenario, so that the rows of one table run close together
	// in time: the machine may be shared, and its load drifts.
	for _, step := range steps {
		for _, impl := range impls {
			fmt.Fprintf(log, "lockbench: %s: %s...\n", impl.Name, step.what)
			run, err := b.run(ctx, job{Scenario: step.scenario, Impl: impl.Name, Params: p, Goroutines: step.goroutines}, step.procs, nil)
			if err != nil {
				return nil, fmt.Errorf("lockbench: %s: %s: %w", impl.Name, step.scenario, err)
			}
			step.keep(impl.Name, run)
		}
	}
	rep.Took = time.Since(began)
	return rep, nil
}

// bench is the Redis side of a run: the admin client (direct, not through
// the proxy), the address the workers dial and the server's own.
type bench struct {
	p     Params
	admin *redis.Client
	addr  string
	redis string
}

// workerRun is what one scenario of one implementation produced: the
// reports of its worker processes, the wall time from the start signal to
// the last report, and the calls Redis counted per command meanwhile.
type workerRun struct {
	reports  []*report
	wall     time.Duration
	commands map[string]int64
	// stall is the longest a 1 ms sleep of the runner overslept during the
	// run: how long the process that runs the proxy, and so every round
	// trip, was held up by the machine at worst.
	stall time.Duration
	// rtt is the median round trip of a PING through the proxy, sent every
	// 10 ms during the run.
	rtt time.Duration
	// exchanges are the request/response exchanges the store's proxy
	// forwarded during the run (the stores section), from the start signal
	// to the last report.
	exchanges int64
}

// worker is a running worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// run starts procs worker processes for the job's scenario and
// implementation, waits until all are warmed up, clears the data and the
// command statistics, starts them together and collects their reports. It
// counts the exchanges of counted, the proxy of the job's store, if not nil.
func (b *bench) run(ctx context.Context, j job, procs int, counted *redistest.Proxy) (res workerRun, err error) {
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
	for i := range procs {
		j.Addr, j.Proc = b.addr, i
		spec, _ := json.Marshal(j)
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
	if err := b.admin.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	if err := b.admin.ConfigResetStat(ctx).Err(); err != nil {
		return res, err
	}

	stopProbe := startProbe(b.addr)
	defer func() {
		if stopProbe != nil {
			stopProbe()
		}
	}()
	var exchanges int64
	if counted != nil {
		exchanges = counted.Stats().Exchanges
	}
	start := time.Now()
	for _, w := range workers {
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			return res, err
		}
	}
	res.reports = make([]*report, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.reports[i] = new(report)
			if err := json.NewDecoder(w.out).Decode(res.reports[i]); err != nil {
				errs[i] = fmt.Errorf("worker %d: no report: %w", i, err)
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	if counted != nil {
		res.exchanges = counted.Stats().Exchanges - exchanges
	}
	res.stall, res.rtt = stopProbe()
	stopProbe = nil
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.commands, err = commandCalls(ctx, b.admin)
	return res, err
}

// startProbe starts probeStalls and pingProbe; the function it returns
// stops them and returns the longest stall and the median round trip.
func startProbe(addr string) func() (stall, rtt time.Duration) {
	done := make(chan struct{})
	stalls := make(chan time.Duration, 1)
	rtts := make(chan time.Duration, 1)
	go func() { stalls <- probeStalls(done) }()
	go func() { rtts <- pingProbe(addr, done) }()
	return func() (time.Duration, time.Duration) {
		close(done)
		return <-stalls, <-rtts
	}
}

// pingProbe sends a PING through the proxy at addr every 10 ms until done
// is closed and returns the median round trip (0 if none came back).
func pingProbe(addr string, done <-chan struct{}) time.Duration {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var rtts []time.Duration
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			slices.Sort(rtts)
			return percentile(rtts, 50)
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		if c.Ping(ctx).Err() == nil {
			rtts = append(rtts, time.Since(start))
		}
		cancel()
	}
}

// probeStalls sleeps 1 ms at a time until done is closed and returns the
// longest oversleep: a stall of the machine (other work on its cores), seen
// by the process that runs the proxy.
func probeStalls(done <-chan struct{}) time.Duration {
	var worst time.Duration
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return worst
		case <-t.C:
			now := time.Now()
			worst = max(worst, now.Sub(last)-time.Millisecond)
			last = now
		}
	}
}

// commandCalls reads the calls per command Redis executed since CONFIG
// RESETSTAT, leaving out the critical section's INCR and DECR and the
// commands of the runner and of connection set-up. Calls made by scripts
// are counted under their own command as well as under EVALSHA.
func commandCalls(ctx context.Context, admin *redis.Client) (map[string]int64, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(rest, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || notLocking(name) {
			continue
		}
		calls[name] = v
	}
	return calls, nil
}

// notLocking reports the commands that are not the locks' own.
func notLocking(name string) bool {
	switch name {
	case "incr", "decr", "info", "flushdb", "ping", "hello", "select":
		return true
	}
	for _, prefix := range []string{"config|", "client|", "cluster|", "command|"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// pubsubCalls counts the subscription commands among calls: a go-redis
// PubSub sends them past the client's hooks.
func pubsubCalls(calls map[string]int64) int64 {
	return calls["subscribe"] + calls["unsubscribe"] + calls["psubscribe"] + calls["punsubscribe"]
}

// measureRTT returns the median of 100 PING round trips through addr.
func measureRTT(ctx context.Context, addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	rtts := make([]time.Duration, 100)
	for i := range rtts {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		rtts[i] = time.Since(start)
	}
	slices.Sort(rtts)
	return percentile(rtts, 50), nil
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
