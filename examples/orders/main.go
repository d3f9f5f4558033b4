// Command orders is an orders service whose create, pay and cancel
// endpoints never run twice at once for the same order, over HTTP (gin) and
// gRPC alike, locked with reqlock's middleware and interceptor.
//
//	go run ./examples/orders            # serve on :8080 (HTTP) and :9090 (gRPC)
//	go run ./examples/orders -demo      # fire concurrent duplicates at itself, print a table, exit
//	go run ./examples/orders -demo -telemetry=stdout   # ... and print its traces and metrics as JSON
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
	"syscall"
)

func main() {
	cfg := defaultConfig()
	flag.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address (host:port; port 0 picks a free one)")
	flag.StringVar(&cfg.GRPCAddr, "grpc", cfg.GRPCAddr, "gRPC listen address (host:port; port 0 picks a free one)")
	flag.BoolVar(&cfg.Demo, "demo", false, "listen on free loopback ports, fire concurrent duplicate requests at the service, print a table and exit")
	flag.DurationVar(&cfg.Wait, "wait", cfg.Wait, "how long a request waits for a busy order before it is answered 409 / Aborted")
	flag.DurationVar(&cfg.Work, "work", cfg.Work, "simulated work inside each locked handler")
	flag.StringVar(&cfg.Store, "store", cfg.Store, "where the locks are kept: "+storeNames())
	flag.StringVar(&cfg.StoreAddr, "store-addr", "", "the store's address (default: from its environment variable, see the package doc)")
	flag.Parse()
	if cfg.StoreAddr == "" {
		cfg.StoreAddr = os.Getenv(storeEnv[cfg.Store])
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := setupTelemetry(ctx, *telemetryFlag, os.Stdout)
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
		err = errors.Join(err, stopTelemetry(shutdown, shutdownTimeout)) // flushes the last spans and metrics
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}
