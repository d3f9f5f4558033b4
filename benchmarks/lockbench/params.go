package lockbench

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Params is the shape of one run: the lock settings every implementation is
// given, the simulated network, and the shape of each scenario.
type Params struct {
	// The contention experiment (scenario 1).
	Procs      int    // worker processes
	Goroutines int    // parallel acquires per round in a process
	Attempts   int    // acquires per process, in rounds of Goroutines
	Name       string // the lock name all attempts contend for

	// Lock settings, for every implementation whose API has them.
	Wait       time.Duration // wait budget of an acquire
	TTL        time.Duration // lock lifetime
	SpinMin    time.Duration // sleep between attempts: [SpinMin, SpinMin+SpinRandom)
	SpinRandom time.Duration

	// RTT is the round trip the delaying proxy adds to every exchange with
	// Redis (half of it each way); zero forwards without delay.
	RTT time.Duration

	// The continuous hot key (scenario 2): HotProcs processes × HotGoroutines
	// goroutines acquire Name in a loop for HotFor.
	HotProcs      int
	HotGoroutines int
	HotFor        time.Duration

	// The uncontended lock (scenario 3): one goroutine acquires and releases
	// SoloOps distinct names in turn.
	SoloOps int

	// Scaling (scenario 4): for each entry of ScaleGoroutines, ScaleProcs
	// processes × that many goroutines acquire Name one attempt after
	// another, until each process has started ScaleAttempts attempts (at
	// least two per goroutine) or ScaleFor has passed.
	ScaleProcs      int
	ScaleGoroutines []int
	ScaleAttempts   int
	ScaleFor        time.Duration

	// The stores section: reqlock on each of Stores (names of StoreKinds;
	// empty for all), each server started by the runner behind a proxy of
	// its own with the same simulated round trip. StoreSoloOps uncontended
	// acquires per store, and the contention experiment's shape (Procs ×
	// Goroutines) with StoreAttempts attempts per process per row.
	Stores        []string `json:",omitempty"`
	StoreSoloOps  int
	StoreAttempts int
}

// ScaleQuota is how many attempts each process starts at a level of the
// scaling scenario with goroutines goroutines per process: ScaleAttempts,
// and at least two per goroutine.
func (p Params) ScaleQuota(goroutines int) int {
	return max(p.ScaleAttempts, 2*goroutines)
}

// DefaultRTT is the simulated round trip of a run: a client one millisecond
// away from Redis, as across availability zones of one region.
const DefaultRTT = time.Millisecond

// DefaultParams returns the shape of the contention experiment: 3 processes
// × 400 attempts on lock_key in rounds of 4 parallel acquires (1200 attempts
// in all), wait 3 s, TTL 10 s, sleep 10–20 ms, over a simulated round trip
// of DefaultRTT; and the other scenarios at the same scale: 3 × 4
// goroutines on one hot key for 5 s, 500 uncontended acquires, and 3
// processes × 1, 4, 16 and 64 goroutines on one name, 100 attempts per
// process and level (at least two per goroutine), each level cut after 8 s.
// The stores section runs 200 uncontended acquires per store and the
// contention experiment with 200 attempts per process (600 per row), so
// that its 17 rows fit in about three minutes.
func DefaultParams() Params {
	return Params{
		Procs:         3,
		Goroutines:    4,
		Attempts:      400,
		Name:          "lock_key",
		Wait:          3 * time.Second,
		TTL:           10 * time.Second,
		SpinMin:       10 * time.Millisecond,
		SpinRandom:    10 * time.Millisecond,
		RTT:           DefaultRTT,
		HotProcs:      3,
		HotGoroutines: 4,
		HotFor:        5 * time.Second,
		SoloOps:       500,

		ScaleProcs:      3,
		ScaleGoroutines: []int{1, 4, 16, 64},
		ScaleAttempts:   100,
		ScaleFor:        8 * time.Second,

		StoreSoloOps:  200,
		StoreAttempts: 200,
	}
}

// RegisterFlags defines a command-line flag for each field of p on fs, with
// p's values as defaults.
func (p *Params) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&p.Procs, "procs", p.Procs, "contention experiment: worker processes")
	fs.IntVar(&p.Goroutines, "goroutines", p.Goroutines, "contention experiment: parallel acquires per round in a process")
	fs.IntVar(&p.Attempts, "attempts", p.Attempts, "contention experiment: acquires per process")
	fs.StringVar(&p.Name, "name", p.Name, "the lock name")
	fs.DurationVar(&p.Wait, "wait", p.Wait, "wait budget of an acquire")
	fs.DurationVar(&p.TTL, "ttl", p.TTL, "lock TTL")
	fs.DurationVar(&p.SpinMin, "spin", p.SpinMin, "shortest sleep between attempts")
	fs.DurationVar(&p.SpinRandom, "spin-random", p.SpinRandom, "random part of the sleep between attempts")
	fs.DurationVar(&p.RTT, "rtt", p.RTT, "simulated round trip added by the proxy (0: none)")
	fs.IntVar(&p.HotProcs, "hot-procs", p.HotProcs, "hot-key scenario: worker processes")
	fs.IntVar(&p.HotGoroutines, "hot-goroutines", p.HotGoroutines, "hot-key scenario: goroutines per process")
	fs.DurationVar(&p.HotFor, "hot", p.HotFor, "hot-key scenario: how long the goroutines loop")
	fs.IntVar(&p.SoloOps, "solo", p.SoloOps, "uncontended scenario: acquires")
	fs.IntVar(&p.ScaleProcs, "scale-procs", p.ScaleProcs, "scaling scenario: worker processes")
	fs.Var((*intList)(&p.ScaleGoroutines), "scale", "scaling scenario: comma-separated goroutines per process, one level each")
	fs.IntVar(&p.ScaleAttempts, "scale-attempts", p.ScaleAttempts, "scaling scenario: attempts per process and level (at least two per goroutine)")
	fs.DurationVar(&p.ScaleFor, "scale-for", p.ScaleFor, "scaling scenario: time after which a level starts no more attempts")
	fs.Var((*nameList)(&p.Stores), "stores", "stores section: comma-separated stores ("+strings.Join(storeNames(), ", ")+"; default all)")
	fs.IntVar(&p.StoreSoloOps, "store-solo", p.StoreSoloOps, "stores section: uncontended acquires per store")
	fs.IntVar(&p.StoreAttempts, "store-attempts", p.StoreAttempts, "stores section: contention experiment, acquires per process")
}

// nameList is a flag of comma-separated names.
type nameList []string

func (l *nameList) String() string { return strings.Join(*l, ",") }

func (l *nameList) Set(s string) error {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*l = out
	return nil
}

// intList is a flag of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("not a positive integer: %q", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

func (p Params) validate() error {
	if p.Procs < 1 || p.Goroutines < 1 || p.Attempts < 1 {
		return fmt.Errorf("lockbench: procs, goroutines and attempts must be at least 1 (got %d, %d, %d)", p.Procs, p.Goroutines, p.Attempts)
	}
	if p.HotProcs < 1 || p.HotGoroutines < 1 || p.HotFor <= 0 || p.SoloOps < 1 {
		return fmt.Errorf("lockbench: the hot-key scenario needs at least 1 process and goroutine and a positive duration, the uncontended one at least 1 acquire (got %d, %d, %v, %d)", p.HotProcs, p.HotGoroutines, p.HotFor, p.SoloOps)
	}
	if p.ScaleProcs < 1 || len(p.ScaleGoroutines) == 0 || p.ScaleAttempts < 1 || p.ScaleFor <= 0 || slices.Min(p.ScaleGoroutines) < 1 {
		return fmt.Errorf("lockbench: the scaling scenario needs at least 1 process, a level, 1 attempt, a positive duration and at least 1 goroutine per level (got %d, %v, %d, %v)", p.ScaleProcs, p.ScaleGoroutines, p.ScaleAttempts, p.ScaleFor)
	}
	if p.StoreSoloOps < 1 || p.StoreAttempts < 1 {
		return fmt.Errorf("lockbench: the stores section needs at least 1 uncontended acquire and 1 attempt per process (got %d, %d)", p.StoreSoloOps, p.StoreAttempts)
	}
	if _, err := LookupStores(p.Stores); err != nil {
		return err
	}
	if p.Name == "" || p.Wait < 0 || p.TTL <= 0 || p.SpinMin < 0 || p.SpinRandom < 0 || p.RTT < 0 {
		return errors.New("lockbench: the name must not be empty, the TTL must be positive and no duration negative")
	}
	if p.SpinMin+p.SpinRandom <= 0 {
		return errors.New("lockbench: the sleep between attempts must be positive")
	}
	return nil
}
