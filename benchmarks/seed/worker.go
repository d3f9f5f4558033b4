package seed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// workerEnv carries a worker's job, as JSON, to the process it runs in.
const workerEnv = "REQLOCK_SEED_WORKER"

// job is what the runner asks of one worker process.
type job struct {
	Impl   string
	Addr   string
	Params Params
	Proc   int
}

// report is what a worker process sends back, as one line of JSON.
type report struct {
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	RoundTrips    int64
	Waits         []time.Duration // of the successful acquires
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
		fmt.Fprintln(os.Stderr, "seed worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runWorker opens the lock, warms it up, says "ready", waits for a line on
// in, runs its attempts and writes its report to out.
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
	lock, err := impl.Open(&Env{Addr: j.Addr, Params: j.Params, Client: client, RoundTrips: rt})
	if err != nil {
		return err
	}
	if c, ok := lock.(io.Closer); ok {
		defer c.Close()
	}

	// Warm up outside the counts: connections dialled, scripts loaded.
	ctx := context.Background()
	release, err := lock.Acquire(ctx, fmt.Sprintf("%s:warm-up:%d", j.Params.Name, j.Proc))
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := release(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := critical.Ping(ctx).Err(); err != nil {
		return err
	}
	rt.n.Store(0)

	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	r := attempts(ctx, lock, critical, j.Params)
	r.RoundTrips = rt.Load()
	if c, ok := lock.(Counted); ok {
		r.Counters = c.Counters()
	}
	return json.NewEncoder(out).Encode(r)
}

// attempts runs p.Attempts acquires of p.Name in rounds of p.Goroutines
// parallel ones, as the seed's instances do.
func attempts(ctx context.Context, lock Lock, critical *redis.Client, p Params) *report {
	r := &report{Waits: make([]time.Duration, 0, p.Attempts)}
	var mu sync.Mutex
	for done := 0; done < p.Attempts; {
		n := min(p.Goroutines, p.Attempts-done)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				attempt(ctx, lock, critical, p, r, &mu)
			}()
		}
		wg.Wait()
		done += n
	}
	return r
}

// attempt is one acquire, critical section and release. The critical section
// is two round trips on a key of its own, which also detect an overlap across
// processes: INCR finds another holder inside, DECR leaves.
func attempt(ctx context.Context, lock Lock, critical *redis.Client, p Params, r *report, mu *sync.Mutex) {
	start := time.Now()
	release, err := lock.Acquire(ctx, p.Name)
	wait := time.Since(start)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		r.Failed++
		r.noteError(err)
		return
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
	r.Waits = append(r.Waits, wait)
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
