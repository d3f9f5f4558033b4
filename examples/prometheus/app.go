package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/keyfunc"
	lockotel "github.com/reqlock/reqlock/otel"
)

// Config is the service's configuration.
type Config struct {
	HTTPAddr    string        // the service's listen address
	MetricsAddr string        // the listen address of /metrics
	RedisAddr   string        // the Redis that keeps the locks and the stock
	Wait        time.Duration // a buy's lock wait budget: 409 past it
	Work        time.Duration // simulated work inside each locked buy
	TTL         time.Duration // the locks' TTL, well above a request's budget
	Budget      time.Duration // a locked request's budget, lock wait included
	Stock       int64         // an item's units before its first buy
	HotItems    []string      // SKUs whose locks always queue locally first (hotspot.WithKeys)
	HotCapacity int           // local locks the hotspot guard keeps (hotspot.WithCapacity)
	Handoffs    int           // hand-overs in a row to a local waiter (hotspot.WithHandoff)
}

// defaultConfig is the configuration of a service started with no flags.
func defaultConfig() Config {
	return Config{
		// Loopback only: nothing outside the machine reaches a service
		// started with no flags. 9464 is the port the OpenTelemetry
		// Prometheus exporter's documentation uses.
		HTTPAddr: "127.0.0.1:8080", MetricsAddr: "127.0.0.1:9464",
		Wait: 250 * time.Millisecond, Work: 20 * time.Millisecond,
		TTL: 10 * time.Second, Budget: 5 * time.Second,
		Stock:    1_000_000,
		HotItems: []string{"10001"}, HotCapacity: 64, Handoffs: 4,
	}
}

// hotItem is the item the load buys most: the first of HotItems.
func (cfg Config) hotItem() string {
	if len(cfg.HotItems) > 0 {
		return cfg.HotItems[0]
	}
	return "10001"
}

// itemLock is the lock name of an item; the hotspot guard's WithKeys take
// these names.
func itemLock(sku string) string { return "item:" + sku }

// app is a running service: its Redis client, Locker, metrics pipeline and
// the two HTTP servers.
type app struct {
	cfg       Config
	client    *redis.Client
	locker    *core.Locker
	guard     *hotspot.Guard
	telemetry *lockotel.Handler
	meters    *sdkmetric.MeterProvider

	// work stands in for what a buy does under its lock besides the stock
	// update: it sleeps Config.Work, or less if ctx ends first. A test
	// replaces it before the first request.
	work func(ctx context.Context, r *http.Request)

	httpAddr, metricsAddr string
	servers               []*http.Server
	served                sync.WaitGroup
}

// start builds the service on cfg and listens on its two addresses.
func start(cfg Config) (a *app, err error) {
	a = &app{cfg: cfg}
	a.work = func(ctx context.Context, _ *http.Request) {
		t := time.NewTimer(cfg.Work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()

	// The metrics pipeline: lockotel's instruments on a MeterProvider whose
	// reader is the Prometheus exporter, registered on a registry of this
	// app's own beside the Go runtime's and the process's collectors.
	registry := promclient.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return a, fmt.Errorf("prometheus exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("reqlock-prometheus-example")))
	if err != nil {
		return a, err
	}
	a.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))

	// The Locker: a hotspot guard for the hot items, and lockotel, which
	// also reports the guard's Stats (hot names, hits, hand-overs...).
	keys := make([]string, len(cfg.HotItems))
	for i, sku := range cfg.HotItems {
		keys[i] = itemLock(sku)
	}
	a.guard = hotspot.New(hotspot.WithCapacity(cfg.HotCapacity), hotspot.WithKeys(keys...), hotspot.WithHandoff(cfg.Handoffs))
	if err := a.guard.Err(); err != nil {
		return a, err
	}
	a.telemetry = lockotel.New(lockotel.WithMeterProvider(a.meters), lockotel.WithGuard(a.guard))
	a.client = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, ContextTimeoutEnabled: true})
	a.locker = core.New(a.client, core.WithTTL(cfg.TTL), core.WithWait(cfg.Wait),
		core.WithHandlers(a.guard, a.telemetry))
	if err := a.locker.Err(); err != nil {
		return a, err
	}

	// The service: one middleware locks "item:{sku}", shared for GETs and
	// exclusive for buys; httplock labels each request with its ServeMux
	// pattern, the route of the metrics ("POST /items/{sku}/buy").
	key, err := keyfunc.Template("item:{param.sku}")
	if err != nil {
		return a, err
	}
	lock := httplock.New(a.locker, key, httplock.WithSharedReads())
	mux := http.NewServeMux()
	mux.Handle("GET /items/{sku}", budget(cfg.Budget, lock(http.HandlerFunc(a.show))))
	mux.Handle("POST /items/{sku}/buy", budget(cfg.Budget, lock(http.HandlerFunc(a.buy))))

	metrics := http.NewServeMux()
	metrics.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	if a.httpAddr, err = a.listen(cfg.HTTPAddr, mux); err != nil {
		return a, err
	}
	if a.metricsAddr, err = a.listen(cfg.MetricsAddr, metrics); err != nil {
		return a, err
	}
	return a, nil
}

// listen serves h on addr and returns the address it listens on.
func (a *app) listen(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	a.servers = append(a.servers, srv)
	a.served.Add(1)
	go func() {
		defer a.served.Done()
		_ = srv.Serve(ln) // http.ErrServerClosed after close
	}()
	return ln.Addr().String(), nil
}

// close stops the servers, waiting up to 5 s for requests in flight, then
// the metrics and the Locker.
func (a *app) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range a.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	a.served.Wait()
	if a.telemetry != nil {
		_ = a.telemetry.Close()
	}
	if a.meters != nil {
		_ = a.meters.Shutdown(ctx)
	}
	if a.locker != nil {
		_ = a.locker.Close()
	}
	if a.client != nil {
		_ = a.client.Close()
	}
}

// budget bounds a request, lock wait included, well below the locks' TTL.
func budget(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// stockKey is the Redis key of an item's units left.
func stockKey(sku string) string { return "stock:" + sku }

// item is the answer of both routes.
type item struct {
	SKU  string `json:"sku"`
	Left int64  `json:"left"`
}

// left reads an item's stock: Config.Stock before its first buy.
func (a *app) left(ctx context.Context, sku string) (int64, error) {
	v, err := a.client.Get(ctx, stockKey(sku)).Result()
	if errors.Is(err, redis.Nil) {
		return a.cfg.Stock, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// show answers an item's stock, under a shared hold of its lock.
func (a *app) show(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	n, err := a.left(r.Context(), sku)
	if err != nil {
		http.Error(w, "stock unavailable", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, item{SKU: sku, Left: n})
}

// buy sells one unit of an item. The read, the work and the write are a
// read-modify-write that only the item's exclusive lock keeps from
// overselling. httplock cancels the context when the lease is lost, so
// checking it right before the write keeps a lost lease from writing.
func (a *app) buy(w http.ResponseWriter, r *http.Request) {
	ctx, sku := r.Context(), r.PathValue("sku")
	n, err := a.left(ctx, sku)
	if err != nil {
		http.Error(w, "stock unavailable", http.StatusServiceUnavailable)
		return
	}
	if n <= 0 {
		writeJSON(w, http.StatusGone, item{SKU: sku})
		return
	}
	a.work(ctx, r)
	if ctx.Err() != nil { // the budget ran out, or the lease was lost
		http.Error(w, "buy abandoned", http.StatusServiceUnavailable)
		return
	}
	if err := a.client.Set(ctx, stockKey(sku), n-1, 0).Err(); err != nil {
		http.Error(w, "stock unavailable", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, item{SKU: sku, Left: n - 1})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
