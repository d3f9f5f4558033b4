package lockbench

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Result is one implementation's row of the contention experiment: the sums over
// its worker processes.
type Result struct {
	Impl          string
	Attempts      int
	Succeeded     int
	Failed        int
	Overlaps      int
	ReleaseErrors int
	SETs          int64            // SET calls Redis executed (INFO commandstats), also those inside scripts
	Scripts       int64            // EVALSHA and EVAL calls
	Commands      map[string]int64 // the locks' calls per command (INFO commandstats)
	RoundTrips    int64            // Redis round trips of the lock clients
	Wall          time.Duration
	WaitP50       time.Duration // of the successful acquires
	WaitP99       time.Duration
	Counters      map[string]int64
	Errors        []string
	// Stall is the longest the runner's 1 ms sleep overslept during the
	// run: other work on the machine, which holds up every round trip
	// through the proxy.
	Stall time.Duration
	// RTT is the median round trip of a PING through the proxy, sent
	// every 10 ms during the run.
	RTT time.Duration
	// Store is the store of a row of the stores section ("" elsewhere), and
	// Exchanges the request/response exchanges its proxy forwarded during
	// the run: the round trips of the store's clients.
	Store     string `json:",omitempty"`
	Exchanges int64  `json:",omitempty"`
}

// contentionRounds runs p.Attempts acquires of p.Name in rounds of
// p.Goroutines parallel ones.
func contentionRounds(ctx context.Context, lock Lock, critical *redis.Client, p Params) *report {
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

// mergeContention sums the workers' reports into a Result.
func mergeContention(name string, p Params, run workerRun) Result {
	t := run.tally()
	return Result{
		Impl:          name,
		Attempts:      p.Procs * p.Attempts,
		Succeeded:     t.succeeded,
		Failed:        t.failed,
		Overlaps:      t.overlaps,
		ReleaseErrors: t.releaseErrors,
		SETs:          run.commands["set"],
		Scripts:       run.commands["evalsha"] + run.commands["eval"],
		Commands:      run.commands,
		RoundTrips:    t.roundTrips,
		Wall:          run.wall,
		WaitP50:       percentile(t.waits, 50),
		WaitP99:       percentile(t.waits, 99),
		Counters:      t.counters,
		Errors:        t.errors,
		Stall:         run.stall,
		RTT:           run.rtt,
		Exchanges:     run.exchanges,
	}
}
