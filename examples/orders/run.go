package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"google.golang.org/grpc"

	"github.com/reqlock/reqlock/core"
	lockotel "github.com/reqlock/reqlock/otel"
)

// Config is the service's configuration, from flags and the environment.
//
// The limits come in an order that keeps a lock from outliving the work
// it protects:
//
//   - ReadTimeout and MaxBody bound what a client can make the server read,
//     and they act before any lock is taken: the HTTP handlers read the whole
//     body (at most MaxBody bytes, within ReadTimeout) before the lock
//     middleware runs, and gRPC reads the whole message (at most MaxBody
//     bytes) before it calls the interceptors. A client that trickles its
//     body, or sends a huge one, never holds an order's lock.
//   - HandlerTimeout bounds a locked request, from the lock wait to the
//     answer: its context is cancelled then, and the store stops.
//   - TTL, the lock's lifetime in Redis, is well above HandlerTimeout, so a
//     running handler never outlives its lock; it only decides how long an
//     order stays locked after an instance crashed holding it. (Handlers
//     that cannot be bounded use core.WithWatchdog instead.)
//   - Fencing (core.WithFencing) covers what no timeout can: a process
//     frozen after its last check. The store refuses a write that carries a
//     lower fencing token than one it has accepted for the order.
type Config struct {
	HTTPAddr  string        // HTTP listen address
	GRPCAddr  string        // gRPC listen address
	AdminAddr string        // the admin port's listen address (the debug page), loopback only; "off" or "" for none
	Store     string        // where the locks are kept: a key of storeEnv
	StoreAddr string        // the store's address; "" with Store "redis" starts an embedded miniredis
	Demo      bool          // run the demo on free loopback ports and exit
	Telemetry string        // where traces and metrics go: stdout, otlp, none or auto (see setupTelemetry)
	Wait      time.Duration // lock wait budget
	Work      time.Duration // simulated work in each locked handler

	ReadTimeout    time.Duration // HTTP: reading a whole request, body included; gRPC: the connection handshake
	HandlerTimeout time.Duration // a locked request's budget, lock wait included
	MaxBody        int64         // largest HTTP request body, or gRPC request message, in bytes
	TTL            time.Duration // the locks' TTL; must be above HandlerTimeout
}

func defaultConfig() Config {
	return Config{
		// Loopback only: nothing outside the machine reaches a service
		// started with no flags (-http and -grpc choose other addresses).
		HTTPAddr: "127.0.0.1:8080", GRPCAddr: "127.0.0.1:9090", AdminAddr: "127.0.0.1:6060", Store: "redis", Telemetry: "auto",
		Wait: 50 * time.Millisecond, Work: 20 * time.Millisecond,
		ReadTimeout: 5 * time.Second, HandlerTimeout: 2 * time.Second, MaxBody: 64 << 10, TTL: 6 * time.Second,
	}
}

// check reports a configuration whose limits do not fit together.
func (cfg Config) check() error {
	switch {
	case cfg.ReadTimeout <= 0 || cfg.HandlerTimeout <= 0 || cfg.MaxBody <= 0:
		return fmt.Errorf("the read timeout (%v), the handler timeout (%v) and the body limit (%d) must be positive",
			cfg.ReadTimeout, cfg.HandlerTimeout, cfg.MaxBody)
	case cfg.TTL <= cfg.HandlerTimeout:
		return fmt.Errorf("the lock TTL (%v) must be above the handler timeout (%v), or a slow handler outlives its lock",
			cfg.TTL, cfg.HandlerTimeout)
	}
	return checkAdmin(cfg.AdminAddr)
}

// run serves until ctx ends, or runs the demo, writing to w.
func run(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Demo {
		cfg.HTTPAddr, cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0", "off"
	}
	a, err := start(cfg)
	if err != nil {
		return err
	}
	defer a.close()
	if cfg.Demo {
		res, err := a.demo(ctx, demoOrders, demoDuplicates)
		if err != nil {
			return err
		}
		res.print(w, cfg)
		if res.overlaps != 0 {
			return fmt.Errorf("%d overlapping critical sections: mutual exclusion is broken", res.overlaps)
		}
		modes, err := a.demoModes(ctx)
		if err != nil {
			return err
		}
		modes.print(w)
		if bad := modes.broken(); bad != "" {
			return fmt.Errorf("the lock modes' demo: %s", bad)
		}
		return nil
	}
	a.printUsage(w)
	select {
	case <-ctx.Done():
	case err := <-a.failed:
		return err
	}
	fmt.Fprintln(w, "orders: shutting down")
	return nil
}

// app is a running orders service.
type app struct {
	cfg      Config
	storeAt  string // where the locks are kept, for the banner
	cli      string // the reqlock command's flags for the store, for the banner
	store    *store
	waits    *waits
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
	httpAddr string
	grpcAddr string
	// adminAddr is where the admin port serves the debug page, "" with
	// -admin off.
	adminAddr string
	failed    chan error // a server stopped on its own
	closers   []func()
}

// start connects to the lock store (or starts miniredis), builds the Locker
// and starts both servers.
func start(cfg Config) (_ *app, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, failed: make(chan error, 3)}
	defer func() {
		if err != nil {
			a.close() // what was started before the failure
		}
	}()
	ls, err := openStore(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, ls.close)
	a.storeAt, a.cli = ls.where, ls.cli
	a.waits = &waits{}
	observers := []core.Observer{lockotel.New(), a.waits}
	page, err := newDebugPage(cfg)
	if err != nil {
		return nil, err
	}
	if page != nil {
		observers = append(observers, page)
	}
	locker := core.NewWithStore(ls.store, core.WithTTL(cfg.TTL), core.WithFencing(), core.WithWait(cfg.Wait),
		core.WithSpin(2*time.Millisecond, 3*time.Millisecond), core.WithObservers(observers...))
	if err := locker.Err(); err != nil {
		return nil, err
	}
	a.store = newStore(locker, cfg.Work)
	a.store.stock(flashSKU, flashPerSegment) // the flash sale's item: 100 units in 5 segments of 20

	gin.SetMode(gin.ReleaseMode)
	h, err := httpHandler(a.store, locker, cfg)
	if err != nil {
		return nil, err
	}
	gs, err := grpcServer(a.store, locker, cfg)
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		hl.Close()
		return nil, err
	}
	a.httpAddr, a.grpcAddr = hl.Addr().String(), gl.Addr().String()
	a.httpSrv, a.grpcSrv = httpServer(h, cfg), gs
	httpDone, grpcDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := a.httpSrv.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
			a.failed <- fmt.Errorf("HTTP server: %w", err)
		}
	}()
	go func() {
		defer close(grpcDone)
		if err := a.grpcSrv.Serve(gl); err != nil {
			a.failed <- fmt.Errorf("gRPC server: %w", err)
		}
	}()
	// Closers run last first: servers stop before the store goes.
	a.closers = append(a.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.httpSrv.Shutdown(ctx)
		<-httpDone
		a.grpcSrv.GracefulStop()
		<-grpcDone
	})
	if page != nil {
		if err := a.serveAdmin(page); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// close stops the servers, then the store.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// printUsage tells how to call the service: curl commands that work as
// they are printed (a POSIX shell runs the line with & as two concurrent
// requests), and, for gRPC, grpcurl commands said to be optional.
func (a *app) printUsage(w io.Writer) {
	h, g := "http://"+loopback(a.httpAddr), loopback(a.grpcAddr)
	fmt.Fprintf(w, `orders: HTTP on %[1]s, gRPC on %[2]s; locks in %[3]s
%[13]sRequests for one order never run at once; a duplicate waits up to %[4]v, then gets 409 / Aborted.
Bodies are read whole (at most %[5]d bytes, within %[6]v) before the lock; a request has %[7]v, its lock a TTL of %[8]v.

Try it with curl: create order 42, pay it twice at once (one pays, the other waits for the lock,
then finds it paid: 422, or gives up: 409), cancel it (422: it is paid), read it:
  curl -X POST %[1]s/orders/42 -H 'Content-Type: application/json' -d '{"amount_cents":1250}'
  curl -X POST %[1]s/orders/42/pay & curl -X POST %[1]s/orders/42/pay; wait
  curl -X POST %[1]s/orders/42/cancel
  curl %[1]s/orders/42
GETs of an order hold it shared: they run together, never beside a create, pay, cancel or transfer of it.

Transfer cents between two created orders: both are locked at once, all or none, in one order
(so that transfers crossing each other never deadlock); an order to itself is refused (422):
  curl -X POST %[1]s/orders/44 -H 'Content-Type: application/json' -d '{"amount_cents":1000}' & curl -X POST %[1]s/orders/45 -H 'Content-Type: application/json' -d '{"amount_cents":500}'; wait
  curl -X POST %[1]s/orders/44/transfer/45 -H 'Content-Type: application/json' -d '{"amount_cents":250}'

Flash sale: item %[9]s was stocked at start-up with %[10]d units in %[11]d segments of %[12]d. Up to %[11]d buyers hold a
permit of it at once, each selling from its own segment; 409 means retry (the segments with stock are
being sold from), 410 sold out. Buy one, then see its stock:
  curl -X POST %[1]s/items/%[9]s/buy
  curl %[1]s/items/%[9]s

gRPC serves the same orders (service orders.v1.Orders, with server reflection). To call it by hand,
optionally, use grpcurl, a curl-like command-line client for gRPC that is not part of this
repository (https://github.com/fullstorydev/grpcurl):
  grpcurl -plaintext -d '{"order_id":"43","amount_cents":990}' %[2]s orders.v1.Orders/Create
  grpcurl -plaintext -d '{"order_id":"43"}' %[2]s orders.v1.Orders/Pay
Or run "go run ./examples/orders -demo", which calls both transports itself.

Ctrl-C stops it.
`, h, g, a.storeAt, a.cfg.Wait, a.cfg.MaxBody, a.cfg.ReadTimeout, a.cfg.HandlerTimeout, a.cfg.TTL,
		flashSKU, flashPerSegment*itemSegments, itemSegments, flashPerSegment, a.debugLine()+a.cliLine())
}

// debugLine is the banner's line about the debug page, "" without one.
func (a *app) debugLine() string {
	if a.adminAddr == "" {
		return ""
	}
	return "Who holds and waits for which lock, live (the admin port, loopback only): " + a.debugURL() + "\n"
}

// cliLine is the banner's line about the reqlock command.
func (a *app) cliLine() string {
	if a.cli == "" {
		return ""
	}
	return "Who holds which lock, from a shell (the store's view, every process): go run ./cmd/reqlock " + a.cli + " watch order:\n"
}

// loopback turns a listen address like "[::]:8080" into one to call.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
