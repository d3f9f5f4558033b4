package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	lockotel "github.com/reqlock/reqlock/otel"
)

const buyRoute = "POST /items/{sku}/buy"

// TestDashboardQueriesWhatTheServiceExports starts the example on a real
// redis-server, drives traffic that makes every lockotel metric appear
// (waits, pending and held leases, busy answers, and the hotspot guard's
// hits, hand-overs, evictions and bypasses), scrapes /metrics, and checks
// grafana/reqlock.json against the scrape: it is a dashboard Grafana
// imports, every series and label its queries use is exported, and every
// reqlock metric has a panel.
func TestDashboardQueriesWhatTheServiceExports(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	cfg := defaultConfig()
	cfg.HTTPAddr, cfg.MetricsAddr, cfg.RedisAddr = "127.0.0.1:0", "127.0.0.1:0", srv.Addr()
	// Three hot items and room for two local locks: holding two of them
	// makes a buy of the third bypass the guard, and buying them in turn
	// evicts idle ones. A busy answer waits the whole wait budget.
	cfg.HotItems, cfg.HotCapacity = []string{"10001", "10002", "10003"}, 2
	cfg.Wait, cfg.Work = 2*time.Second, time.Millisecond
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	e := newEnv(t, a)

	// Both routes, both modes, uncontended.
	e.expect(e.call(http.MethodGet, "/items/20001", ""), http.StatusOK)
	e.expect(e.call(http.MethodPost, "/items/20001/buy", ""), http.StatusOK)

	// Busy: a buy of a held item waits its budget and is answered 409; the
	// holder's lease is counted as held meanwhile.
	held := e.hold("10001")
	if v := e.value(e.scrape(), "reqlock_leases_held", buyRoute); v != 1 {
		t.Errorf("reqlock_leases_held{%s} = %v while one buy holds its item, want 1", buyRoute, v)
	}
	e.expect(e.call(http.MethodPost, "/items/10001/buy", ""), http.StatusConflict)
	e.expect(held.release(), http.StatusOK)

	// Bypass: with both local locks held, the third hot item goes straight
	// to Redis. Eviction: then buying it takes the place of an idle one.
	first, second := e.hold("10001"), e.hold("10002")
	e.expect(e.call(http.MethodPost, "/items/10003/buy", ""), http.StatusOK)
	e.expect(first.release(), http.StatusOK)
	e.expect(second.release(), http.StatusOK)
	e.settle() // both local locks idle
	e.expect(e.call(http.MethodPost, "/items/10003/buy", ""), http.StatusOK)

	// Hand-over: a buy parked on the local lock of a held item gets the
	// lock from its holder. Pending shows the waiter; a round where it was
	// not parked yet at the release goes through Redis (or, on a machine
	// slow enough, ends busy before the release), so try a few.
	round := 0
	for ; round < 20 && a.guard.Stats().Handoffs == 0; round++ {
		holder := e.hold("10001")
		waiter := e.start(http.MethodPost, "/items/10001/buy")
		e.poll("reqlock_acquire_pending ≥ 1", func(fams families) bool {
			return e.value(fams, "reqlock_acquire_pending", "") >= 1 || waiter.done()
		})
		e.expect(holder.release(), http.StatusOK)
		if s := waiter.wait(); s != http.StatusOK && s != http.StatusConflict {
			t.Errorf("the waiting buy: HTTP %d, want 200 (or 409)", s)
		}
		e.settle()
	}

	t.Logf("hand-over rounds: %d; guard: %+v", round, a.guard.Stats())

	// The load of -load, briefly: every answer is one the service gives.
	res := a.load(context.Background(), 4, 40)
	if res.requests != 40 || res.failed != 0 {
		t.Errorf("load: %v", res)
	}

	fams := e.settle()
	for _, c := range []struct {
		name, route, outcome string
	}{
		{"reqlock_acquires_total", buyRoute, "acquired"},
		{"reqlock_acquires_total", buyRoute, "timeout"},
		{"reqlock_acquires_total", "GET /items/{sku}", "acquired"},
		{"reqlock_hotspot_hits_total", "", ""},
		{"reqlock_hotspot_handoffs_total", "", ""},
		{"reqlock_hotspot_evictions_total", "", ""},
		{"reqlock_hotspot_bypasses_total", "", ""},
		{"reqlock_hotspot_size", "", ""},
	} {
		if v := e.value(fams, c.name, c.route, "reqlock_outcome", c.outcome); v < 1 {
			t.Errorf("%s{route %q, outcome %q} = %v after the traffic, want ≥ 1", c.name, c.route, c.outcome, v)
		}
	}
	for name, f := range fams {
		if strings.HasPrefix(name, "reqlock_") {
			for _, m := range f.GetMetric() {
				if scope := labelValue(m, "otel_scope_name"); scope != lockotel.ScopeName {
					t.Errorf("%s has otel_scope_name %q, want lockotel's %q", name, scope, lockotel.ScopeName)
				}
			}
		}
	}

	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	problems := checkDashboard(raw, fams)
	for _, p := range problems {
		t.Error(p)
	}
	if t.Failed() {
		return
	}

	// The checks catch what they claim: each break of the dashboard below
	// is reported, with a message that names it.
	for _, c := range []struct {
		name, old, new, want string
		every                bool // replace every occurrence of old, not the first only
	}{
		{"a renamed metric", "reqlock_leases_held{", "reqlock_leases_holds{", "series reqlock_leases_holds is not in the scrape", false},
		{"a metric without its unit suffix", "reqlock_hold_duration_seconds_bucket", "reqlock_hold_duration_bucket", "series reqlock_hold_duration_bucket is not in the scrape", false},
		{"a renamed label in by", "sum by (reqlock_route, reqlock_outcome)", "sum by (reqlock_route, outcome)", `by label "outcome" is not on reqlock_acquires_total`, false},
		{"a renamed label in a matcher", `reqlock_outcome=\"timeout\"`, `reqlock_result=\"timeout\"`, `matcher label "reqlock_result" is not on reqlock_acquires_total`, false},
		{"a misspelt label value", `reqlock_outcome=\"timeout\"`, `reqlock_outcome=\"timout\"`, `matcher reqlock_outcome="timout" matches no sample of reqlock_acquires_total`, false},
		{"a label the metric lacks", "sum by (instance) (reqlock_hotspot_size)", "sum by (reqlock_route) (reqlock_hotspot_size)", `by label "reqlock_route" is not on reqlock_hotspot_size`, false},
		{"a quantile that drops le", "sum by (le, reqlock_route) (rate(reqlock_acquire_duration_seconds_bucket", "sum by (reqlock_route) (rate(reqlock_acquire_duration_seconds_bucket", "histogram_quantile: sum by (reqlock_route) drops le", false},
		{"a label_values of a missing label", "label_values(reqlock_acquires_total, reqlock_route)", "label_values(reqlock_acquires_total, route)", `label_values' label "route" is not on reqlock_acquires_total`, true},
		{"an undefined variable", `reqlock_route=~\"$route\"`, `reqlock_route=~\"$path\"`, "which no template variable defines", false},
		{"PromQL that does not parse", "sum by (reqlock_route) (reqlock_leases_held", "sum by (reqlock_route) (reqlock_leases_held))", "PromQL does not parse", false},
		{"a panel without the data source", `"uid": "${datasource}"`, `"uid": "prometheus"`, "datasource must be", false},
		{"a variable's definition that is not its query", `"definition": "label_values(reqlock_acquires_total, reqlock_route)"`, `"definition": "label_values(reqlock_acquires, reqlock_route)"`, "is not its query", false},
		{"a dropped uid", `"uid": "reqlock-locks"`, `"uid": ""`, `uid "": Grafana wants`, false},
	} {
		n := 1
		if c.every {
			n = -1
		}
		broken := strings.Replace(string(raw), c.old, c.new, n)
		if broken == string(raw) {
			t.Errorf("%s: %q is not in %s", c.name, c.old, dashboardFile)
			continue
		}
		got := strings.Join(checkDashboard([]byte(broken), fams), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: the check did not report %q; it said:\n%s", c.name, c.want, got)
		}
	}
	// A metric lockotel stops exporting.
	without := maps.Clone(fams)
	delete(without, "reqlock_acquire_pending")
	if got := strings.Join(checkDashboard(raw, without), "\n"); !strings.Contains(got, "series reqlock_acquire_pending is not in the scrape") {
		t.Errorf("a metric missing from the scrape was not reported; the check said:\n%s", got)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// env drives the service of a test over HTTP.
type env struct {
	t       *testing.T
	a       *app
	client  *http.Client
	gates   sync.Map // name → *gate, of the requests the test holds
	gateSeq atomic.Int64
}

// gateHeader names the gate a held request waits at, inside its lock.
const gateHeader = "X-Test-Gate"

// gate holds one request inside its lock until the test opens it.
type gate struct {
	entered, open chan struct{}
}

func newEnv(t *testing.T, a *app) *env {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	e := &env{t: t, a: a, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	// A request with a gate header stops inside its lock until its gate
	// opens; the others do the service's work.
	work := a.work
	a.work = func(ctx context.Context, r *http.Request) {
		g, ok := e.gates.Load(r.Header.Get(gateHeader))
		if !ok {
			work(ctx, r)
			return
		}
		close(g.(*gate).entered)
		select {
		case <-g.(*gate).open:
		case <-ctx.Done():
		}
	}
	return e
}

// call sends a request and returns its status.
func (e *env) call(method, path, gateName string) int {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.a.httpAddr+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if gateName != "" {
		req.Header.Set(gateHeader, gateName)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (e *env) expect(got, want int) {
	e.t.Helper()
	if got != want {
		e.t.Errorf("HTTP %d, want %d", got, want)
	}
}

// pending is a request in flight.
type pending struct {
	status chan int
	gate   *gate
}

// start sends a request in the background.
func (e *env) start(method, path string) *pending {
	p := &pending{status: make(chan int, 1)}
	go func() { p.status <- e.call(method, path, "") }()
	return p
}

func (p *pending) done() bool { return len(p.status) > 0 }

func (p *pending) wait() int { return <-p.status }

// release lets a held request finish and returns its status.
func (p *pending) release() int {
	close(p.gate.open)
	return <-p.status
}

// hold buys sku and returns once the buy holds its lock, stopped inside it.
func (e *env) hold(sku string) *pending {
	e.t.Helper()
	name := fmt.Sprint("gate-", e.gateSeq.Add(1))
	g := &gate{entered: make(chan struct{}), open: make(chan struct{})}
	e.gates.Store(name, g)
	p := &pending{status: make(chan int, 1), gate: g}
	go func() { p.status <- e.call(http.MethodPost, "/items/"+sku+"/buy", name) }()
	select {
	case <-g.entered:
	case s := <-p.status:
		e.t.Fatalf("the buy of %s to hold ended with HTTP %d before it held its lock", sku, s)
	case <-time.After(30 * time.Second):
		e.t.Fatalf("the buy of %s to hold did not get its lock in 30 s", sku)
	}
	return p
}

// scrape reads /metrics.
func (e *env) scrape() families {
	e.t.Helper()
	resp, err := e.client.Get("http://" + e.a.metricsAddr + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		e.t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// poll scrapes until ok holds, for up to 30 s.
func (e *env) poll(what string, ok func(families) bool) families {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams := e.scrape()
		if ok(fams) {
			return fams
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until no acquire is pending and no lease is held (a
// response may reach the client before its lease is released), and
// returns that scrape.
func (e *env) settle() families {
	e.t.Helper()
	return e.poll("no pending acquire and no held lease", func(fams families) bool {
		for _, name := range []string{"reqlock_acquire_pending", "reqlock_leases_held"} {
			for _, m := range fams[name].GetMetric() {
				if m.GetGauge().GetValue() != 0 {
					return false
				}
			}
		}
		return true
	})
}

// value sums the samples of the gauge or counter name whose route is route
// ("" for any) and whose labels match the name-value pairs kv.
func (e *env) value(fams families, name, route string, kv ...string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		if route != "" && labelValue(m, "reqlock_route") != route {
			continue
		}
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" && labelValue(m, kv[i]) != kv[i+1] {
				match = false
			}
		}
		if match {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}
