// Command family measures the lock family (shared holds, numbered permits,
// AcquireAll) on a real redis-server that it starts, behind the benchmarks'
// delaying proxy, and prints the page family.md; with -write it writes it.
//
//	cd benchmarks && go run ./cmd/family -write
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/reqlock/reqlock/benchmarks/family"
)

func main() {
	p := family.DefaultParams()
	flag.DurationVar(&p.RTT, "rtt", p.RTT, "simulated round trip")
	flag.IntVar(&p.Cycles, "cycles", p.Cycles, "lock cycles per goroutine")
	flag.DurationVar(&p.Critical, "critical", p.Critical, "each holder's critical section")
	write := flag.Bool("write", false, "write family.md into -dir")
	dir := flag.String("dir", ".", "the benchmarks directory, for -write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := family.Run(ctx, p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var b strings.Builder
	if err := rep.WriteMarkdown(&b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(b.String())
	if *write {
		if err := os.WriteFile(filepath.Join(*dir, "family.md"), []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
