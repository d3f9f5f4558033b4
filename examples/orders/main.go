// Command orders is an orders service whose create, pay and cancel
// endpoints never run twice at once for the same order, over HTTP (gin) and
// gRPC alike, locked with reqlock's middleware and interceptor.
//
//	go run ./examples/orders            # serve on 127.0.0.1:8080 (HTTP) and 127.0.0.1:9090 (gRPC)
//	go run ./examples/orders -demo      # fire concurrent duplicates at itself, print a table, exit
//	go run ./examples/orders -demo -telemetry=stdout   # ... and print its traces and metrics as JSON
//	go run ./examples/orders -help      # every flag, and the environment variables they fall back to
//
// It listens on the loopback interface only, so that nothing outside the
// machine reaches it by default; -http and -grpc choose other addresses
// (-http :8080 listens on every interface).
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
	fs.BoolVar(&cfg.Demo, "demo", false, "listen on free loopback ports, fire concurrent duplicate requests at the service, print a table and exit")
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
keeps its locks in an embedded Redis (miniredis) and prints curl commands
to try it.

Flags:
`, defaultConfig().HTTPAddr, defaultConfig().GRPCAddr)
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
