package main

import (
	_ "embed"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"text/template"
	"time"

	"github.com/reqlock/reqlock/benchmarks/lockbench"
)

// chartFile and scaleChartFile are the charts' file names, next to
// README.md: the contention experiment's and the scaling scenario's.
const (
	chartFile      = "compare.png"
	scaleChartFile = "scaling.png"
)

//go:embed readme.md.tmpl
var readmeTemplate string

// readme is what the README template is given.
type readme struct {
	*lockbench.Report
	Best       string
	Fair       string
	Impls      []lockbench.Impl
	StoreKinds []lockbench.StoreKind
	Versions   []module
	// StoreClientVersions are the versions of the stores' clients.
	StoreClientVersions []module
	Chart               string
	ScaleChart          string
}

// module is a dependency of the benchmarks and its version.
type module struct{ Path, Version string }

// peerModules are the modules whose versions the README states.
var peerModules = []string{
	"github.com/bsm/redislock",
	"github.com/go-redsync/redsync/v4",
	"github.com/redis/rueidis",
	"github.com/redis/go-redis/v9",
}

func writeReadme(w io.Writer, rep *lockbench.Report) error {
	verdicts := rep.Verdicts(lockbench.Best)
	var losses []lockbench.Verdict
	for _, v := range verdicts {
		if !v.Beats() {
			losses = append(losses, v)
		}
	}
	t, err := template.New("README").Funcs(template.FuncMap{
		"verdicts": func() []lockbench.Verdict { return verdicts },
		"losses":   func() []lockbench.Verdict { return losses },
		"lossesOn": func(metric string) bool {
			return slices.ContainsFunc(losses, func(v lockbench.Verdict) bool { return v.Metric == metric })
		},
		"mod":       func(a, b int) int { return a % b },
		"ms":        lockbench.MsOf,
		"ms2":       func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) },
		"secs":      lockbench.SecondsOf,
		"minutes":   minutes,
		"target":    func(id string) lockbench.Target { t, _ := rep.Target(id); return t },
		"headroom":  headroom,
		"handoffK":  func() int { return lockbench.HandoffK },
		"handoffK1": func() int { return lockbench.HandoffK + 1 },
	}).Parse(readmeTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, readme{Report: rep, Best: lockbench.Best, Fair: lockbench.Fair, Impls: lockbench.Impls, StoreKinds: lockbench.Stores, Versions: versions(), StoreClientVersions: versions(storeClientModules...), Chart: chartFile, ScaleChart: scaleChartFile})
}

// minutes says how long d is, to the half minute.
func minutes(d time.Duration) string {
	m := math.Round(d.Minutes()*2) / 2
	if m <= 1 {
		return "about a minute"
	}
	return fmt.Sprintf("about %g minutes", m)
}

// headroom says how much of limit is left above floor.
func headroom(floor, limit time.Duration) string {
	if limit >= floor {
		return lockbench.MsOf(limit - floor)
	}
	return fmt.Sprintf("nothing (it is %s below that floor)", lockbench.MsOf(floor-limit))
}

// storeClientModules are the stores' clients whose versions the README
// states (go-redis and rueidis are among the peers').
var storeClientModules = []string{
	"go.etcd.io/etcd/client/v3",
	"github.com/go-zookeeper/zk",
	"github.com/jackc/pgx/v5",
	"github.com/go-sql-driver/mysql",
	"github.com/bradfitz/gomemcache",
}

// versions reads the versions of modules from the binary's build
// information: the peers' by default.
func versions(modules ...string) []module {
	if len(modules) == 0 {
		modules = peerModules
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var out []module
	for _, path := range modules {
		for _, dep := range info.Deps {
			if dep.Path == path {
				out = append(out, module{dep.Path, dep.Version})
			}
		}
	}
	return out
}
