// Command contention runs the contention experiment on a real redis-server
// that it starts: 3 worker processes × 400 attempts on lock_key in rounds of
// 4 parallel acquires, wait 3 s, TTL 10 s, sleep 10–20 ms, a critical section
// of two round trips, counting SET commands with INFO commandstats, for the
// plain spin lock (SET NX PX, a random sleep, a compare-and-delete release),
// the peers, and reqlock without and with the hotspot Guard, local hand-off,
// wake-ups and the fair queue, every client reaching Redis through a proxy that adds a
// simulated round trip. It prints a Markdown table; cmd/compare runs the
// other scenarios too and writes the README.
//
//	cd benchmarks && go run ./cmd/contention
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/reqlock/reqlock/benchmarks/lockbench"
)

func main() {
	lockbench.RunWorkerIfChild()
	p := lockbench.DefaultParams()
	p.RegisterFlags(flag.CommandLine)
	impls := flag.String("impl", "", "comma-separated implementations to run (default all)")
	flag.Parse()
	list, err := lockbench.Lookup(*impls)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := lockbench.Run(ctx, p, list, lockbench.Scenarios{Contention: true}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
