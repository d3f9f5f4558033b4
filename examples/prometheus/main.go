// Command prometheus is a small stock service locked with reqlock's net/http
// middleware, whose lock metrics Prometheus scrapes: lockotel records them on
// an OpenTelemetry MeterProvider whose reader is the OpenTelemetry Prometheus
// exporter, served on /metrics of a port of its own; grafana/reqlock.json,
// beside this file, is a Grafana dashboard of them.
//
//	go run ./examples/prometheus          # serve on 127.0.0.1:8080, metrics on 127.0.0.1:9464/metrics
//	go run ./examples/prometheus -load    # ... and fire a steady, contended load at itself
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/prometheus -load
//	go run ./examples/prometheus -help    # every flag
//
// It keeps its locks and its stock in an embedded Redis (miniredis) unless
// REDIS_ADDR names a real one. Its API:
//
//	GET  /items/{sku}       an item's stock: a shared hold of the item's lock (httplock.WithSharedReads),
//	                        so reads run together and never beside a buy
//	POST /items/{sku}/buy   buy one unit: an exclusive hold, around a read-modify-write of the stock in
//	                        Redis; 409 when the item stayed busy for the wait budget (-wait), 410 sold out
//
// The items of -hot (10001 by default, the flash sale) always take the local
// lock of a hotspot.Guard first, which hands the Redis lock straight to the
// next buyer of this process (hotspot.WithHandoff); other items that turn out
// contended are found and queued locally too (see the hotspot package).
//
//	curl -X POST http://127.0.0.1:8080/items/10001/buy
//	curl http://127.0.0.1:8080/items/10001
//	curl -s http://127.0.0.1:9464/metrics | grep ^reqlock_
//
// Both ports listen on the loopback interface only by default; -http and
// -metrics choose other addresses (-metrics :9464 listens on every
// interface, for a Prometheus on another machine).
//
// # Scraping it
//
// A scrape job in prometheus.yml (Prometheus adds the job and instance
// labels, which the dashboard's hot-name panels group by):
//
//	scrape_configs:
//	  - job_name: reqlock-example
//	    scrape_interval: 15s
//	    static_configs:
//	      - targets: ["127.0.0.1:9464"]
//
// The exporter names the metrics as Prometheus expects: dots become
// underscores, the unit "s" adds _seconds, counters end in _total, and the
// attributes become labels (reqlock.route is reqlock_route):
//
//	reqlock_acquire_duration_seconds_bucket{reqlock_route="POST /items/{sku}/buy",reqlock_mode="exclusive",reqlock_outcome="acquired",le="0.005",...}
//	reqlock_acquires_total{reqlock_route="POST /items/{sku}/buy",reqlock_mode="exclusive",reqlock_outcome="timeout",error_type="timeout",...}
//	reqlock_leases_held, reqlock_acquire_pending, reqlock_hold_duration_seconds_*, reqlock_acquire_attempts_total,
//	reqlock_hotspot_hits_total, _bypasses_total, _evictions_total, _handoffs_total, reqlock_hotspot_size
//
// Import grafana/reqlock.json in Grafana (Dashboards, New, Import) and pick
// the Prometheus data source; the test of this package checks that every
// metric and label its queries use is one this service exports.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	cfg := defaultConfig()
	var load bool
	fs := flag.CommandLine
	fs.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "the service's listen address, host:port (loopback only by default; port 0 picks a free one)")
	fs.StringVar(&cfg.MetricsAddr, "metrics", cfg.MetricsAddr, "the listen address of /metrics, host:port (loopback only by default; :9464 listens on every interface)")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a buy waits for a busy item before it is answered 409")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "simulated work inside each locked buy")
	hot := fs.String("hot", strings.Join(cfg.HotItems, ","), "comma-separated SKUs known to be hot: their buys always queue on a local lock first (hotspot.WithKeys)")
	fs.IntVar(&cfg.HotCapacity, "hot-capacity", cfg.HotCapacity, "local locks of hot names the hotspot guard keeps (hotspot.WithCapacity)")
	fs.BoolVar(&load, "load", false, "fire a steady load of concurrent buys and reads at the service until interrupted, half of it at the first -hot item")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run ./examples/prometheus [flags]

A stock service locked with reqlock, whose lock metrics are served on
/metrics for Prometheus (grafana/reqlock.json is their dashboard). Its locks
and stock are in the Redis at REDIS_ADDR, or in an embedded miniredis when
REDIS_ADDR is unset.

Flags:
`)
		fs.PrintDefaults()
	}
	flag.Parse()
	cfg.HotItems = nil
	for _, sku := range strings.Split(*hot, ",") {
		if sku = strings.TrimSpace(sku); sku != "" {
			cfg.HotItems = append(cfg.HotItems, sku)
		}
	}
	if err := serve(cfg, load); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus example:", err)
		os.Exit(1)
	}
}

// serve runs the service, and the load with load set, until SIGINT or
// SIGTERM.
func serve(cfg Config, load bool) error {
	cfg.RedisAddr = os.Getenv("REDIS_ADDR")
	where := "redis at " + cfg.RedisAddr
	if cfg.RedisAddr == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer mr.Close()
		cfg.RedisAddr, where = mr.Addr(), "an embedded miniredis (set REDIS_ADDR to use a real Redis)"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := start(cfg)
	if err != nil {
		return err
	}
	defer a.close()
	fmt.Printf("stock service on http://%s (locks and stock in %s)\nmetrics on http://%s/metrics\n", a.httpAddr, where, a.metricsAddr)
	if !load {
		fmt.Printf("try: curl -X POST http://%s/items/%s/buy\n", a.httpAddr, cfg.hotItem())
		<-ctx.Done()
		return nil
	}
	fmt.Printf("firing %d concurrent buyers at it; Ctrl-C stops\n", loadBuyers)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	done := make(chan loadResult, 1)
	go func() { done <- a.load(ctx, loadBuyers, 0) }()
	for {
		select {
		case <-tick.C:
			s := a.guard.Stats()
			fmt.Printf("hotspot guard: %d hot names, %d hits, %d hand-overs, %d evictions\n", s.Size, s.Hits, s.Handoffs, s.Evictions)
		case res := <-done:
			fmt.Println(res)
			return nil
		}
	}
}
