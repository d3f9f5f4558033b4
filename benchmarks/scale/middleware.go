package scale

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
	"github.com/reqlock/reqlock/grpclock"
	"github.com/reqlock/reqlock/httplock"
	"github.com/reqlock/reqlock/keyfunc"
)

// Mode is what a middleware benchmark's server does per request.
type Mode string

// The modes of a middleware benchmark.
const (
	Locked Mode = "reqlock" // the middleware locks the request's name
	ByHand Mode = "hand"    // the handler sends SET NX PX and the compare-and-delete itself
	Bare   Mode = "bare"    // neither: the handler alone, no Redis
)

// benchNames is how many distinct names the benchmarks cycle through, as
// distinct orders would be: never contended.
const benchNames = 1024

// benchTTL is the lease of every benchmark's lock.
const benchTTL = 10 * time.Second

// handLockKey is the store key reqlock uses for name, which the by-hand
// handlers use too.
func handLockKey(name string) string { return "reqlock:{" + name + "}" }

// byHand takes and frees name with the two commands, as a handler would
// by hand: SET NX PX, then the compare-and-delete script.
func byHand(ctx context.Context, c *redis.Client, name string, token string) (bool, error) {
	key := handLockKey(name)
	ok, err := setNX(ctx, c, key, token, benchTTL)
	if err != nil || !ok {
		return false, err
	}
	return true, handRelease(ctx, c, key, token)
}

// handToken is the by-hand handlers' token: a fixed one would do as well
// for distinct names, but a real handler draws one per request.
func handToken() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// serveLoop serves h over loopback (net/http/httptest) and sends it b.N
// POST /orders/{i} requests from one keep-alive client, cycling through
// the names, and fails b if one is not answered 204.
func serveLoop(b *testing.B, h http.Handler) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	urls := make([]string, benchNames)
	for i := range urls {
		urls[i] = srv.URL + "/orders/" + strconv.Itoa(i)
	}
	post := func(i int) {
		resp, err := client.Post(urls[i%len(urls)], "", nil)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	for i := range 8 { // connections dialled, scripts loaded
		post(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		post(i)
	}
	b.StopTimer()
}

// newLocker is the Locker of the middleware benchmarks: defaults but the
// TTL (holder identity in the token included).
func newLocker(c *redis.Client) *core.Locker { return core.New(c, core.WithTTL(benchTTL)) }

// BenchGin is a POST /orders/:id through gin: Locked, ginlock locks
// "order:{param.id}"; ByHand, the handler sends the two commands itself;
// Bare, the handler alone.
func BenchGin(b *testing.B, addr string, mode Mode) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	switch mode {
	case Locked:
		l := newLocker(c)
		defer l.Close()
		key, _ := keyfunc.Template("order:{param.id}")
		r.POST("/orders/:id", ginlock.New(l, key, ginlock.WithTTL(benchTTL)), func(g *gin.Context) { g.Status(http.StatusNoContent) })
	case Bare:
		r.POST("/orders/:id", func(g *gin.Context) { g.Status(http.StatusNoContent) })
	default:
		r.POST("/orders/:id", func(g *gin.Context) {
			ok, err := byHand(g.Request.Context(), c, "order:"+g.Param("id"), handToken())
			if err != nil || !ok {
				g.Status(http.StatusConflict)
				return
			}
			g.Status(http.StatusNoContent)
		})
	}
	serveLoop(b, r)
}

// BenchHTTP is a POST /orders/{id} through a Go 1.22 ServeMux: Locked,
// httplock locks "order:{param.id}"; ByHand, the handler sends the two
// commands itself; Bare, the handler alone.
func BenchHTTP(b *testing.B, addr string, mode Mode) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	mux := http.NewServeMux()
	switch mode {
	case Locked:
		l := newLocker(c)
		defer l.Close()
		key, _ := keyfunc.Template("order:{param.id}")
		lock := httplock.New(l, key, httplock.WithTTL(benchTTL))
		mux.Handle("POST /orders/{id}", lock(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	case Bare:
		mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	default:
		mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			ok, err := byHand(r.Context(), c, "order:"+r.PathValue("id"), handToken())
			if err != nil || !ok {
				w.WriteHeader(http.StatusConflict)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	serveLoop(b, mux)
}

// healthServer answers Check with SERVING after hand, if set.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	hand func(ctx context.Context, name string) error
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.hand != nil {
		if err := h.hand(ctx, req.GetService()); err != nil {
			return nil, status.Error(codes.Aborted, err.Error())
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// BenchGRPC is a unary call (grpc.health.v1.Health/Check, the service
// field naming the order) to a gRPC server on loopback: Locked, grpclock
// locks "{field.service}"; ByHand, the method sends the two commands
// itself; Bare, the method alone. Client and server run in this process: the allocations
// are both sides'.
func BenchGRPC(b *testing.B, addr string, mode Mode) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var opts []grpc.ServerOption
	hs := &healthServer{}
	switch mode {
	case Locked:
		l := newLocker(c)
		defer l.Close()
		key, _ := keyfunc.Template("{field.service}")
		opts = append(opts, grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(l, key, grpclock.WithTTL(benchTTL))))
	case Bare:
	default:
		hs.hand = func(ctx context.Context, name string) error {
			ok, err := byHand(ctx, c, name, handToken())
			if err == nil && !ok {
				err = fmt.Errorf("scale: %s is held", name)
			}
			return err
		}
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	reqs := make([]*healthpb.HealthCheckRequest, benchNames)
	for i := range reqs {
		reqs[i] = &healthpb.HealthCheckRequest{Service: "order:" + strconv.Itoa(i)}
	}
	ctx := context.Background()
	for i := range 8 {
		if _, err := client.Check(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := client.Check(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatalf("call %d: %v", i, err)
		}
	}
}

// BenchCommands is the two commands alone, without a server: by hand ("hand"),
// through reqlock's Locker ("reqlock") or through bsm/redislock
// ("bsm/redislock"): Obtain and Release, its own scripts.
func BenchCommands(b *testing.B, addr, impl string) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx := context.Background()
	var cycle func(name string) error
	switch impl {
	case "hand":
		cycle = func(name string) error {
			ok, err := byHand(ctx, c, name, handToken())
			if err == nil && !ok {
				err = fmt.Errorf("scale: %s is held", name)
			}
			return err
		}
	case "reqlock":
		l := newLocker(c)
		defer l.Close()
		cycle = func(name string) error {
			lease, err := l.Acquire(ctx, name)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	case "bsm/redislock":
		rl := redislock.New(c)
		cycle = func(name string) error {
			lock, err := rl.Obtain(ctx, handLockKey(name), benchTTL, nil)
			if err != nil {
				return err
			}
			return lock.Release(ctx)
		}
	default:
		b.Fatalf("scale: unknown implementation %q", impl)
	}
	names := make([]string, benchNames)
	for i := range names {
		names[i] = "order:" + strconv.Itoa(i)
	}
	for i := range 8 {
		if err := cycle(names[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := cycle(names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
	}
}

// MiddlewareResult is one benchmark of the middleware section.
type MiddlewareResult struct {
	Server string // "gin", "net/http", "gRPC unary", or "none" for the bare commands
	Impl   string // a Mode, or for the bare commands "reqlock", "hand", "bsm/redislock"
	N      int
	NsOp   float64
	Allocs int64 // per request
	Bytes  int64 // per request
	// Rounds are the time per request of each round, in the order run:
	// the rounds of two benchmarks of one server ran side by side.
	Rounds []float64
}

// Middleware runs every benchmark of the section once, with testing.Benchmark
// (its -test.benchtime), against the redis-server at addr. The benchmarks of
// one server run in turn, locked, by hand and bare, rounds times, each result the
// median of its rounds by time, so that a drift of the machine's load
// falls on both.
func Middleware(addr string, rounds int) ([]MiddlewareResult, error) {
	type bench struct {
		server, impl string
		f            func(b *testing.B)
	}
	var benches []bench
	for _, s := range []struct {
		name string
		f    func(*testing.B, string, Mode)
	}{{"gin", BenchGin}, {"net/http", BenchHTTP}, {"gRPC unary", BenchGRPC}} {
		for _, m := range []Mode{Locked, ByHand, Bare} {
			benches = append(benches, bench{s.name, string(m), func(b *testing.B) { s.f(b, addr, m) }})
		}
	}
	for _, impl := range []string{"reqlock", "hand", "bsm/redislock"} {
		benches = append(benches, bench{"none", impl, func(b *testing.B) { BenchCommands(b, addr, impl) }})
	}
	runs := make([][]testing.BenchmarkResult, len(benches))
	for range max(rounds, 1) {
		for i, bb := range benches {
			r := testing.Benchmark(bb.f)
			if r.N == 0 {
				return nil, fmt.Errorf("scale: benchmark %s %s failed", bb.server, bb.impl)
			}
			runs[i] = append(runs[i], r)
		}
	}
	out := make([]MiddlewareResult, len(benches))
	for i, bb := range benches {
		r := medianRun(runs[i])
		out[i] = MiddlewareResult{Server: bb.server, Impl: bb.impl, N: r.N, NsOp: float64(r.T.Nanoseconds()) / float64(r.N), Allocs: r.AllocsPerOp(), Bytes: r.AllocedBytesPerOp()}
		for _, x := range runs[i] {
			out[i].Rounds = append(out[i].Rounds, float64(x.T.Nanoseconds())/float64(x.N))
		}
	}
	return out, nil
}

// medianRun is the run of median time per operation.
func medianRun(rs []testing.BenchmarkResult) testing.BenchmarkResult {
	s := append([]testing.BenchmarkResult(nil), rs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j].NsPerOp() < s[i].NsPerOp() {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
