// Command compare runs every scenario of the benchmarks for reqlock and its
// peers in one run, on a redis-server it starts behind a delaying proxy,
// then reqlock on each of its stores (etcd, ZooKeeper, PostgreSQL, MariaDB,
// memcached, Redis through go-redis and rueidis), whose servers it starts
// too, and prints the results as Markdown; with -write it regenerates
// README.md, compare.png and scaling.png in the benchmarks directory from
// that run.
//
//	cd benchmarks && go run ./cmd/compare -write
//
// -stores runs the stores section alone, on the stores it names ("all" for
// every one):
//
//	cd benchmarks && go run ./cmd/compare -stores all
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/reqlock/reqlock/benchmarks/lockbench"
)

func main() {
	lockbench.RunWorkerIfChild()
	p := lockbench.DefaultParams()
	p.RegisterFlags(flag.CommandLine)
	impls := flag.String("impl", "", "comma-separated implementations to run (default all)")
	scenarios := flag.String("scenarios", "all", "comma-separated scenarios to run: contention, hot, solo, scaling, stores (-write needs all); -stores without -scenarios runs the stores section alone")
	write := flag.Bool("write", false, "write README.md, "+chartFile+" and "+scaleChartFile+" into -dir")
	dir := flag.String("dir", ".", "the benchmarks directory, for -write")
	flag.Parse()
	set := make(map[string]bool)
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["stores"] && !set["scenarios"] {
		*scenarios = "stores"
	}
	if err := run(p, *impls, *scenarios, *write, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(p lockbench.Params, impls, scenarios string, write bool, dir string) error {
	list, err := lockbench.Lookup(impls)
	if err != nil {
		return err
	}
	only, err := lockbench.ParseScenarios(scenarios)
	if err != nil {
		return err
	}
	if write && only != lockbench.AllScenarios {
		return fmt.Errorf("-write regenerates the whole README: it needs every scenario")
	}
	if stores, _ := lockbench.LookupStores(p.Stores); write && len(stores) != len(lockbench.Stores) {
		return fmt.Errorf("-write regenerates the whole README: it needs every store")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := lockbench.Run(ctx, p, list, only, os.Stderr)
	if err != nil {
		return err
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return err
	}
	if !write {
		return nil
	}
	var chart, scaleChart, readme bytes.Buffer
	if err := rep.WriteChart(&chart); err != nil {
		return err
	}
	if err := rep.WriteScaleChart(&scaleChart); err != nil {
		return err
	}
	if err := writeReadme(&readme, rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, chartFile), chart.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, scaleChartFile), scaleChart.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), readme.Bytes(), 0o644)
}
