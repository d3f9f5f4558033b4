// Command scale measures reqlock at scale (issue 24) on servers it starts
// on 127.0.0.1: the middleware (gin, net/http, gRPC) against the same two
// Redis commands sent by hand, many names uniform and Zipf against the
// hand-written floor with Redis CPU and memory per lock, the same on a
// 3-primary Redis Cluster beside one primary, etcd and ZooKeeper clusters
// beside single servers, and the hand-over gap on a hot name. It prints
// the report as Markdown; -write writes it to scale.md.
//
//	cd benchmarks && go run ./cmd/scale -write
//
// A full run takes about 7 minutes on 2 cores; -sections picks sections, -impl the
// contenders, -procs=false keeps them in one process, and the sizes have
// flags (-h).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"testing"

	"github.com/reqlock/reqlock/benchmarks/scale"
)

func main() {
	scale.RunWorkerIfChild() // the runner starts this program again as its workers
	testing.Init()           // testing.Benchmark reads -test.benchtime
	p := scale.DefaultParams()
	p.RegisterFlags(flag.CommandLine)
	write := flag.Bool("write", false, "write the report to scale.md instead of printing it")
	benchtime := flag.String("benchtime", "1s", "time (or Nx: iterations) of each middleware benchmark run")
	flag.Parse()
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fmt.Fprintln(os.Stderr, "scale: -benchtime:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := scale.Run(ctx, p, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := os.Stdout
	if *write {
		f, err := os.Create("scale.md")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		out = f
	}
	if err := rep.WriteMarkdown(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
