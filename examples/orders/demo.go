package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
)

// The demo's load: each order gets this many concurrent duplicate pay and
// cancel requests, half over HTTP, half over gRPC.
const (
	demoOrders     = 10
	demoDuplicates = 12
)

// waits is a core.Observer that records how long each successful acquire
// waited: the lock's share of a request's latency.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) ObserveAcquire(ctx context.Context, e core.AcquireEvent) core.LeaseObserver {
	if e.Err == nil {
		w.mu.Lock()
		w.d = append(w.d, e.End.Sub(e.Start))
		w.mu.Unlock()
	}
	return nil
}

// percentiles returns the p-th percentiles of the recorded waits.
func (w *waits) percentiles(ps ...float64) []time.Duration {
	w.mu.Lock()
	d := slices.Clone(w.d)
	w.mu.Unlock()
	slices.Sort(d)
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		if len(d) > 0 {
			out[i] = d[min(len(d)-1, int(p*float64(len(d))))]
		}
	}
	return out
}

// tally counts the answers of one transport.
type tally struct {
	requests, accepted, busy, failed atomic.Int64
}

// demoResult is what the demo saw.
type demoResult struct {
	orders, duplicates int
	http, grpc         tally
	overlaps           int64
	p50, p99           time.Duration
	failures           []string
}

// demo creates orders, then fires duplicates concurrent pay and cancel
// requests at each, half over HTTP and half over gRPC, all at once.
func (a *app) demo(ctx context.Context, orders, duplicates int) (*demoResult, error) {
	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rpc := ordersv1.NewOrdersClient(conn)
	tr := &http.Transport{MaxIdleConnsPerHost: orders * duplicates}
	defer tr.CloseIdleConnections()
	web := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "http://" + a.httpAddr + "/orders/"
	run := fmt.Sprintf("demo-%d-", time.Now().UnixNano()) // fresh orders on a shared Redis

	for i := 0; i < orders; i++ {
		if _, err := rpc.Create(ctx, &ordersv1.OrderRequest{OrderId: fmt.Sprint(run, i), AmountCents: 1000 + int64(i)}); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
	}
	a.waits.mu.Lock()
	a.waits.d = nil // the burst's waits only
	a.waits.mu.Unlock()

	res := &demoResult{orders: orders, duplicates: duplicates}
	var mu sync.Mutex
	fail := func(s string) {
		mu.Lock()
		res.failures = append(res.failures, s)
		mu.Unlock()
	}
	startGun := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < orders; i++ {
		id := fmt.Sprint(run, i)
		for d := 0; d < duplicates; d++ {
			op := [...]string{"pay", "cancel"}[d%4/2] // pay, pay, cancel, cancel, ...
			wg.Add(1)
			if d%2 == 0 {
				go func() {
					defer wg.Done()
					<-startGun
					res.http.count(httpCall(ctx, web, base+id+"/"+op), fail)
				}()
			} else {
				go func() {
					defer wg.Done()
					<-startGun
					call := rpc.Pay
					if op == "cancel" {
						call = rpc.Cancel
					}
					_, err := call(ctx, &ordersv1.OrderRequest{OrderId: id})
					res.grpc.count(grpcOutcome(err), fail)
				}()
			}
		}
	}
	close(startGun)
	wg.Wait()
	res.overlaps = a.store.overlaps.Load()
	ps := a.waits.percentiles(0.50, 0.99)
	res.p50, res.p99 = ps[0], ps[1]
	return res, nil
}

// outcome is how a request ended, for the table.
type outcome struct {
	accepted, busy bool
	err            string
}

func (t *tally) count(o outcome, fail func(string)) {
	t.requests.Add(1)
	switch {
	case o.accepted:
		t.accepted.Add(1)
	case o.busy:
		t.busy.Add(1)
	default:
		t.failed.Add(1)
		fail(o.err)
	}
}

// httpCall posts to url: 200 or 422 (the order had moved on) ran under the
// lock, 409 was busy.
func httpCall(ctx context.Context, c *http.Client, url string) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return outcome{err: err.Error()}
	}
	resp, err := c.Do(req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusUnprocessableEntity:
		return outcome{accepted: true}
	case http.StatusConflict:
		if resp.Header.Get("Retry-After") == "" {
			return outcome{err: "409 without Retry-After"}
		}
		return outcome{busy: true}
	}
	return outcome{err: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))}
}

// grpcOutcome classifies a call's error: OK or FailedPrecondition ran under
// the lock, Aborted was busy.
func grpcOutcome(err error) outcome {
	switch status.Code(err) {
	case codes.OK, codes.FailedPrecondition:
		return outcome{accepted: true}
	case codes.Aborted:
		return outcome{busy: true}
	}
	return outcome{err: err.Error()}
}

// print writes the demo's table.
func (r *demoResult) print(w io.Writer, cfg Config) {
	fmt.Fprintf(w, "orders demo: %d orders × %d concurrent duplicate pay/cancel requests (half HTTP, half gRPC)\n", r.orders, r.duplicates)
	fmt.Fprintf(w, "handler work %v, lock wait budget %v, handler budget %v, lock TTL %v (fenced)\n\n",
		cfg.Work, cfg.Wait, cfg.HandlerTimeout, cfg.TTL)
	fmt.Fprintf(w, "%-8s %9s %9s %9s %7s\n", "", "requests", "accepted", "busy", "errors")
	row := func(name string, req, acc, busy, failed int64) {
		fmt.Fprintf(w, "%-8s %9d %9d %9d %7d\n", name, req, acc, busy, failed)
	}
	h, g := &r.http, &r.grpc
	row("http", h.requests.Load(), h.accepted.Load(), h.busy.Load(), h.failed.Load())
	row("grpc", g.requests.Load(), g.accepted.Load(), g.busy.Load(), g.failed.Load())
	row("total", r.requests(), r.accepted(), h.busy.Load()+g.busy.Load(), h.failed.Load()+g.failed.Load())
	fmt.Fprintf(w, "\noverlaps seen: %d\nlock wait of accepted requests: p50 %v, p99 %v\n", r.overlaps,
		r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond))
	for i, f := range r.failures {
		if i == 5 {
			fmt.Fprintf(w, "... %d more errors\n", len(r.failures)-5)
			break
		}
		fmt.Fprintln(w, "error:", f)
	}
}

func (r *demoResult) requests() int64 { return r.http.requests.Load() + r.grpc.requests.Load() }
func (r *demoResult) accepted() int64 { return r.http.accepted.Load() + r.grpc.accepted.Load() }
