package lockbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// workerEnv carries a worker's job, as JSON, to the process it runs in.
const workerEnv = "REQLOCK_BENCH_WORKER"

// The scenarios a worker runs.
const (
	scenarioContention = "contention"
	scenarioHot        = "hot"
	scenarioSolo       = "solo"
	scenarioScale      = "scale"
)

// job is what the runner asks of one worker process.
type job struct {
	Scenario string
	Impl     string
	Addr     string
	Params   Params
	Proc     int
	// Goroutines is the level of the scaling scenario: goroutines per
	// process.
	Goroutines int `json:",omitempty"`
	// Store, in the stores section, names the StoreKind the Locker keeps
	// its locks in, and StoreAddr is the address of the proxy in front of
	// its server. Addr stays the benchmark's Redis, for the critical
	// section.
	Store     string `json:",omitempty"`
	StoreAddr string `json:",omitempty"`
}

// report is what a worker process sends back, as one line of JSON.
type report struct {
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	RoundTrips    int64
	Waits         []time.Duration // of the successful acquires (solo: of acquire+release)
	Acquired      []int64         // hot: when each success took the lock, Unix nanoseconds
	Mallocs       uint64          // solo: heap allocations of the process during the run
	Bytes         uint64          // solo: bytes allocated
	Counters      map[string]int64
	Errors        []string // the first few distinct errors
}

// RunWorkerIfChild runs a worker and exits when the process was started by
// the runner as one; otherwise it returns at once. Call it first in main,
// and in TestMain of tests that call Run.
func RunWorkerIfChild() {
	spec, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	if err := runWorker(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runWorker opens the lock, warms it up, says "ready", waits for a line on
// in, runs its scenario and writes its report to out.
func runWorker(spec string, in io.Reader, out io.Writer) error {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	impl, ok := find(j.Impl)
	if !ok {
		return fmt.Errorf("unknown implementation %q", j.Impl)
	}
	rt := &RoundTrips{}
	client := redis.NewClient(&redis.Options{Addr: j.Addr, ContextTimeoutEnabled: true})
	defer client.Close()
	client.AddHook(rt)
	critical := redis.NewClient(&redis.Options{Addr: j.Addr, ContextTimeoutEnabled: true})
	defer critical.Close()
	ctx := context.Background()
	env := &Env{Addr: j.Addr, Params: j.Params, Client: client, RoundTrips: rt}
	if j.Store != "" {
		kind, ok := findStore(j.Store)
		if !ok {
			return fmt.Errorf("unknown store %q", j.Store)
		}
		conn, err := kind.open(ctx, j.StoreAddr, rt)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", j.Store, j.StoreAddr, err)
		}
		defer conn.close() // after the Lock's Close
		env.Addr, env.Store = j.StoreAddr, conn.store
		if conn.client != nil {
			env.Client = conn.client
		}
	}
	lock, err := impl.Open(env)
	if err != nil {
		return err
	}
	if c, ok := lock.(io.Closer); ok {
		defer c.Close()
	}

	// Warm up outside the counts: as many connections dialled as the
	// scenario runs goroutines, scripts loaded, code paths taken.
	if err := warmUp(ctx, lock, j); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := critical.Ping(ctx).Err(); err != nil {
		return err
	}

	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	rt.n.Store(0)
	var r *report
	switch j.Scenario {
	case scenarioContention:
		r = contentionRounds(ctx, lock, critical, j.Params)
	case scenarioHot:
		r = hotLoop(ctx, lock, critical, j.Params)
	case scenarioSolo:
		r = solo(ctx, lock, j.Params, j.Proc, rt)
	case scenarioScale:
		r = scaleLoop(ctx, lock, critical, j.Params, j.Goroutines)
	default:
		return fmt.Errorf("unknown scenario %q", j.Scenario)
	}
	r.RoundTrips = rt.Load()
	if c, ok := lock.(Counted); ok {
		r.Counters = c.Counters()
	}
	return json.NewEncoder(out).Encode(r)
}

// warmUp acquires and releases distinct names, in parallel as many at a
// time as the scenario has goroutines.
func warmUp(ctx context.Context, lock Lock, j job) error {
	parallel, rounds := 1, 20
	switch j.Scenario {
	case scenarioContention:
		parallel, rounds = j.Params.Goroutines, 2
	case scenarioHot:
		parallel, rounds = j.Params.HotGoroutines, 2
	case scenarioScale:
		parallel, rounds = j.Goroutines, 2
	}
	for round := range rounds {
		errs := make([]error, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				release, err := lock.Acquire(ctx, fmt.Sprintf("%s:warm-up:%d:%d:%d", j.Params.Name, j.Proc, round, i))
				if err == nil {
					err = release(ctx)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// attempt is one acquire, critical section and release; it returns when the
// lock was taken, or the zero time if it was not. The critical section is
// two round trips on a key of its own, which also detect an overlap across
// processes: INCR finds another holder inside, DECR leaves.
func attempt(ctx context.Context, lock Lock, critical *redis.Client, p Params, r *report, mu *sync.Mutex) time.Time {
	start := time.Now()
	release, err := lock.Acquire(ctx, p.Name)
	acquired := time.Now()
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		r.Failed++
		r.noteError(err)
		return time.Time{}
	}
	inside := p.Name + ":inside"
	n, err := critical.Incr(ctx, inside).Result()
	if err == nil {
		err = critical.Decr(ctx, inside).Err()
	}
	rerr := release(ctx)
	mu.Lock()
	defer mu.Unlock()
	r.Succeeded++
	r.Waits = append(r.Waits, acquired.Sub(start))
	if n > 1 {
		r.Overlaps++
	}
	if err != nil {
		r.noteError(fmt.Errorf("critical section: %w", err))
	}
	if rerr != nil {
		r.ReleaseErrors++
		r.noteError(fmt.Errorf("release: %w", rerr))
	}
	return acquired
}

func (r *report) noteError(err error) {
	msg := err.Error()
	for _, seen := range r.Errors {
		if seen == msg {
			return
		}
	}
	if len(r.Errors) < 3 {
		r.Errors = append(r.Errors, msg)
	}
}
