// Command orders is an orders service whose create, pay and cancel
// endpoints never run twice at once for the same order, over HTTP (gin) and
// gRPC alike, locked with reqlock's middleware and interceptor.
//
//	go run ./examples/orders            # serve on 127.0.0.1:8080 (HTTP) and 127.0.0.1:9090 (gRPC), debug page on 127.0.0.1:6060
//	go run ./examples/orders -demo      # fire concurrent duplicates at itself, print a table and the lock modes' figures, exit
//	go run ./examples/orders -demo -telemetry=stdout   # ... and print its traces and metrics as JSON
//	go run ./examples/orders -help      # every flag, and the environment variables they fall back to
//
// Its HTTP API shows reqlock's three lock modes (gRPC serves create, pay
// and cancel):
//
//	GET  /orders/:id               read an order: a shared hold (ginlock.WithSharedReads), so reads run
//	                               together and never beside a create, pay, cancel or transfer of it
//	POST /orders/:id               create it, {"amount_cents":N}: exclusive, like pay and cancel
//	POST /orders/:id/pay           pay it
//	POST /orders/:id/cancel        cancel it
//	POST /orders/:id/transfer/:to  move {"amount_cents":N} from order :id to order :to, both created:
//	                               a key of two names (keyfunc.Templates) holds both orders, all or
//	                               none, in one canonical order (Locker.AcquireAll), so that crossing
//	                               transfers never deadlock; each order's write carries its own fence
//	GET  /items/:sku               an item's stock, per segment
//	POST /items/:sku/buy           the flash sale: one of 5 permits of the item (ginlock.WithPermits(5)),
//	                               selling one unit from the segment of its slot (Lease.Slot); 409 with
//	                               "retry": true when the segments with stock are being sold from, 410
//	                               when the item is sold out
//
// Item 10001 is stocked at start-up with 100 units, 20 in each of its 5
// segments (the "segmented lock" of a hot item). With the service running:
//
//	curl -X POST http://127.0.0.1:8080/orders/44 -H 'Content-Type: application/json' -d '{"amount_cents":1000}'
//	curl -X POST http://127.0.0.1:8080/orders/45 -H 'Content-Type: application/json' -d '{"amount_cents":500}'
//	curl -X POST http://127.0.0.1:8080/orders/44/transfer/45 -H 'Content-Type: application/json' -d '{"amount_cents":250}'
//	curl http://127.0.0.1:8080/orders/45
//	curl -X POST http://127.0.0.1:8080/items/10001/buy
//	curl http://127.0.0.1:8080/items/10001
//
// The -demo ends with their figures: concurrent GETs of one order (the most
// readers inside at once), a flash sale of 100 units to 150 buyers (sold,
// oversold, the most sellers inside at once) and crossing transfers (done,
// timed out, the sum of the two amounts), each with the lock's wait p50 and
// p99. On a store that keeps one holder per name (the SQL stores, for
// now), reads are locked exclusively and the flash sale answers 501.
//
// It listens on the loopback interface only, so that nothing outside the
// machine reaches it by default; -http and -grpc choose other addresses
// (-http :8080 listens on every interface).
//
// Its admin port (-admin, default 127.0.0.1:6060, always on loopback; -admin
// off for none) serves reqlock's live debug page (package lockdebug) at
// http://127.0.0.1:6060/debug/reqlock/: the locks this process holds, with
// their names and holders, the requests waiting for one, and a histogram of
// the lock waits of the last five minutes; its JSON is at
// /debug/reqlock/json.
//
// Traces and metrics go to an OpenTelemetry collector over OTLP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, or each signal alone when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or _METRICS_ENDPOINT is; over HTTP by
// default, over gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc (see -telemetry).
// At exit, the last of them are flushed for at most 5 s.
//
// It keeps its locks in an embedded Redis (miniredis) unless REDIS_ADDR names
// a real one, or in another store:
//
//	go run ./examples/orders -store etcd -store-addr 127.0.0.1:2379
//	DATABASE_URL=postgres://localhost/orders go run ./examples/orders -store postgres
//
// -store is one of redis, etcd, zookeeper, postgres, mysql and memcached;
// the address comes from -store-addr or from the store's environment
// variable: REDIS_ADDR, ETCD_ENDPOINTS, ZOOKEEPER_SERVERS, DATABASE_URL,
// MYSQL_DSN, MEMCACHED_SERVERS.
//
// It shows the limits a locked service needs (see Config): the servers'
// timeouts, a body read whole and bounded (64 KiB) before the lock is taken,
// a budget per request below the lock's TTL, and fencing tokens that its
// store checks before every write.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	cfg := defaultConfig()
	defineFlags(flag.CommandLine, &cfg)
	flag.Parse()
	cfg.fromEnv(os.Getenv)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := setupTelemetry(ctx, cfg.Telemetry, os.Stdout)
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
		err = errors.Join(err, stopTelemetry(shutdown, shutdownTimeout)) // flushes the last spans and metrics
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// defineFlags defines the command's flags on fs, over cfg's defaults. A
// flag that falls back to an environment variable names it in its help.
func defineFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr,
		"HTTP listen address, host:port. The default listens on the loopback interface only; "+
			"-http :8080 (or 0.0.0.0:8080) listens on every interface, port 0 picks a free one")
	fs.StringVar(&cfg.GRPCAddr, "grpc", cfg.GRPCAddr,
		"gRPC listen address, host:port. The default listens on the loopback interface only; "+
			"-grpc :9090 (or 0.0.0.0:9090) listens on every interface, port 0 picks a free one")
	fs.StringVar(&cfg.AdminAddr, "admin", cfg.AdminAddr,
		"admin listen address, host:port on the loopback interface only (port 0 picks a free one), or off: it serves "+
			"reqlock's live debug page (who holds and waits for which lock) at "+debugPath)
	fs.BoolVar(&cfg.Demo, "demo", false, "listen on free loopback ports, fire concurrent duplicate requests at the service, print a table, then the lock modes' figures "+
		"(concurrent reads, a flash sale, crossing transfers), and exit")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a request waits for a busy order before it is answered 409 / Aborted")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "simulated work inside each locked handler")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "where the locks are kept: "+storeNames())
	fs.StringVar(&cfg.StoreAddr, "store-addr", "", "the lock store's address. If unset, it is read from the store's environment variable: "+storeEnvHelp())
	fs.StringVar(&cfg.Telemetry, "telemetry", cfg.Telemetry, telemetryHelp)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, `Usage: go run ./examples/orders [flags]

An orders service whose requests for one order never run at once, over
HTTP and gRPC. With no flags and no environment, it serves
  HTTP on %s and gRPC on %s (loopback only),
  the live debug page of its locks on http://%s/debug/reqlock/ (-admin),
keeps its locks in an embedded Redis (miniredis) and prints curl commands
to try it: orders (GETs share an order's lock, writes hold it alone),
transfers between two orders (both locked at once) and a flash sale of
item %s, stocked at start-up with %d units in %d segments (%d permits).

Flags:
`, defaultConfig().HTTPAddr, defaultConfig().GRPCAddr, defaultConfig().AdminAddr, flashSKU, flashPerSegment*itemSegments, itemSegments, itemSegments)
		fs.PrintDefaults()
	}
}

// storeEnvHelp lists the stores' environment variables, for -store-addr's
// help: "ETCD_ENDPOINTS (-store etcd), ..., REDIS_ADDR (-store redis; if
// unset too: an embedded miniredis), ...".
func storeEnvHelp() string {
	var b strings.Builder
	for i, name := range strings.Split(storeNames(), "|") {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (-store %s", storeEnv[name], name)
		if name == "redis" {
			b.WriteString("; if unset too: an embedded miniredis")
		}
		b.WriteString(")")
	}
	return b.String()
}

// fromEnv completes cfg, once the flags are parsed, from the environment
// that getenv reads: the store's address when -store-addr is not set.
func (cfg *Config) fromEnv(getenv func(string) string) {
	if cfg.StoreAddr == "" {
		cfg.StoreAddr = getenv(storeEnv[cfg.Store])
	}
}
