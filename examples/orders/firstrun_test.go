package main

// Tests of what a newcomer meets first: the flags and their help, the
// defaults of `go run ./examples/orders`, the banner's commands, and the
// answers to a wrong body or a wrong method.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/examples/orders/ordersv1"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// parseFlags parses args as main does, with getenv as the environment, and
// returns the configuration and the help that -help prints.
func parseFlags(t *testing.T, args []string, getenv func(string) string) (Config, string) {
	t.Helper()
	cfg := defaultConfig()
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	defineFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg.fromEnv(getenv)
	fs.Usage()
	return cfg, help.String()
}

func noEnv(string) string { return "" }

// TestFlagHelpNamesTheEnvironment: a flag that falls back to an environment
// variable names it in its help: -store-addr every store's, -telemetry the
// OTEL_* variables it reads; -http and -grpc say that the default is
// loopback only and how to listen elsewhere.
func TestFlagHelpNamesTheEnvironment(t *testing.T) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	defineFlags(fs, &cfg)
	usage := func(name string) string {
		f := fs.Lookup(name)
		if f == nil {
			t.Fatalf("no flag -%s", name)
		}
		return f.Usage
	}
	for store, env := range storeEnv {
		if !strings.Contains(usage("store-addr"), env+" (-store "+store) {
			t.Errorf("-store-addr's help does not name %s for -store %s: %q", env, store, usage("store-addr"))
		}
	}
	if !strings.Contains(usage("store-addr"), "miniredis") {
		t.Errorf("-store-addr's help does not say that no address at all means an embedded miniredis: %q", usage("store-addr"))
	}
	for _, env := range []string{ // every variable that otlpWanted and otlpProtocol read
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
		"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	} {
		if !strings.Contains(usage("telemetry"), env) {
			t.Errorf("-telemetry's help does not name %s", env)
		}
	}
	for name, every := range map[string]string{"http": ":8080", "grpc": ":9090"} {
		if u := usage(name); !strings.Contains(u, "loopback interface only") || !strings.Contains(u, "-"+name+" "+every) || !strings.Contains(u, "every interface") {
			t.Errorf("-%s's help does not say how to listen beyond loopback: %q", name, u)
		}
	}
}

// TestNoFlagsNoEnvironment: `go run ./examples/orders`, with no flags and no
// environment, listens on loopback ports (127.0.0.1:8080 and :9090) with an
// embedded miniredis, and serves; the flags and the environment change that.
func TestNoFlagsNoEnvironment(t *testing.T) {
	adaptertest.LeakCheck(t)
	cfg, help := parseFlags(t, nil, noEnv)
	if cfg.HTTPAddr != "127.0.0.1:8080" || cfg.GRPCAddr != "127.0.0.1:9090" || cfg.AdminAddr != "127.0.0.1:6060" || cfg.Store != "redis" || cfg.StoreAddr != "" || cfg.Telemetry != "auto" || cfg.Demo {
		t.Fatalf("defaults: %+v", cfg)
	}
	if !strings.Contains(help, "Usage: go run ./examples/orders [flags]") || !strings.Contains(help, "-store-addr") {
		t.Errorf("help:\n%s", help)
	}
	// Served as parsed, but on free ports of the same host: the default
	// ports may be taken on the machine that runs the tests.
	for _, addr := range []*string{&cfg.HTTPAddr, &cfg.GRPCAddr, &cfg.AdminAddr} {
		host, _, err := net.SplitHostPort(*addr)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			t.Fatalf("default address %q is not on the loopback interface", *addr)
		}
		*addr = net.JoinHostPort(host, "0")
	}
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	for _, addr := range []string{a.httpAddr, a.grpcAddr, a.adminAddr} {
		if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
			t.Errorf("listening on %s, not on loopback", addr)
		}
	}
	if !strings.Contains(a.storeAt, "embedded miniredis") {
		t.Errorf("locks in %q, want an embedded miniredis", a.storeAt)
	}
	if code, body := post(t, "http://"+a.httpAddr+"/orders/1", `{"amount_cents":1}`); code != http.StatusOK {
		t.Errorf("create: %d %s", code, body)
	}
	// Its locks can be inspected on the embedded miniredis too (the reqlock
	// command and Locker.Inspect), with the holder in the token.
	lease, err := a.store.locker.Acquire(context.Background(), lockName("1"), core.Route("/test"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.store.locker.Inspect(context.Background(), lockName("1"))
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != lease.Token() || st.Holders[0].Holder.Route != "/test" {
		t.Errorf("Inspect on the embedded miniredis = %+v, %v; want the lease's holder", st, err)
	}
	if names, _, err := a.store.locker.List(context.Background(), "order:", "", 10); err != nil || len(names) != 1 || names[0] != lockName("1") {
		t.Errorf("List on the embedded miniredis = %v, %v; want [%s]", names, err, lockName("1"))
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Error(err)
	}

	env := map[string]string{"REDIS_ADDR": "redis.example:6379", "ETCD_ENDPOINTS": "etcd.example:2379"}
	if cfg, _ := parseFlags(t, nil, func(k string) string { return env[k] }); cfg.StoreAddr != "redis.example:6379" {
		t.Errorf("REDIS_ADDR: store address %q", cfg.StoreAddr)
	}
	if cfg, _ := parseFlags(t, []string{"-store", "etcd"}, func(k string) string { return env[k] }); cfg.StoreAddr != "etcd.example:2379" {
		t.Errorf("-store etcd with ETCD_ENDPOINTS: store address %q", cfg.StoreAddr)
	}
	if cfg, _ := parseFlags(t, []string{"-store-addr", "other:6379"}, func(k string) string { return env[k] }); cfg.StoreAddr != "other:6379" {
		t.Errorf("-store-addr and REDIS_ADDR: store address %q, want the flag's", cfg.StoreAddr)
	}
	if cfg, _ := parseFlags(t, []string{"-http", ":8081", "-grpc", "0.0.0.0:9091"}, noEnv); cfg.HTTPAddr != ":8081" || cfg.GRPCAddr != "0.0.0.0:9091" {
		t.Errorf("-http and -grpc: %q %q", cfg.HTTPAddr, cfg.GRPCAddr)
	}
}

// curlCall is one curl command of the banner.
type curlCall struct {
	method, url, body string
	header            http.Header
}

// bannerCurls returns the curl commands of the banner, a line at a time;
// a line "A & B; wait" runs A and B at once.
func bannerCurls(t *testing.T, banner string) [][]curlCall {
	t.Helper()
	var lines [][]curlCall
	for _, line := range strings.Split(banner, "\n") {
		if !strings.HasPrefix(line, "  curl ") {
			continue
		}
		line = strings.TrimSuffix(strings.TrimSpace(line), "; wait")
		var calls []curlCall
		for _, cmd := range strings.Split(line, " & ") {
			calls = append(calls, parseCurl(t, cmd))
		}
		lines = append(lines, calls)
	}
	return lines
}

// parseCurl parses a curl command of the banner: words, 'quoted' words,
// and the options -X, -H and -d.
func parseCurl(t *testing.T, cmd string) curlCall {
	t.Helper()
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for _, r := range cmd {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", cmd)
	}
	if inWord {
		words = append(words, w.String())
	}
	c := curlCall{method: http.MethodGet, header: http.Header{}}
	if len(words) == 0 || words[0] != "curl" {
		t.Fatalf("not a curl command: %q", cmd)
	}
	for i := 1; i < len(words); i++ {
		switch words[i] {
		case "-X", "-H", "-d":
			if i+1 == len(words) {
				t.Fatalf("%s without its argument in %q", words[i], cmd)
			}
			v := words[i+1]
			switch words[i] {
			case "-X":
				c.method = v
			case "-H":
				k, hv, ok := strings.Cut(v, ": ")
				if !ok {
					t.Fatalf("header %q in %q", v, cmd)
				}
				c.header.Add(k, hv)
			case "-d":
				c.body = v
			}
			i++
		default:
			if strings.HasPrefix(words[i], "-") || c.url != "" {
				t.Fatalf("unexpected %q in %q", words[i], cmd)
			}
			c.url = words[i]
		}
	}
	return c
}

// send makes the call as curl would, and returns the status and body.
func (c curlCall) send(t *testing.T) (int, string) {
	req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header = c.header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBannerCommandsWork: the curl commands that the banner prints work as
// they are printed, against the service that printed them: create, two pays
// at once (one pays, the other finds the order paid or gives up busy),
// cancel (refused: paid), read; create two orders at once and transfer
// between them; buy one unit of the flash sale's item and read its stock.
// The grpcurl commands are said to be optional, with what grpcurl is.
func TestBannerCommandsWork(t *testing.T) {
	adaptertest.LeakCheck(t)
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var banner strings.Builder
	a.printUsage(&banner)
	lines := bannerCurls(t, banner.String())
	if len(lines) != 8 {
		t.Fatalf("%d curl lines, want 8:\n%s", len(lines), banner.String())
	}
	want := []struct {
		method, path string
		codes        [][]int // per line: the statuses each call may get
	}{
		{http.MethodPost, "/orders/42", [][]int{{200}}},
		{http.MethodPost, "/orders/42/pay", [][]int{{200, 409, 422}, {200, 409, 422}}},
		{http.MethodPost, "/orders/42/cancel", [][]int{{422}}},
		{http.MethodGet, "/orders/42", [][]int{{200}}},
		{http.MethodPost, "/orders/4", [][]int{{200}, {200}}}, // 44 and 45: checked below
		{http.MethodPost, "/orders/44/transfer/45", [][]int{{200}}},
		{http.MethodPost, "/items/" + flashSKU + "/buy", [][]int{{200}}},
		{http.MethodGet, "/items/" + flashSKU, [][]int{{200}}},
	}
	for i, calls := range lines {
		if len(calls) != len(want[i].codes) {
			t.Fatalf("line %d: %d commands, want %d", i, len(calls), len(want[i].codes))
		}
		got := make([]int, len(calls))
		bodies := make([]string, len(calls))
		var wg sync.WaitGroup
		for j, c := range calls {
			path := want[i].path
			if i == 4 {
				path += fmt.Sprint(4 + j)
			}
			if c.method != want[i].method || c.url != "http://"+a.httpAddr+path {
				t.Fatalf("line %d: %s %s, want %s http://%s%s", i, c.method, c.url, want[i].method, a.httpAddr, path)
			}
			wg.Add(1)
			go func() { defer wg.Done(); got[j], bodies[j] = c.send(t) }()
		}
		wg.Wait()
		for j := range calls {
			ok := false
			for _, code := range want[i].codes[j] {
				ok = ok || got[j] == code
			}
			if !ok {
				t.Errorf("line %d, command %d: %d %s; want one of %v", i, j, got[j], bodies[j], want[i].codes[j])
			}
		}
		if i == 1 && got[0] != 200 && got[1] != 200 {
			t.Errorf("neither pay paid: %v %q", got, bodies)
		}
	}
	if o, _ := a.store.get("42"); o.State != statePaid || o.AmountCents != 1250 {
		t.Errorf("order 42 after the banner's commands: %+v", o)
	}
	a44, _ := a.store.get("44")
	a45, _ := a.store.get("45")
	if a44.AmountCents != 750 || a45.AmountCents != 750 {
		t.Errorf("orders 44 and 45 after the banner's transfer: %+v %+v", a44, a45)
	}
	if it, _ := a.store.item(flashSKU); it.Sold != 1 || it.Left != flashPerSegment*itemSegments-1 {
		t.Errorf("item %s after the banner's buy: %+v", flashSKU, it)
	}
	for _, s := range []string{
		"grpcurl, a curl-like command-line client for gRPC that is not part of this\nrepository (https://github.com/fullstorydev/grpcurl)",
		"optionally",
		"grpcurl -plaintext -d '{\"order_id\":\"43\",\"amount_cents\":990}' " + a.grpcAddr + " orders.v1.Orders/Create",
		"go run ./examples/orders -demo",
	} {
		if !strings.Contains(banner.String(), s) {
			t.Errorf("the banner lacks %q:\n%s", s, banner.String())
		}
	}
}

// TestBannerCommandsWithCurl runs the banner's curl lines with the real
// curl, through sh, where both are installed.
func TestBannerCommandsWithCurl(t *testing.T) {
	curl, errCurl := exec.LookPath("curl")
	sh, errSh := exec.LookPath("sh")
	if errCurl != nil || errSh != nil {
		t.Skip("needs curl and sh:", errCurl, errSh)
	}
	adaptertest.LeakCheck(t)
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var banner strings.Builder
	a.printUsage(&banner)
	var env []string // no proxy between curl and the loopback server
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(k), "_proxy") {
			env = append(env, kv)
		}
	}
	env = append(env, "NO_PROXY=*")
	var out []string
	for _, line := range strings.Split(banner.String(), "\n") {
		if !strings.HasPrefix(line, "  curl ") {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, sh, "-c", strings.TrimSpace(line))
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s (curl at %s): %v\n%s", line, curl, err, b)
		}
		out = append(out, string(b))
	}
	if len(out) != 8 {
		t.Fatalf("%d curl lines, want 8", len(out))
	}
	for i, want := range []string{`"state":"created"`, `"state":"paid"`, "the order is paid", `"state":"paid"`,
		`"amount_cents":500}`, `"to":{"id":"45","state":"created","amount_cents":750}`, `"segment":0,"segment_left":19`, `"left":99,"sold":1}`} {
		if !strings.Contains(out[i], want) {
			t.Errorf("curl line %d printed %q; want %q in it", i, out[i], want)
		}
	}
}

// answerOf decodes a JSON answer.
func answerOf(t *testing.T, body string) (msg string, fields map[string]string, hasOrder bool) {
	t.Helper()
	var a struct {
		Error  string            `json:"error"`
		Fields map[string]string `json:"fields"`
		Order  *Order            `json:"order"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", body, err)
	}
	return a.Error, a.Fields, a.Order != nil
}

// TestCreateBodyAnswers: a create whose body is not JSON is answered 400,
// saying so and where the decoder stopped; JSON that is not a valid order
// 422, naming each missing, unknown or invalid field, without echoing an
// empty order; neither takes a lock. An existing order is echoed with its
// 422; gRPC refuses a non-positive amount as InvalidArgument.
func TestCreateBodyAnswers(t *testing.T) {
	adaptertest.LeakCheck(t)
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	url := "http://" + a.httpAddr + "/orders/"
	for _, tc := range []struct {
		body   string
		code   int
		says   []string // in the error
		fields []string // named in fields
	}{
		{`{}`, 422, []string{"the order is invalid", "amount_cents is missing"}, []string{"amount_cents"}},
		{`null`, 422, []string{"amount_cents is missing"}, []string{"amount_cents"}},
		{`{"amount_cents":0}`, 422, []string{"amount_cents must be positive, not 0"}, []string{"amount_cents"}},
		{`{"amount_cents":-5}`, 422, []string{"amount_cents must be positive, not -5"}, []string{"amount_cents"}},
		{`{"amount_cents":"12"}`, 422, []string{`amount_cents must be a whole number of cents, such as 1250, not "12"`}, []string{"amount_cents"}},
		{`{"amount_cents":12.5}`, 422, []string{"not 12.5"}, []string{"amount_cents"}},
		{`{"amount":1250}`, 422, []string{`"amount" is not a field of an order`, "amount_cents is missing"}, []string{"amount", "amount_cents"}},
		{`[1250]`, 422, []string{"the body is a JSON array, not an object"}, nil},
		{`{"amount_cents":`, 400, []string{"the body is not valid JSON", "it ends, after 16 bytes, before the JSON value is complete"}, nil},
		{"{\n  \"amount_cents\": 12,\n  x\n}", 400, []string{"the body is not valid JSON", "invalid character 'x'", "at line 3, column 3"}, nil},
		{`{"amount_cents":1}{}`, 400, []string{"the body is not valid JSON", "after top-level value", "at line 1, column 19"}, nil},
		{``, 400, []string{"the body is empty", `{"amount_cents":1250}`}, nil},
	} {
		before := a.acquires()
		id := orderID(t)
		code, body := post(t, url+id, tc.body)
		msg, fields, hasOrder := answerOf(t, body)
		if code != tc.code || hasOrder {
			t.Errorf("%q: %d %s; want %d without an order", tc.body, code, body, tc.code)
		}
		for _, s := range tc.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%q: the error %q does not say %q", tc.body, msg, s)
			}
		}
		if strings.Contains(msg, "EOF") {
			t.Errorf("%q: the error %q speaks of EOF", tc.body, msg)
		}
		if len(fields) != len(tc.fields) {
			t.Errorf("%q: fields %v, want %v", tc.body, fields, tc.fields)
		}
		for _, f := range tc.fields {
			if fields[f] == "" {
				t.Errorf("%q: fields %v do not name %s", tc.body, fields, f)
			}
		}
		if n := a.acquires() - before; n != 0 {
			t.Errorf("%q: %d locks taken for a body that was refused", tc.body, n)
		}
		if _, ok := a.store.get(id); ok {
			t.Errorf("%q: stored", tc.body)
		}
	}

	id := orderID(t)
	if code, body := post(t, url+id, `{"Amount_Cents":700}`); code != 200 || !strings.Contains(body, `"amount_cents":700`) {
		t.Fatalf("create (a field name in other case, as encoding/json binds it): %d %s", code, body)
	}
	code, body := post(t, url+id, `{"amount_cents":1}`)
	if msg, _, hasOrder := answerOf(t, body); code != 422 || !hasOrder || !strings.Contains(msg, "already exists") || !strings.Contains(body, `"id":"`+id+`"`) {
		t.Errorf("create of an existing order: %d %s; want 422 with the existing order", code, body)
	}

	conn, err := grpc.NewClient(a.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = ordersv1.NewOrdersClient(conn).Create(context.Background(), &ordersv1.OrderRequest{OrderId: orderID(t)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "amount_cents must be positive") {
		t.Errorf("gRPC create without an amount: %v, want InvalidArgument", err)
	}
}

// TestWrongMethodIs405: a method that a path does not have is answered 405
// with an Allow header and a JSON error, not 404; an unknown path 404 with a
// JSON error. Neither takes a lock.
func TestWrongMethodIs405(t *testing.T) {
	adaptertest.LeakCheck(t)
	a, err := start(testConfig(redistest.Start(t).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	before := a.acquires()
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodDelete, "/orders/42", 405, "GET, POST"},
		{http.MethodPut, "/orders/42", 405, "GET, POST"},
		{http.MethodGet, "/orders/42/pay", 405, "POST"},
		{http.MethodDelete, "/orders/42/cancel", 405, "POST"},
		{http.MethodGet, "/nowhere", 404, ""},
		{http.MethodPost, "/orders/42/refund", 404, ""},
		{http.MethodGet, "/orders/42/transfer/43", 405, "POST"},
		{http.MethodGet, "/items/10001/buy", 405, "POST"},
		{http.MethodPost, "/items/10001", 405, "GET"},
		{http.MethodPost, "/items/10001/sell", 404, ""},
	} {
		req, err := http.NewRequest(tc.method, "http://"+a.httpAddr+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		msg, _, _ := answerOf(t, string(b))
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
		if !strings.Contains(msg, tc.method) || !strings.Contains(msg, tc.path) || (tc.allow != "" && !strings.Contains(msg, "allowed: "+tc.allow)) {
			t.Errorf("%s %s: the error %q does not say what was asked and what is allowed", tc.method, tc.path, msg)
		}
		for _, route := range []string{"GET /orders/:id", "POST /orders/:id/pay", "POST /orders/:id/transfer/:to", "GET /items/:sku", "POST /items/:sku/buy"} {
			if tc.code == 404 && !strings.Contains(msg, route) {
				t.Errorf("%s %s: the 404 %q does not name the route %s", tc.method, tc.path, msg, route)
			}
		}
	}
	if n := a.acquires() - before; n != 0 {
		t.Errorf("%d locks taken for requests without a route", n)
	}
}

// TestBannerNamesTheReqlockCommand: the banner tells how to see the locks
// from a shell, with the reqlock command's flag for this store.
func TestBannerNamesTheReqlockCommand(t *testing.T) {
	adaptertest.LeakCheck(t)
	srv := redistest.Start(t)
	a, err := start(testConfig(srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var banner strings.Builder
	a.printUsage(&banner)
	if want := "go run ./cmd/reqlock --store redis://" + srv.Addr() + " watch order:"; !strings.Contains(banner.String(), want) {
		t.Errorf("banner lacks %q:\n%s", want, banner.String())
	}
}
