// Command seed reproduces the seed document's hot-lock experiment on a real
// redis-server that it starts: 3 worker processes × 400 attempts on lock_key
// in rounds of 4 parallel acquires, wait 3 s, TTL 10 s, sleep 10–20 ms,
// counting SET commands with INFO commandstats, for reqlock without and with
// the hotspot Guard, and with local handoff, and for the peers, every client
// reaching Redis through a proxy that adds a simulated round trip. It prints
// a Markdown table; cmd/compare runs the other scenarios too and writes the
// README.
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
	p.RegisterFlags(flag.CommandLine)
	impls := flag.String("impl", "", "comma-separated implementations to run (default all)")
	flag.Parse()
	list, err := seed.Lookup(*impls)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := seed.Run(ctx, p, list, seed.Scenarios{Seed: true}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
