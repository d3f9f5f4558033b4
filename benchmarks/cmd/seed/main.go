// Command seed reproduces the seed document's hot-lock experiment on a real
// redis-server that it starts: 3 worker processes × 400 attempts on lock_key
// in rounds of 4 parallel acquires, wait 3 s, TTL 10 s, sleep 10–20 ms,
// counting SET commands with INFO commandstats, for reqlock without and with
// the hotspot Guard, and with local handoff. It prints a Markdown table.
//
//	cd benchmarks && go run ./cmd/seed
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/reqlock/reqlock/benchmarks/seed"
)

func main() {
	seed.RunWorkerIfChild()
	p := seed.SeedParams()
	flag.IntVar(&p.Procs, "procs", p.Procs, "worker processes")
	flag.IntVar(&p.Goroutines, "goroutines", p.Goroutines, "parallel acquires per round in a process")
	flag.IntVar(&p.Attempts, "attempts", p.Attempts, "acquires per process")
	flag.StringVar(&p.Name, "name", p.Name, "the lock name")
	flag.DurationVar(&p.Wait, "wait", p.Wait, "wait budget of an acquire")
	flag.DurationVar(&p.TTL, "ttl", p.TTL, "lock TTL")
	impls := flag.String("impl", "", "comma-separated implementations to run (default all)")
	flag.Parse()
	list, err := seed.Lookup(*impls)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := seed.Run(ctx, p, list, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
