package scale

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Params is the shape of a whole run.
type Params struct {
	// Sections to run: middleware, names, memory, cluster, consensus,
	// handover.
	Sections []string
	// MiddlewareRounds is how many times each middleware benchmark runs
	// (the median is kept); the time of each is -test.benchtime.
	MiddlewareRounds int
	Load             Load    // the many-names run (ZipfS is set per run)
	ZipfS            float64 // the Zipf exponent of the skewed runs
	Shape            Shape
	MemoryLocks      int // locks (and waiters) the memory section holds
	Primaries        int // the cluster's primaries
	ConsensusLoad    Load
	Members          int // etcd members and ZooKeeper servers of the clusters
	Contention       Contention
	// Processes runs each Locker of the many-names, cluster and hand-over
	// runs in a worker process of its own (this executable started again;
	// its main must call RunWorkerIfChild first); otherwise all of them run
	// in this process, each with its own client pool.
	Processes bool
	// Variants are the contenders of the many-names and cluster runs
	// (NamesVariants by default).
	Variants []string
}

// AllSections are the sections in run order.
var AllSections = []string{"middleware", "names", "memory", "cluster", "consensus", "handover"}

// DefaultParams is the full run of issue 24.
func DefaultParams() Params {
	return Params{
		Sections:         AllSections,
		MiddlewareRounds: 5,
		Load:             Load{Lockers: 3, Goroutines: 64, Names: 10000, For: 10 * time.Second},
		ZipfS:            1.1,
		Shape:            Shape{TTL: 10 * time.Second, Wait: time.Second, SpinMin: 10 * time.Millisecond, SpinRandom: 10 * time.Millisecond},
		MemoryLocks:      1000,
		Primaries:        3,
		ConsensusLoad:    Load{Lockers: 3, Goroutines: 16, Names: 10000, For: 5 * time.Second},
		Members:          3,
		Contention:       Contention{Lockers: 3, Goroutines: 16, For: 5 * time.Second, RTT: time.Millisecond},
		Processes:        true,
		Variants:         NamesVariants,
	}
}

// RegisterFlags binds the run's sizes to flags of fs.
func (p *Params) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("sections", "comma-separated sections to run: "+strings.Join(AllSections, ","), func(s string) error {
		list, err := parseSections(s)
		p.Sections = list
		return err
	})
	fs.BoolVar(&p.Processes, "procs", p.Processes, "run each Locker in a worker process of its own (false: all in this process)")
	fs.Func("impl", "comma-separated contenders of the many-names and cluster runs (default: "+strings.Join(NamesVariants, ",")+")", func(s string) error {
		p.Variants = nil
		for _, name := range strings.Split(s, ",") {
			v, err := LookupVariant(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			p.Variants = append(p.Variants, v.Name)
		}
		return nil
	})
	fs.IntVar(&p.MiddlewareRounds, "rounds", p.MiddlewareRounds, "runs of each middleware benchmark (the median is kept)")
	fs.IntVar(&p.Load.Lockers, "lockers", p.Load.Lockers, "Lockers of the many-names run, each with its own client pool")
	fs.IntVar(&p.Load.Goroutines, "goroutines", p.Load.Goroutines, "goroutines per Locker of the many-names run")
	fs.IntVar(&p.Load.Names, "names", p.Load.Names, "names of the many-names run")
	fs.DurationVar(&p.Load.For, "for", p.Load.For, "length of each many-names run")
	fs.DurationVar(&p.Load.Hold, "hold", p.Load.Hold, "critical section of the many-names run")
	fs.Float64Var(&p.ZipfS, "zipf", p.ZipfS, "Zipf exponent of the skewed runs (> 1)")
	fs.DurationVar(&p.Shape.Wait, "wait", p.Shape.Wait, "wait budget of an acquire")
	fs.IntVar(&p.MemoryLocks, "memory-locks", p.MemoryLocks, "locks held (and waiters queued) by the memory section")
	fs.IntVar(&p.Primaries, "primaries", p.Primaries, "primaries of the Redis Cluster")
	fs.DurationVar(&p.ConsensusLoad.For, "consensus-for", p.ConsensusLoad.For, "length of each etcd and ZooKeeper run")
	fs.DurationVar(&p.Contention.For, "handover-for", p.Contention.For, "length of each hand-over run")
	fs.DurationVar(&p.Contention.RTT, "rtt", p.Contention.RTT, "simulated round trip of the hand-over run")
}

func parseSections(s string) ([]string, error) {
	if s == "" || s == "all" {
		return AllSections, nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		ok := false
		for _, known := range AllSections {
			ok = ok || known == name
		}
		if !ok {
			return nil, fmt.Errorf("scale: unknown section %q (%s)", name, strings.Join(AllSections, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

func (p Params) runs(section string) bool {
	for _, s := range p.Sections {
		if s == section {
			return true
		}
	}
	return false
}

func (p Params) validate() error {
	for _, l := range []Load{p.Load, p.ConsensusLoad} {
		if l.Lockers < 1 || l.Goroutines < 1 || l.Names < 2 || l.For <= 0 {
			return fmt.Errorf("scale: a run needs Lockers, goroutines, at least 2 names and a length: %+v", l)
		}
	}
	if p.ZipfS <= 1 {
		return fmt.Errorf("scale: the Zipf exponent must exceed 1, not %g", p.ZipfS)
	}
	if p.Primaries < 1 || p.Members < 1 || p.MemoryLocks < 1 || p.Contention.Lockers < 1 || p.Contention.Goroutines < 1 {
		return fmt.Errorf("scale: primaries, members, memory locks and contenders must be positive")
	}
	return nil
}

// NamesVariants are the contenders of the many-names and cluster runs.
var NamesVariants = []string{Floor, "reqlock", "reqlock+hotspot", "reqlock+hotspot+handoff3", "bsm/redislock", "go-redsync/redsync"}

// HandoverVariants are the contenders of the hand-over run.
var HandoverVariants = []string{Floor, "reqlock", "reqlock+hotspot", "reqlock+hotspot+handoff3", "reqlock+fair+hotspot+handoff3"}

// Report is a whole run.
type Report struct {
	Params     Params
	Date       time.Time
	CPU        string
	Cores      int
	GoVersion  string
	Redis      string
	Took       time.Duration
	Middleware []MiddlewareResult
	Names      []NamesResult // single primary, then the cluster
	Memory     []MemoryResult
	Consensus  []ConsensusResult
	Handover   []HandoverResult
}

// Run runs the chosen sections, starting and stopping its servers, and
// logs progress to log.
func Run(ctx context.Context, p Params, log io.Writer) (*Report, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep := &Report{Params: p, Date: began, CPU: cpuModel(), Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	single, err := LaunchSingle()
	if err != nil {
		return nil, err
	}
	defer single.Close()
	if rep.Redis, err = serverVersion(ctx, single.Primaries[0]); err != nil {
		return nil, err
	}
	addr := single.Primaries[0].Options().Addr
	variants := func(names []string) ([]Variant, error) {
		var out []Variant
		for _, n := range names {
			v, err := LookupVariant(n)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	nv, err := variants(p.Variants)
	if err != nil {
		return nil, err
	}
	names := func(t *Target) error {
		for _, s := range []float64{0, p.ZipfS} {
			load := p.Load
			load.ZipfS = s
			for _, v := range nv {
				fmt.Fprintf(log, "scale: %s, %s, %s, %d × %d over %d names for %v...\n", t.Name, load.Dist(), v.Name, load.Lockers, load.Goroutines, load.Names, load.For)
				r, err := RunNames(ctx, t, v, load, p.Shape, p.Processes)
				if err != nil {
					return fmt.Errorf("scale: %s %s %s: %w", t.Name, load.Dist(), v.Name, err)
				}
				rep.Names = append(rep.Names, r)
			}
		}
		return nil
	}
	if p.runs("middleware") {
		fmt.Fprintln(log, "scale: middleware benchmarks...")
		if rep.Middleware, err = Middleware(addr, p.MiddlewareRounds); err != nil {
			return nil, err
		}
	}
	if p.runs("names") {
		if err := names(single); err != nil {
			return nil, err
		}
	}
	if p.runs("memory") {
		fmt.Fprintln(log, "scale: memory...")
		if rep.Memory, err = Memory(ctx, single.Primaries[0], p.MemoryLocks); err != nil {
			return nil, err
		}
	}
	if p.runs("cluster") {
		fmt.Fprintf(log, "scale: starting a cluster of %d primaries...\n", p.Primaries)
		cluster, err := LaunchCluster(p.Primaries)
		if err != nil {
			return nil, err
		}
		err = names(cluster)
		cluster.Close()
		if err != nil {
			return nil, err
		}
	}
	if p.runs("consensus") {
		fmt.Fprintln(log, "scale: etcd and ZooKeeper, one server and a cluster...")
		if rep.Consensus, err = RunConsensus(ctx, p.ConsensusLoad, p.Shape, p.Members); err != nil {
			return nil, err
		}
	}
	if p.runs("handover") {
		hv, err := variants(HandoverVariants)
		if err != nil {
			return nil, err
		}
		for _, v := range hv {
			fmt.Fprintf(log, "scale: hand-over, %s, %d × %d on one name for %v...\n", v.Name, p.Contention.Lockers, p.Contention.Goroutines, p.Contention.For)
			shape := p.Shape
			shape.Wait = 3 * time.Second // the contention experiment's budget
			r, err := RunHandover(ctx, addr, v, p.Contention, shape, p.Processes)
			if err != nil {
				return nil, err
			}
			rep.Handover = append(rep.Handover, r)
		}
	}
	rep.Took = time.Since(began)
	return rep, nil
}

func serverVersion(ctx context.Context, c *redis.Client) (string, error) {
	info, err := c.Info(ctx, "server").Result()
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
